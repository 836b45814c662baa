package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/rune-org/rune/store"
)

// A paused workflow's executions are created but not claimed, oldest first
// again once it resumes; other workflows' are claimed meanwhile.
func testWorkflowPause(ctx context.Context, t *testing.T, h *harness) {
	h.workflow(ctx, t, "wf")
	h.workflow(ctx, t, "other")
	if p, err := h.s.WorkflowPaused(ctx, "wf"); err != nil || p != nil {
		t.Fatalf("WorkflowPaused before a pause = %+v, %v; want nil, nil", p, err)
	}
	p, err := h.s.PauseWorkflow(ctx, "wf", at(1))
	if err != nil || p.WorkflowID != "wf" || !p.PausedAt.Equal(at(1)) {
		t.Fatalf("PauseWorkflow = %+v, %v", p, err)
	}
	if p, err := h.s.PauseWorkflow(ctx, "wf", at(2)); err != nil || !p.PausedAt.Equal(at(1)) {
		t.Fatalf("PauseWorkflow again = %+v, %v; want the first pause kept", p, err)
	}
	if _, err := h.s.PauseWorkflow(ctx, "nope", at(1)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("PauseWorkflow(unknown) = %v, want ErrNotFound", err)
	}
	for i := range 3 {
		h.execution(ctx, t, store.ExecutionInput{ID: name("p", i), WorkflowID: "wf", AvailableAt: at(float64(10 + i))})
	}
	h.execution(ctx, t, store.ExecutionInput{ID: "o", WorkflowID: "other", AvailableAt: at(5)})
	if got := claim(ctx, t, h.s, "d1", at(60), time.Minute, 10); !slices.Equal(got, []string{"o"}) {
		t.Fatalf("claimed %v while wf is paused, want only o", got)
	}
	if x := h.get(ctx, t, "p0000"); x.Status != store.StatusEnqueued {
		t.Fatalf("paused workflow's execution is %s, want enqueued", x.Status)
	}
	if got, err := h.s.WorkflowPaused(ctx, "wf"); err != nil || got == nil || !got.PausedAt.Equal(at(1)) {
		t.Fatalf("WorkflowPaused = %+v, %v", got, err)
	}
	if ok, err := h.s.ResumeWorkflow(ctx, "wf"); !ok || err != nil {
		t.Fatalf("ResumeWorkflow = %v, %v; want true", ok, err)
	}
	if ok, err := h.s.ResumeWorkflow(ctx, "wf"); ok || err != nil {
		t.Fatalf("ResumeWorkflow again = %v, %v; want false", ok, err)
	}
	if got := claim(ctx, t, h.s, "d1", at(60), time.Minute, 10); !slices.Equal(got, []string{"p0000", "p0001", "p0002"}) {
		t.Fatalf("claimed %v after the resume, want p0000 p0001 p0002 in order", got)
	}
}

// Execution pauses and re-run starts are recorded once and read back.
func testExecutionPauseRerun(ctx context.Context, t *testing.T, h *harness) {
	h.workflow(ctx, t, "wf")
	h.execution(ctx, t, store.ExecutionInput{ID: "x", WorkflowID: "wf"})
	if _, err := h.s.PauseExecution(ctx, "nope", at(1)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("PauseExecution(unknown) = %v, want ErrNotFound", err)
	}
	if p, err := h.s.PauseExecution(ctx, "x", at(1)); err != nil || !p.PausedAt.Equal(at(1)) {
		t.Fatalf("PauseExecution = %+v, %v", p, err)
	}
	if p, err := h.s.PauseExecution(ctx, "x", at(2)); err != nil || !p.PausedAt.Equal(at(1)) {
		t.Fatalf("PauseExecution again = %+v, %v", p, err)
	}
	if p, err := h.s.ExecutionPaused(ctx, "x"); err != nil || p == nil {
		t.Fatalf("ExecutionPaused = %+v, %v", p, err)
	}
	if ok, err := h.s.ResumeExecution(ctx, "x"); !ok || err != nil {
		t.Fatalf("ResumeExecution = %v, %v", ok, err)
	}
	if p, err := h.s.ExecutionPaused(ctx, "x"); err != nil || p != nil {
		t.Fatalf("ExecutionPaused after resume = %+v, %v", p, err)
	}

	if _, err := h.s.GetRerunStart(ctx, "r"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetRerunStart(none) = %v, want ErrNotFound", err)
	}
	r := &store.RerunStart{ExecutionID: "r", SourceID: "x", FromNode: "call", Context: json.RawMessage(`{"$trigger":{"a":1}}`), CreatedAt: at(3)}
	if err := h.s.PutRerunStart(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := h.s.PutRerunStart(ctx, r); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("PutRerunStart twice = %v, want ErrConflict", err)
	}
	got, err := h.s.GetRerunStart(ctx, "r")
	if err != nil || got.SourceID != "x" || got.FromNode != "call" || !store.SameJSON(got.Context, r.Context) || !got.CreatedAt.Equal(at(3)) {
		t.Fatalf("GetRerunStart = %+v, %v", got, err)
	}
}
