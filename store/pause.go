package store

import (
	"context"
	"encoding/json"
	"time"
)

// WorkflowPause says a workflow is paused (issue 34): its executions are
// still created (API, webhooks, schedule slots) but stay enqueued, as
// ClaimExecutions skips them, until ResumeWorkflow.
type WorkflowPause struct {
	WorkflowID string
	PausedAt   time.Time
}

// ExecutionPause says an execution was paused through the API: its
// branches park at their next node boundary until it resumes.
type ExecutionPause struct {
	ExecutionID string
	PausedAt    time.Time
}

// RerunStart is where a re-run from a node starts (issue 34): execution
// ExecutionID (trigger "rerun:<SourceID>") begins at FromNode with Context
// as its accumulated context instead of at the trigger.
type RerunStart struct {
	ExecutionID string
	SourceID    string
	FromNode    string
	// Context is a JSON object: the accumulated context ("$trigger",
	// "$<node id>", …) FromNode sees.
	Context   json.RawMessage
	CreatedAt time.Time
}

// PauseStore holds workflow and execution pauses and re-run starts. Every
// method is safe for concurrent use.
type PauseStore interface {
	// PauseWorkflow pauses workflow id (not deleted, else ErrNotFound) and
	// returns its pause; pausing a paused workflow returns the first pause.
	PauseWorkflow(ctx context.Context, id string, at time.Time) (*WorkflowPause, error)
	// ResumeWorkflow ends workflow id's pause and reports whether it was
	// paused.
	ResumeWorkflow(ctx context.Context, id string) (bool, error)
	// WorkflowPaused returns workflow id's pause, nil when it is not
	// paused (the reason `paused` of an enqueued execution).
	WorkflowPaused(ctx context.Context, id string) (*WorkflowPause, error)

	// PauseExecution records execution id paused (ErrNotFound when it does
	// not exist); pausing twice keeps the first pause.
	PauseExecution(ctx context.Context, id string, at time.Time) (*ExecutionPause, error)
	// ResumeExecution forgets execution id's pause and reports whether it
	// was paused.
	ResumeExecution(ctx context.Context, id string) (bool, error)
	// ExecutionPaused returns execution id's pause, nil when it has none.
	ExecutionPaused(ctx context.Context, id string) (*ExecutionPause, error)

	// PutRerunStart records r before its execution is created; a second
	// put for the same execution is ErrConflict.
	PutRerunStart(ctx context.Context, r *RerunStart) error
	// GetRerunStart returns the start of execution id (ErrNotFound for an
	// execution that starts at its trigger).
	GetRerunStart(ctx context.Context, id string) (*RerunStart, error)
}
