package message

import (
	"bytes"
	"fmt"
)

// Statuses is everything one handled message reports, as one message on the
// status topic: the statuses of its nodes, in the order they happened. It
// departs from RFC 001 §6.2 (a message per status) to halve the broker's
// messages per hop; docs/architecture.md ("Throughput (issue 11)") says why
// nothing observable is lost. A lone NodeStatus is still a valid body of the
// status topic (older Rune, other producers): StatusesOf reads both.
type Statuses struct {
	WorkflowID  string `json:"workflow_id"`
	ExecutionID string `json:"execution_id"`
	// Statuses are in order; every one belongs to ExecutionID.
	Statuses []*NodeStatus `json:"statuses"`
}

// Validate checks the batch and every status in it.
func (b *Statuses) Validate() error {
	p := problems{kind: "Statuses"}
	p.ids(b.WorkflowID, b.ExecutionID)
	if len(b.Statuses) == 0 {
		p.add("statuses", "empty: a status message reports at least one status")
	}
	for i, s := range b.Statuses {
		if s == nil {
			p.add(fmt.Sprintf("statuses[%d]", i), "null")
			continue
		}
		if s.ExecutionID != b.ExecutionID || s.WorkflowID != b.WorkflowID {
			p.add(fmt.Sprintf("statuses[%d]", i), "belongs to execution %q of workflow %q, not to the message's", short(s.ExecutionID), short(s.WorkflowID))
			continue
		}
		if err := s.Validate(); err != nil {
			p.add(fmt.Sprintf("statuses[%d]", i), "%v", err)
		}
	}
	return p.err()
}

// DecodeStatuses decodes and validates a Statuses batch.
func DecodeStatuses(data []byte) (*Statuses, error) {
	return decode[Statuses](data, "Statuses", "executed_at", "next_attempt_at", "resume_at")
}

// batchMark is how a Statuses body can be told from a NodeStatus without
// decoding it twice: only a batch has a "statuses" array (a status's output
// may contain the text too; that one falls back to DecodeStatus).
var batchMark = []byte(`"statuses":[`)

// DecodeStatusBody decodes a body of the status topic: a *Statuses batch or,
// as RFC 001 §6.2 has it, a lone *NodeStatus.
func DecodeStatusBody(data []byte) (any, error) {
	if bytes.Contains(data, batchMark) {
		b, err := DecodeStatuses(data)
		if err == nil {
			return b, nil
		}
		if s, serr := DecodeStatus(data); serr == nil {
			return s, nil
		}
		return nil, err
	}
	return DecodeStatus(data)
}

// StatusesOf returns the statuses a body of the status topic carries, in
// order: the one of a *NodeStatus, every one of a *Statuses; nil for any
// other body. Consumers of the status topic read it through StatusesOf so
// that both forms are understood.
func StatusesOf(body any) []*NodeStatus {
	switch b := body.(type) {
	case *NodeStatus:
		if b == nil {
			return nil
		}
		return []*NodeStatus{b}
	case *Statuses:
		if b == nil {
			return nil
		}
		return b.Statuses
	}
	return nil
}
