// Package apiv1 holds the JSON shapes of the `rune server` HTTP API's
// version 1 (/v1; docs/api.md, server/openapi.json) that the server writes
// and its Go client (client/api) reads: one definition serves both, so the
// two cannot drift apart. It holds data types only and imports neither the
// server nor the engine, so a client needs neither.
//
// The field order is the order of the server's JSON: keep it.
package apiv1

import (
	"encoding/json"
	"time"

	"github.com/rune-org/rune/message"
)

// Page is one page of a list.
type Page[T any] struct {
	Items []T `json:"items"`
	// NextCursor is passed as ?cursor= for the next page; "" on the last.
	NextCursor string `json:"next_cursor"`
}

// Workflow is one version of a workflow.
type Workflow struct {
	ID      string `json:"id"`
	Version int    `json:"version"`
	Name    string `json:"name,omitempty"`
	// Definition is left out of version lists.
	Definition json.RawMessage `json:"definition,omitempty"`
	CreatedAt  time.Time       `json:"created_at"`
	DeletedAt  *time.Time      `json:"deleted_at,omitempty"`
	// Unchanged, on an update only: the definition was the latest
	// version's, and no version was stored.
	Unchanged bool `json:"unchanged,omitempty"`
	// ETag is the version's entity tag ("v3"). It travels in the
	// response's ETag header, never in the body: the client fills it in.
	ETag string `json:"-"`
}

// Execution is an execution (trigger instance).
type Execution struct {
	ID              string                     `json:"id"`
	WorkflowID      string                     `json:"workflow_id"`
	Version         int                        `json:"version"`
	Status          string                     `json:"status"`
	Cursor          []string                   `json:"cursor"`
	Attempts        int                        `json:"attempts"`
	AvailableAt     time.Time                  `json:"available_at,omitzero"` // zero (absent) while held for a concurrency slot
	Vars            map[string]json.RawMessage `json:"vars"`
	Input           json.RawMessage            `json:"input"`
	Trigger         string                     `json:"trigger,omitempty"`
	IdempotencyKey  string                     `json:"idempotency_key,omitempty"`
	CancelRequested bool                       `json:"cancel_requested,omitempty"`
	// Completion is the CompletionMessage verbatim once there is one, else null.
	Completion   json.RawMessage `json:"completion"`
	CreatedAt    time.Time       `json:"created_at"`
	UpdatedAt    time.Time       `json:"updated_at"`
	DispatchedAt *time.Time      `json:"dispatched_at,omitempty"`
	FinishedAt   *time.Time      `json:"finished_at,omitempty"`
	// Nodes and Splits are shown by GET /v1/executions/{id} only.
	Nodes  []NodeRun       `json:"nodes,omitempty"`
	Splits []SplitProgress `json:"splits,omitempty"`
	// Flow control (issue 35, flow.go). Priority is 1…10 (shown by GET
	// /v1/executions/{id}); Debounced marks the answer to a trigger that
	// collapsed into this execution; Queue says why it is enqueued.
	Priority  int         `json:"priority,omitempty"`
	Debounced bool        `json:"debounced,omitempty"`
	Queue     *QueueState `json:"queue,omitempty"`
	// ParentExecutionID is the execution whose workflow node started this
	// one (issue 34), shown by GET /v1/executions/{id} and the children
	// lists; absent for an execution no parent started.
	ParentExecutionID string `json:"parent_execution_id,omitempty"`
}

// NodeRun is one run of a node in one branch.
type NodeRun struct {
	NodeID        string          `json:"node_id"`
	Branch        string          `json:"branch"`
	Lineage       []message.Frame `json:"lineage,omitempty"`
	Status        string          `json:"status"`
	Attempt       int             `json:"attempt"`
	Output        json.RawMessage `json:"output,omitempty"`
	Error         json.RawMessage `json:"error,omitempty"`
	Details       json.RawMessage `json:"details,omitempty"`
	StartedAt     *time.Time      `json:"started_at,omitempty"`
	FinishedAt    *time.Time      `json:"finished_at,omitempty"`
	NextAttemptAt *time.Time      `json:"next_attempt_at,omitempty"`
	ResumeAt      *time.Time      `json:"resume_at,omitempty"`
	DurationMS    int64           `json:"duration_ms"`
	UpdatedAt     time.Time       `json:"updated_at"`
	// Reason says why a waiting run that is not a wait waits: RATE_LIMITED
	// or THROTTLED (flow control, issue 35), QUIET_HOURS (an email or sms
	// waiting for the end of its subscriber's quiet hours, issue 36).
	Reason string `json:"reason,omitempty"`
}

// SplitProgress counts a split's branches.
type SplitProgress struct {
	SplitNodeID string `json:"split_node_id"`
	Branch      string `json:"branch"`
	Total       int    `json:"total"`
	Done        int    `json:"done"`
	Failed      int    `json:"failed"`
	Skipped     int    `json:"skipped"`
}

// AuditEntry is one state-changing request of the audit log.
type AuditEntry struct {
	ID      string            `json:"id"`
	At      time.Time         `json:"at"`
	Actor   string            `json:"actor"`
	Role    string            `json:"role"`
	Method  string            `json:"method"`
	Route   string            `json:"route"`
	Objects map[string]string `json:"objects"`
	Status  int               `json:"status"`
}
