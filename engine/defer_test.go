package engine_test

import (
	"strings"
	"testing"
	"time"

	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/message"
)

const deferDef = `{"id":"qh","nodes":[
	{"id":"start","type":"trigger","trigger":true},
	{"id":"send","type":"test","parameters":{"defer_until":"2026-05-01T10:00:00Z"}},
	{"id":"after","type":"set","parameters":{"values":{"ok":true}}}],
	"edges":[{"id":"e1","src":"start","dst":"send"},{"id":"e2","src":"send","dst":"after"}]}`

// A node that returns node.Defer is parked: waiting, with resume_at and
// the reason it gave, a timer; a redelivery parks it the same; when the
// timer fires the node runs again, and the execution goes on.
func TestNodeDefer(t *testing.T) {
	h, c := flowHarness(t, deferDef, false)
	until := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	h.start(map[string]any{})
	msg := h.queue[0]
	h.step(0) // send: deferred
	var waiting *message.NodeStatus
	for _, s := range h.status {
		if s.NodeID == "send" && s.Status == message.StatusWaiting {
			waiting = s
		}
	}
	if waiting == nil || waiting.Reason != message.ReasonQuietHours || waiting.ResumeAt == nil || !waiting.ResumeAt.Equal(until) {
		t.Fatalf("statuses %v; waiting %+v: want send waiting until %v, reason QUIET_HOURS", h.statuses(), waiting, until)
	}
	if len(h.queue) != 0 || len(h.done) != 0 {
		t.Fatalf("after the deferral: queue %v, completions %v", h.queue, h.done)
	}
	h.queue = append(h.queue, msg) // a redelivery: parked again, on the same timer
	h.step(0)
	c.set(until)
	if fired := h.fireTimers(until); len(fired) != 1 {
		t.Fatalf("%d timers fired, want the deferred run's one", len(fired))
	}
	h.drain()
	if got := h.completion(); got.Status != message.CompletionCompleted || got.FinalContext["$after"] == nil {
		t.Fatalf("completion %+v", got)
	}
	if n := countStatus(h.status, "send", message.StatusSuccess); n != 1 {
		t.Fatalf("send succeeded %d times, want once", n)
	}
}

// Without a timer store a deferral fails the node with UNSUPPORTED_NODE.
func TestNodeDeferWithoutTimers(t *testing.T) {
	h := newHarnessWith(t, deferDef, func(cfg *engine.Config) {
		cfg.Timers = nil
		cfg.Now = func() time.Time { return time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC) }
	})
	h.start(map[string]any{})
	h.drain()
	c := h.completion()
	if c.Status != message.CompletionFailed || c.FailureReason == nil || c.FailureReason.Code != "UNSUPPORTED_NODE" || !strings.Contains(c.FailureReason.Message, "QUIET_HOURS") {
		t.Fatalf("completion %+v, want failed with UNSUPPORTED_NODE", c)
	}
}
