package runtimetest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/message"
)

// DuplicateArrival drives eng by hand through a split of three items and
// delivers aggregator arrivals twice, as RabbitMQ does after a crash before
// an ack: a repeated arrival must never count twice nor block the barrier,
// and a repeat of the completing arrival republishes the same effects.
func DuplicateArrival(t *testing.T, eng *engine.Engine, execID string) {
	t.Helper()
	ctx := context.Background()
	wf, err := eng.Compile([]byte(wf("dup", `
		{"id":"each","type":"split","parameters":{"input_array":"{{ $trigger.n }}"}},
		{"id":"sq","type":"set","parameters":{"values":{"v":"{{ $item * $item }}"}}},
		{"id":"agg","type":"aggregator","parameters":{"value":"{{ $sq.v }}"}}`,
		`{"id":"e1","src":"start","dst":"each"},{"id":"e2","src":"each","dst":"sq"},{"id":"e3","src":"sq","dst":"agg"}`)))
	if err != nil {
		t.Fatal(err)
	}
	handle := func(m *message.NodeExecution) *engine.Effects {
		t.Helper()
		var f engine.Effects
		if err := eng.Handle(ctx, engine.Delivery{}, m, &f); err != nil {
			t.Fatalf("handle %s: %v", m.CurrentNode, err)
		}
		return &f
	}
	var start engine.Effects
	if err := eng.Start(ctx, wf, execID, map[string]any{"n": []any{1.0, 2.0, 3.0}}, &start); err != nil {
		t.Fatal(err)
	}
	branches := handle(start.Next[0].Msg).Next
	if len(branches) != 3 {
		t.Fatalf("split published %d branches, want 3", len(branches))
	}
	// Each branch's node arrives at the aggregator as it finishes; the
	// branch messages are the arrivals to deliver twice.
	var arrivals []*message.NodeExecution
	for _, b := range branches {
		arrivals = append(arrivals, b.Msg)
	}
	fired := func(f *engine.Effects) bool {
		for _, s := range f.Statuses {
			if s.NodeID == "agg" && s.Status == message.StatusSuccess {
				return true
			}
		}
		return false
	}
	for i, m := range []*message.NodeExecution{arrivals[0], arrivals[0], arrivals[1], arrivals[1]} {
		if f := handle(m); fired(f) || f.Completion != nil {
			t.Fatalf("arrival %d (with duplicates) fired the aggregator before every item arrived", i)
		}
	}
	last := handle(arrivals[2])
	if !fired(last) || last.Completion == nil {
		t.Fatal("the last item's arrival did not fire the aggregator")
	}
	out := last.Completion.FinalContext["$agg"].(map[string]any)
	if got, _ := json.Marshal(normalise(out["items"])); string(got) != `[1,4,9]` {
		t.Fatalf("$agg.items = %s, want [1,4,9]", got)
	}
	again := handle(arrivals[2])
	if again.Completion == nil || again.Completion.ExecutionID != execID || again.Completion.Status != last.Completion.Status {
		t.Fatal("a repeat of the completing arrival did not republish the same completion")
	}
}
