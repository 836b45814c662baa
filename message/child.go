package message

// ChildStart asks the runtime to start a child execution (the workflow
// node, issue 34): it rides on the waiting status of the parent's node
// (NodeStatus.Child), so that whoever records statuses (the server's
// history consumer, `rune run`) starts it, durably and once: the child's
// ExecutionID is derived from the parent's node message id, and starting
// the same id again starts nothing. Added in issue 34; optional.
type ChildStart struct {
	// ExecutionID is the child's execution id ("exec_child_…").
	ExecutionID string `json:"execution_id"`
	// WorkflowID and Version name the child's definition; Version 0 is the
	// version current when the parent started.
	WorkflowID string `json:"workflow_id"`
	Version    int    `json:"version,omitempty"`
	// Input is the child's trigger payload.
	Input any `json:"input,omitempty"`
	// Wait says the parent waits for the child's end. When set, the
	// runtime delivers the end to the parent's timer Wake
	// (engine.DeliverChild).
	Wait bool `json:"wait,omitempty"`
	// Wake is the timer id of the parent's parked node.
	Wake string `json:"wake"`
}
