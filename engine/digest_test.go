package engine_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	coordmem "github.com/rune-org/rune/coord/memory"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/message"
)

const digestDef = `{"id":"dg","nodes":[
	{"id":"start","type":"trigger","trigger":true},
	{"id":"dg","type":"digest","parameters":{"key":"{{ $trigger.user }}","window":"1h","value":"{{ $trigger.n }}"}},
	{"id":"after","type":"set","parameters":{"values":{"count":"{{ $dg.count }}"}}}],
	"edges":[{"id":"e1","src":"start","dst":"dg"},{"id":"e2","src":"dg","dst":"after"}]}`

// TestDigestRedelivered: every message reaching the digest is handled twice
// (a redelivery), and the opener's timer fires twice: the two that joined
// complete with digested_into the first, the first waits once and goes on
// with each value once, its own first (a repeated resume replays it).
func TestDigestRedelivered(t *testing.T) {
	h := newHarnessWith(t, digestDef, func(c *engine.Config) { c.Digests = coordmem.NewDigests() })
	ids := []string{"ex_a", "ex_b", "ex_c"}
	for i, id := range ids {
		var f engine.Effects
		if err := h.eng.Start(context.Background(), h.wf, id, map[string]any{"user": "u1", "n": i}, &f); err != nil {
			t.Fatal(err)
		}
		h.absorb(&f)
		d := h.queue[0]
		h.step(0)
		h.queue = append(h.queue, d) // redelivered
		h.drain()
	}
	final := map[string]*message.Completion{}
	for _, c := range h.done {
		final[c.ExecutionID] = c
	}
	if len(final) != 2 || final["ex_a"] != nil {
		t.Fatalf("completions %v before the window closed, want ex_b and ex_c", final)
	}
	for _, id := range ids[1:] {
		if got, _ := json.Marshal(final[id].FinalContext["$dg"]); string(got) != `{"digested_into":"ex_a"}` || final[id].FinalContext["$after"] != nil {
			t.Fatalf("%s: $dg %s, $after %v; want digested_into ex_a and no $after", id, got, final[id].FinalContext["$after"])
		}
	}
	before := len(h.done)
	ts, err := h.timers.Claim(context.Background(), time.Now().Add(2*time.Hour), 10, time.Minute)
	if err != nil || len(ts) != 1 {
		t.Fatalf("claimed %d timers (%v), want the opener's 1", len(ts), err)
	}
	h.resume(ts[0])
	h.resume(ts[0]) // a timer fired again (its claimer died before Done)
	h.drain()
	h.done = h.done[before:]
	for _, c := range h.done {
		if c.ExecutionID != "ex_a" {
			t.Fatalf("completion of %s after the window", c.ExecutionID)
		}
	}
	if len(h.done) == 0 {
		t.Fatal("the opener did not complete")
	}
	c := h.done[0]
	if got, _ := json.Marshal(c.FinalContext["$dg"]); string(got) != `{"count":3,"items":[0,1,2]}` {
		t.Fatalf("$dg %s, want the 3 values once", got)
	}
	// A repeated resume replays the first: the same completion.
	for _, again := range h.done[1:] {
		if a, b := mustJSON(t, again.FinalContext), mustJSON(t, c.FinalContext); a != b {
			t.Fatalf("a repeated resume completed with %s, the first with %s", a, b)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDigestWithoutStore: a runtime without a digest store fails the node.
func TestDigestWithoutStore(t *testing.T) {
	h := newHarness(t, digestDef)
	h.start(map[string]any{"user": "u1", "n": 1})
	h.drain()
	c := h.completion()
	if c.Status != message.CompletionFailed || c.FailureReason == nil || c.FailureReason.Code != "UNSUPPORTED_NODE" {
		t.Fatalf("completion %s %+v, want failed with UNSUPPORTED_NODE", c.Status, c.FailureReason)
	}
}

// TestDigestOpenerHalted: the opener's execution is halted while it waits;
// its timer, woken, drops the branch and closes the digest, so the next
// execution of the key opens a new one rather than join it.
func TestDigestOpenerHalted(t *testing.T) {
	h := newHarnessWith(t, digestDef, func(c *engine.Config) { c.Digests = coordmem.NewDigests() })
	startExec := func(id string, n int) {
		var f engine.Effects
		if err := h.eng.Start(context.Background(), h.wf, id, map[string]any{"user": "u1", "n": n}, &f); err != nil {
			t.Fatal(err)
		}
		h.absorb(&f)
		h.drain()
	}
	startExec("ex_a", 0)
	startExec("ex_b", 1)
	if err := h.eng.Halt(context.Background(), "ex_a", message.Failure{Error: message.Error{Code: "CANCELLED", Message: "cancelled"}}); err != nil {
		t.Fatal(err)
	}
	if fired := h.fireTimers(time.Now()); len(fired) != 1 {
		t.Fatalf("%d timers fired after the halt, want the opener's", len(fired))
	}
	h.drain()
	startExec("ex_c", 2)
	for _, c := range h.done {
		if c.ExecutionID == "ex_c" {
			t.Fatalf("ex_c completed (%v): it joined the halted execution's digest", c.FinalContext["$dg"])
		}
	}
	waiting := false
	for _, s := range h.status {
		if s.ExecutionID == "ex_c" && s.NodeID == "dg" && s.Status == message.StatusWaiting {
			waiting = true
		}
	}
	if !waiting {
		t.Fatalf("ex_c did not open a new digest: %v", h.statuses())
	}
}
