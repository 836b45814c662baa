package store

import (
	"testing"
	"time"

	"github.com/rune-org/rune/message"
)

// A run deferred by flow control keeps its reason while it waits; once it
// has run, RunReason says nothing.
func TestRunReason(t *testing.T) {
	at := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	due := at.Add(time.Second)
	run := &NodeRun{}
	st := &message.NodeStatus{WorkflowID: "w", ExecutionID: "e", NodeID: "send", Status: message.StatusWaiting,
		ExecutedAt: at, Attempt: 1, ResumeAt: &due, Reason: message.ReasonRateLimited}
	if !ApplyStatus(run, st) {
		t.Fatal("waiting status not applied")
	}
	if got := RunReason(run); got != message.ReasonRateLimited || !run.ResumeAt.Equal(due) {
		t.Fatalf("RunReason = %q, resume_at %v; want RATE_LIMITED at %v", got, run.ResumeAt, due)
	}
	later := due.Add(time.Second)
	again := *st
	again.ExecutedAt, again.ResumeAt, again.Reason = due, &later, message.ReasonThrottled
	if !ApplyStatus(run, &again) || RunReason(run) != message.ReasonThrottled {
		t.Fatalf("a second deferral: reason %q, want THROTTLED", RunReason(run))
	}
	done := &message.NodeStatus{WorkflowID: "w", ExecutionID: "e", NodeID: "send", Status: message.StatusSuccess, ExecutedAt: later, Attempt: 1}
	if !ApplyStatus(run, done) || RunReason(run) != "" {
		t.Fatalf("success: reason %q, want none", RunReason(run))
	}
}
