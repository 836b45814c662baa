package bench

import (
	"testing"
	"time"
)

// The overhead per step is the execution's time less its sleeps, over its
// steps; only executions run one at a time have one.
func TestSequenceOf(t *testing.T) {
	res := &Result{Executions: 2, Elapsed: 2 * (4*time.Second + 400*time.Millisecond)}
	s := sequenceOf(res, 1, 400, 10*time.Millisecond, 0)
	if s == nil || s.PerExecution != 4400*time.Millisecond || s.OverheadPerStep != time.Millisecond {
		t.Fatalf("got %+v, want 4.4s per execution and 1ms per step", s)
	}
	if s := sequenceOf(res, 2, 400, 10*time.Millisecond, 0); s != nil {
		t.Fatalf("two in flight: got %+v, want none", s)
	}
}
