package store

import (
	"encoding/json"

	"github.com/rune-org/rune/message"
)

// RunReason is why a waiting run that is not a wait waits (a run deferred
// by flow control, issue 35: message.ReasonRateLimited or
// ReasonThrottled), or "". The history keeps it in the run's details
// ({"reason": …}), set by the waiting status that carried it.
func RunReason(r *NodeRun) string {
	if r.Status != message.StatusWaiting || len(r.Details) == 0 {
		return ""
	}
	var d struct {
		Reason string `json:"reason"`
	}
	if json.Unmarshal(r.Details, &d) != nil {
		return ""
	}
	return d.Reason
}
