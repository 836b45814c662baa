package apiv1

import (
	"encoding/json"
	"time"
)

// The shapes of events and approvals (issue 34).

// EventSend is the body of POST /v1/events.
type EventSend struct {
	Event string          `json:"event"`
	Key   string          `json:"key"`
	Data  json.RawMessage `json:"data,omitempty"`
}

// EventSent is the answer of POST /v1/events (202): the event's id and how
// many waiting branches it resumes.
type EventSent struct {
	EventID string `json:"event_id"`
	Matched int    `json:"matched"`
}

// Approval is a wait_for_event node with an approval, waiting.
type Approval struct {
	ExecutionID string `json:"execution_id"`
	WorkflowID  string `json:"workflow_id"`
	NodeID      string `json:"node_id"`
	// Branch is the lineage key of the waiting branch ("" outside splits).
	Branch string    `json:"branch,omitempty"`
	Title  string    `json:"title"`
	Event  string    `json:"event"`
	Key    string    `json:"key"`
	Since  time.Time `json:"since"`
	// TimeoutAt is when the wait times out (EVENT_TIMEOUT).
	TimeoutAt *time.Time `json:"timeout_at,omitempty"`
}

// ApprovalDecision is the body of POST
// /v1/executions/{id}/approvals/{node}.
type ApprovalDecision struct {
	Approved bool   `json:"approved"`
	Comment  string `json:"comment,omitempty"`
}
