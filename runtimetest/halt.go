package runtimetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/message"
)

// HaltFromOutside checks engine.Halt, what a user's cancel does: an
// execution with one branch suspended in a 10-minute wait and one in a loop
// of short delays is halted from outside; the wait is woken and dropped, the
// other branch stops at its next node, and the completion is halted with
// code CANCELLED within seconds, not minutes. A second Halt and a Halt of the
// ended execution change nothing.
func HaltFromOutside(t *testing.T, rt Runtime, eng *engine.Engine) {
	def := wf("haltoutside", `
		{"id":"pause","type":"wait","parameters":{"amount":600}},
		{"id":"after","type":"set","parameters":{"values":{"v":1}}},
		{"id":"tick","type":"delay","parameters":{"delayMs":50}},
		{"id":"tock","type":"delay","parameters":{"delayMs":50}},
		{"id":"more","type":"delay","parameters":{"delayMs":50}},
		{"id":"end","type":"set","parameters":{"values":{"v":2}}}`,
		`{"id":"e1","src":"start","dst":"pause"},{"id":"e2","src":"pause","dst":"after"},
		{"id":"e3","src":"start","dst":"tick"},{"id":"e4","src":"tick","dst":"tock"},{"id":"e5","src":"tock","dst":"more"},{"id":"e6","src":"more","dst":"end"}`)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	reason := message.Failure{Error: message.Error{Code: engine.CodeCancelled, Message: "cancelled by a user"}}
	var once sync.Once
	haltErr := make(chan error, 1)
	r := &result{t: t}
	var mu sync.Mutex
	onStatus := func(s *message.NodeStatus) {
		mu.Lock()
		r.add(s)
		mu.Unlock()
		if s.NodeID == "pause" && s.Status == message.StatusWaiting {
			once.Do(func() {
				go func() {
					err := eng.Halt(ctx, s.ExecutionID, reason)
					if err == nil {
						err = eng.Halt(ctx, s.ExecutionID, message.Failure{Error: message.Error{Code: "SECOND"}})
					}
					haltErr <- err
				}()
			})
		}
	}
	start := time.Now()
	c, err := rt.Run(ctx, []byte(def), nil, onStatus)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if err := <-haltErr; err != nil {
		t.Fatalf("halt: %v", err)
	}
	r.c = c
	r.status(message.CompletionHalted)
	if f := c.FailureReason; f == nil || f.Code != engine.CodeCancelled {
		t.Fatalf("failure reason %+v, want code %s (the first halt's)", f, engine.CodeCancelled)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("halted completion after %s: the 10-minute wait was not woken", took)
	}
	r.absent("$after")
	r.absent("$end")
	// A halt after the completion changes nothing: nil while the
	// coordinator retains the ended execution, ErrEnded after.
	if err := eng.Halt(ctx, c.ExecutionID, reason); err != nil && !errors.Is(err, engine.ErrEnded) {
		t.Fatalf("halt after the completion: %v", err)
	}
}
