package store

import (
	"context"
	"encoding/json"
	"time"
)

// Delivery statuses of a send (issue 36), in the order a send moves
// through them: a later status never gives way to an earlier one.
const (
	SendQueued      = "queued"
	SendSent        = "sent"
	SendDelivered   = "delivered"
	SendUndelivered = "undelivered"
	SendFailed      = "failed"
	SendBounced     = "bounced"
)

// SendStatusRank orders delivery statuses: queued, sent, then the final
// ones (delivered, undelivered, failed, bounced). Unknown is -1.
func SendStatusRank(s string) int {
	switch s {
	case SendQueued:
		return 0
	case SendSent:
		return 1
	case SendDelivered, SendUndelivered, SendFailed, SendBounced:
		return 2
	}
	return -1
}

// Send is one message an email or sms node handed to a provider, known by
// the credential it was sent with and the provider's message id.
type Send struct {
	Credential, MessageID string
	ExecutionID, NodeID   string
	WorkflowID            string
	Branch                string // BranchKey of the node run
	Channel               string // "email" or "sms"
	SentAt                time.Time
	// Status is the furthest status of History (Status of its first entry
	// when none is further).
	Status string
	// History is every status, the one recorded with the send first
	// (queued for a text, sent for an email), then the provider's
	// callbacks in the order they arrived.
	History []SendStatus
}

// SendStatus is one entry of a send's history.
type SendStatus struct {
	Status string `json:"status"`
	// ProviderStatus is the provider's own word ("delivered", "bounce").
	ProviderStatus string    `json:"provider_status,omitempty"`
	At             time.Time `json:"at"`
}

// SendStatusEvent is the Body of a "send.status" event.
type SendStatusEvent struct {
	WorkflowID     string    `json:"workflow_id"`
	ExecutionID    string    `json:"execution_id"`
	NodeID         string    `json:"node_id"`
	Branch         string    `json:"branch,omitempty"`
	Credential     string    `json:"credential"`
	MessageID      string    `json:"message_id"`
	Channel        string    `json:"channel"`
	Status         string    `json:"status"`
	ProviderStatus string    `json:"provider_status,omitempty"`
	At             time.Time `json:"at"`
}

// NotifyStore holds the notification platform's records (issue 36). Every
// method is safe for concurrent use.
type NotifyStore interface {
	// RecordSends stores sends (their History is ignored); a send already
	// recorded under its credential and message id is kept as it was.
	RecordSends(ctx context.Context, sends []Send) error
	// AddSendStatus appends st to the history of the send credential and
	// messageID name, known yet or not (a callback may come before the
	// send is recorded). When the send is known it returns it and writes
	// a "send.status" event (SendStatusEvent) to its execution's event log;
	// else it returns nil.
	AddSendStatus(ctx context.Context, credential, messageID string, st SendStatus) (*Send, error)
	// ListSends returns execution id's sends, oldest first, with their
	// histories.
	ListSends(ctx context.Context, executionID string) ([]*Send, error)
}

// FinishSend sets s.Status from s.History, which begins with the status
// recorded with the send.
func FinishSend(s *Send) {
	s.Status = ""
	for _, h := range s.History {
		if SendStatusRank(h.Status) >= SendStatusRank(s.Status) {
			s.Status = h.Status
		}
	}
}

// EarlyStatusEvents are the "send.status" events of the callbacks that
// came before x was recorded, written when it is (RecordSends).
func EarlyStatusEvents(x Send, early []SendStatus) []Event {
	var out []Event
	for _, st := range early {
		body, _ := json.Marshal(SendStatusEvent{WorkflowID: x.WorkflowID, ExecutionID: x.ExecutionID, NodeID: x.NodeID, Branch: x.Branch,
			Credential: x.Credential, MessageID: x.MessageID, Channel: x.Channel, Status: st.Status, ProviderStatus: st.ProviderStatus, At: st.At})
		out = append(out, Event{ExecutionID: x.ExecutionID, Kind: "send.status", Body: body, At: st.At})
	}
	return out
}
