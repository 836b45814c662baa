package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rune-org/rune/engine"
)

const startAtDef = `{"id":"ra","nodes":[
	{"id":"start","type":"trigger","trigger":true},
	{"id":"a","type":"set","parameters":{"values":{"v":"{{ $trigger.n }}"}}},
	{"id":"b","type":"set","parameters":{"values":{"w":"{{ $a.v + 1 }}"}}},
	{"id":"each","type":"split","parameters":{"input_array":"{{ $trigger.items }}"}},
	{"id":"in","type":"set","parameters":{"values":{"x":"{{ $item }}"}}},
	{"id":"agg","type":"aggregator"},
	{"id":"c","type":"set","parameters":{"values":{"done":true}}}],
	"edges":[{"id":"e1","src":"start","dst":"a"},{"id":"e2","src":"a","dst":"b"},{"id":"e3","src":"b","dst":"each"},
	{"id":"e4","src":"each","dst":"in"},{"id":"e5","src":"in","dst":"agg"},{"id":"e6","src":"agg","dst":"c"}]}`

// StartAt runs from the node given with the context given: the nodes
// before it never run, and the execution completes as usual.
func TestStartAtSkipsTheNodesBefore(t *testing.T) {
	h := newHarness(t, startAtDef)
	acc := h.wf.ContextAt("b", map[string]any{"n": 4.0, "items": []any{1.0, 2.0}}, map[string]any{"a": map[string]any{"v": 4.0}, "in": "not upstream"})
	if _, ok := acc["$in"]; ok || acc["$a"] == nil || acc["$trigger"] == nil {
		t.Fatalf("ContextAt(b) = %v, want $trigger and $a only", acc)
	}
	var f engine.Effects
	if err := h.eng.StartAt(context.Background(), h.wf, "exec_test", "b", acc, &f); err != nil {
		t.Fatal(err)
	}
	h.absorb(&f)
	if len(h.queue) != 1 || h.queue[0].Msg.CurrentNode != "b" {
		t.Fatalf("first messages %v, want one to b", h.queue)
	}
	h.drain()
	c := h.completion()
	if c.Status != "completed" || h.ran("a") {
		t.Fatalf("completion %s (a ran: %v), want completed without a", c.Status, h.ran("a"))
	}
	if w, _ := c.FinalContext["$b"].(map[string]any); num(w["w"]) != 5 {
		t.Fatalf("final context %v, want $b.w 5 (from the given $a)", c.FinalContext)
	}
}

// CheckStartAt refuses, naming the node, what a re-run cannot start at.
func TestCheckStartAt(t *testing.T) {
	h := newHarness(t, startAtDef)
	for from, want := range map[string]string{
		"nope":  `"nope": is not a node`,
		"":      "required",
		"start": "is the trigger",
		"in":    `split "each"`,
		"agg":   "an aggregator",
	} {
		err := h.wf.CheckStartAt(from)
		var se *engine.StartNodeError
		if !errors.As(err, &se) || se.Node != from || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckStartAt(%q) = %v, want a StartNodeError containing %q", from, err, want)
		}
	}
	for _, ok := range []string{"a", "b", "each", "c"} {
		if err := h.wf.CheckStartAt(ok); err != nil {
			t.Errorf("CheckStartAt(%q) = %v, want nil", ok, err)
		}
	}
	var f engine.Effects
	if err := h.eng.StartAt(context.Background(), h.wf, "exec_x", "in", nil, &f); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("StartAt inside a split = %v, want ErrInvalid", err)
	}
	merge := newHarness(t, `{"id":"mg","nodes":[
		{"id":"start","type":"trigger","trigger":true},
		{"id":"l","type":"set","parameters":{"values":{"v":1}}},
		{"id":"r","type":"set","parameters":{"values":{"v":2}}},
		{"id":"m","type":"merge"}],
		"edges":[{"id":"e1","src":"start","dst":"l"},{"id":"e2","src":"start","dst":"r"},{"id":"e3","src":"l","dst":"m"},{"id":"e4","src":"r","dst":"m"}]}`)
	if err := merge.wf.CheckStartAt("l"); err == nil || !strings.Contains(err.Error(), `merge "m"`) {
		t.Fatalf("CheckStartAt(l) before a merge = %v, want a refusal naming merge m", err)
	}
}
