// Package message holds the wire types of RFC 001 §6 (with the lineage stack of
// RFC 004 and from_node of RFC 005) and their validation.
package message

import (
	"encoding/json"
	"time"
)

// Frame is one open split on a branch's lineage stack (RFC 004 §3.1).
type Frame struct {
	SplitNodeID string `json:"split_node_id"`
	BranchID    string `json:"branch_id"`
	ItemIndex   int    `json:"item_index"`
	TotalItems  int    `json:"total_items"`
}

// NodeExecution tells a worker to run one node of one execution (RFC 001 §6.1).
//
// A NodeExecution handed to a consumer is shared: consumers never modify it or
// anything it points to (the in-process broker passes pointers).
type NodeExecution struct {
	// MessageID is deterministic: the same successor of the same message always
	// gets the same id, so redelivered work is recognised.
	MessageID   string `json:"message_id"`
	WorkflowID  string `json:"workflow_id"`
	ExecutionID string `json:"execution_id"`
	CurrentNode string `json:"current_node"`
	// FromNode is the node that produced this message ("" for the trigger's successors).
	FromNode string `json:"from_node,omitempty"`
	// Attempt counts attempts of CurrentNode, starting at 1.
	Attempt int `json:"attempt"`
	// StartedAt is when the execution started.
	StartedAt time.Time `json:"execution_started_at"`
	// WorkflowDefinition is the complete definition, kept as raw JSON: it is
	// decoded and compiled once per distinct definition, not once per message.
	// Empty when DefinitionRef names it instead.
	WorkflowDefinition json.RawMessage `json:"workflow_definition,omitempty"`
	// DefinitionRef, when WorkflowDefinition is empty, is the definition's
	// content reference (coord.BlobRef of its bytes) in the definition store:
	// Rune's own messages carry it instead of the definition (a departure
	// from RFC 001 §6.1, see docs/architecture.md), and workers fetch and
	// compile each definition once. Inline definitions are still accepted.
	DefinitionRef string `json:"definition_ref,omitempty"`
	// AccumulatedContext maps "$<node_id>" to that node's output.
	AccumulatedContext map[string]any `json:"accumulated_context"`
	LineageStack       []Frame        `json:"lineage_stack,omitempty"`
	// Priority is the execution's priority (issue 35), 1 (lowest) to 10
	// (highest); 0, omitted, is the default 5. Every message of an
	// execution carries it, so a broker that has priorities delivers a
	// higher-priority execution's node messages first under a backlog.
	// Readers that predate it ignore it.
	Priority int `json:"priority,omitempty"`
}

// Statuses of a node (dsl.md "Statuses").
const (
	StatusRunning  = "running"
	StatusSuccess  = "success"
	StatusFailed   = "failed"
	StatusWaiting  = "waiting"
	StatusRetrying = "retrying"
	StatusSkipped  = "skipped"
	// StatusPaused (issue 34): the branch parked at this node because its
	// execution is paused; the node runs once it resumes.
	StatusPaused = "paused"
)

// Error describes a node failure (RFC 001 §6.2).
type Error struct {
	Message string         `json:"message"`
	Code    string         `json:"code"`
	Details map[string]any `json:"details,omitempty"`
}

// NodeStatus reports progress of one node (RFC 001 §6.2).
type NodeStatus struct {
	WorkflowID  string    `json:"workflow_id"`
	ExecutionID string    `json:"execution_id"`
	NodeID      string    `json:"node_id"`
	Status      string    `json:"status"`
	Output      any       `json:"output,omitempty"`
	Error       *Error    `json:"error,omitempty"`
	ExecutedAt  time.Time `json:"executed_at"`
	DurationMS  int64     `json:"duration_ms"`
	// Attempt is the attempt this status belongs to.
	Attempt int `json:"attempt,omitempty"`
	// NextAttemptAt is set on retrying statuses.
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	// ResumeAt is set on waiting statuses of wait and delay nodes.
	ResumeAt *time.Time `json:"resume_at,omitempty"`
	// Details carries barrier progress on waiting statuses:
	// {"processed","total"} for aggregators, {"arrived","expected"} for merges.
	Details      map[string]any `json:"details,omitempty"`
	LineageStack []Frame        `json:"lineage_stack,omitempty"`
	// Var, on a success status of a node whose output is also recorded
	// under $vars (node.Vars: the email and sms nodes), is the variable's
	// name ("email_<node id>"): the execution's vars record the output
	// under it. Added in issue 32; empty on every other status.
	Var string `json:"var,omitempty"`
	// Reason, on a waiting status with resume_at of a node that is not a
	// wait (its run deferred by flow control), says why it waits:
	// ReasonRateLimited or ReasonThrottled (or ReasonQuietHours: the
	// node itself deferred its run, node.Defer). Added in issue 35; older
	// readers refuse it (decoding is strict): upgrade them first.
	Reason string `json:"reason,omitempty"`
	// Child, on the waiting status of a workflow node, asks the runtime
	// to start the child execution (ChildStart). Added in issue 34.
	Child *ChildStart `json:"child,omitempty"`
}

// Reasons of a deferred node run (NodeStatus.Reason).
const (
	ReasonRateLimited = "RATE_LIMITED"
	ReasonThrottled   = "THROTTLED"
	// ReasonQuietHours: an email or sms waits for the end of its
	// subscriber's quiet hours (issue 36).
	ReasonQuietHours = "QUIET_HOURS"
)

// CodeDeadLettered is the error code of the failed status a worker reports
// for a node message it dead-lettered (RFC 001 §9.2): no completion comes
// for its execution unless the message is replayed from the dead-letter
// queue.
const CodeDeadLettered = "DEAD_LETTERED"

// DeadLetter reports whether s is a worker's report of a dead-lettered
// node message.
func (s *NodeStatus) DeadLetter() bool {
	return s != nil && s.Status == StatusFailed && s.Error != nil && s.Error.Code == CodeDeadLettered
}

// Completion statuses (RFC 001 §6.3).
const (
	CompletionCompleted = "completed"
	CompletionFailed    = "failed"
	CompletionHalted    = "halted"
)

// Completion ends an execution; exactly one is sent per execution (RFC 001 §6.3).
type Completion struct {
	WorkflowID      string         `json:"workflow_id"`
	ExecutionID     string         `json:"execution_id"`
	Status          string         `json:"status"`
	FinalContext    map[string]any `json:"final_context"`
	CompletedAt     time.Time      `json:"completed_at"`
	TotalDurationMS int64          `json:"total_duration_ms"`
	// FailureReason says why a halted or failed execution stopped.
	FailureReason *Failure `json:"failure_reason,omitempty"`
}

// Failure names the node and error that stopped an execution.
type Failure struct {
	NodeID string `json:"node_id"`
	Error
}

// Timeout fires a barrier's deadline (merge and aggregator timeouts, RFC 005
// §5): it is published with a delay and, when consumed, fails the barrier if
// it is still open.
type Timeout struct {
	ExecutionID string `json:"execution_id"`
	WorkflowID  string `json:"workflow_id"`
	// NodeID is the merge or aggregator node whose barrier this is.
	NodeID       string  `json:"node_id"`
	LineageStack []Frame `json:"lineage_stack,omitempty"`
	// Deadline is when the barrier times out.
	Deadline time.Time `json:"deadline"`
	// Key identifies the barrier instance, so that a stale timeout for a
	// barrier that completed and was reused can be told apart.
	Key string `json:"key,omitempty"`
	// Message is the node's message as the timeout would run it: the merge
	// or aggregator node, its context and the lineage its successors take.
	Message *NodeExecution `json:"message,omitempty"`
}
