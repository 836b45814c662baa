package store

import (
	"context"
	"time"
)

// HookDeliveriesKept is how many deliveries of a hook are kept (issue 38):
// RecordHookDelivery drops the older ones.
const HookDeliveriesKept = 50

// HookDelivery is one request to a hook's URL and what it was answered
// (issue 38), accepted or refused. It holds no body, header value, secret
// or signature: only what the answer said.
type HookDelivery struct {
	// Seq orders a hook's deliveries (set by RecordHookDelivery).
	Seq        int64
	HookID     string
	ReceivedAt time.Time
	// Status is the HTTP status answered.
	Status int
	// Code is the API's error code of a refusal ("unauthorized",
	// "rate_limited", "too_large" …), "" when accepted.
	Code string
	// ExecutionID is the execution the delivery started or found (a
	// duplicate); EventID the event it sent (an event hook). Either may be "".
	ExecutionID string
	EventID     string
	// Size is the request body's size in bytes (as far as it was read, or
	// its Content-Length when larger).
	Size int64
}

// HookDeliveryStore keeps the last deliveries of each hook. Every method
// is safe for concurrent use.
type HookDeliveryStore interface {
	// RecordHookDelivery records d, sets d.Seq, and keeps only the newest
	// keep deliveries of d.HookID.
	RecordHookDelivery(ctx context.Context, d *HookDelivery, keep int) error
	// ListHookDeliveries lists hook id's deliveries, newest first, at most
	// limit; none (not an error) for an unknown hook.
	ListHookDeliveries(ctx context.Context, hookID string, limit int) ([]*HookDelivery, error)
}
