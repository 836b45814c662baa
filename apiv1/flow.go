package apiv1

import "time"

// Reasons of QueueState: why an execution is enqueued.
const (
	QueueConcurrency = "concurrency" // waiting for a slot of its concurrency key
	QueueDebounce    = "debounce"    // later triggers of its debounce key still collapse into it
	QueueStartAt     = "start_at"    // not due before available_at (?start_at=, a schedule's jitter)
	QueuePaused      = "paused"      // its workflow is paused (shown once pausing exists)
	QueueDue         = "due"         // due: the dispatcher takes it next, highest priority first
)

// QueueState says why an enqueued execution has not started (issue 35).
type QueueState struct {
	// Reason is one of the Queue* constants.
	Reason string `json:"reason"`
	// ConcurrencyKey, Limit and Running describe its concurrency key, when
	// the workflow has one; Position is its place in the key's queue (1:
	// next) while it waits for a slot.
	ConcurrencyKey *string `json:"concurrency_key,omitempty"`
	Limit          int     `json:"limit,omitempty"`
	Running        int     `json:"running,omitempty"`
	Position       int     `json:"position,omitempty"`
	// DebounceKey is the key later triggers collapse by.
	DebounceKey *string `json:"debounce_key,omitempty"`
	// StartAt is when it becomes due (start_at, debounce), if not yet.
	StartAt *time.Time `json:"start_at,omitempty"`
}
