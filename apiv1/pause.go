package apiv1

import "time"

// WorkflowPause is the answer to POST /v1/workflows/{id}/pause and
// /resume (issue 34): while Paused, the workflow's executions are created
// but stay enqueued.
type WorkflowPause struct {
	WorkflowID string     `json:"workflow_id"`
	Paused     bool       `json:"paused"`
	PausedAt   *time.Time `json:"paused_at,omitempty"`
}
