// Package broker is the seam between Rune's processes and the message broker
// (RFC 001 §8). broker/amqp implements it on RabbitMQ, broker/memory in
// process; broker/brokertest is the conformance suite both pass.
package broker

import (
	"context"
	"errors"
	"time"
)

// Topic names a stream of messages. Each broker maps topics to its own queues;
// the RabbitMQ broker uses the queue names of RFC 001 §8 and RFC 005 §5.
type Topic string

const (
	// Execution carries *message.NodeExecution between workers.
	Execution Topic = "workflow.execution"
	// Status carries *message.NodeStatus to the master and to followers.
	Status Topic = "workflow.node.status"
	// Completion carries *message.Completion to the master and to followers.
	Completion Topic = "workflow.completion"
	// Timeout carries *message.Timeout; published with a Delay, consumed after it.
	Timeout Topic = "workflow.timeout"
	// DeadLetter holds messages a consumer rejected, with the reason.
	DeadLetter Topic = "workflow.dlq"
)

// Message is one message to publish or one delivered.
type Message struct {
	Topic Topic
	// ID identifies the message; deterministic ids let consumers recognise redeliveries.
	ID string
	// Key is the execution id: followers of one execution receive the
	// Status and Completion messages whose Key matches.
	Key string
	// Lane refines Key for ordering: a broker keeps the publish order of
	// messages with the same Key and Lane, and may spread other messages
	// over parallel paths. The engine uses the branch of a split, so the
	// items of a big fan-out do not queue behind each other.
	Lane string
	// Body is *message.NodeExecution, *message.NodeStatus, *message.Completion
	// or *message.Timeout, by Topic. Bodies are shared, never modified after publishing.
	Body any
	// Delay, on Execution and Timeout, holds the message back for at least
	// this long. Messages with different delays never hold each other back.
	Delay time.Duration
	// Trace is the W3C traceparent of the span that published the message
	// ("" when nothing traces): brokers carry it as a header, beside the
	// body, so one execution is one trace across processes.
	Trace string
	// First, on Execution, marks the first copy of a message: published by
	// the handling that first finished its parent (engine.Delivery.First), of
	// which there is one per message id. Any other copy (a replay's, the
	// trigger's, a dead letter's) is published without it. Brokers carry it
	// beside the body and drop it on dead letters; a consumer that gets it
	// on a first delivery (not Redelivered) knows no earlier delivery of
	// that id can have run (dead letters and redeliveries aside).
	First bool
	// Priority, on Execution, is the execution's priority (issue 35): 1
	// (lowest) to 10 (highest), 0 for the default 5. A broker that has
	// priorities hands a topic's ready messages out highest priority
	// first (then in its usual order); others ignore it. Brokers do not
	// carry it on delivery: the body (message.NodeExecution.Priority) has it.
	Priority int
}

// Delivery is a consumed message.
type Delivery struct {
	Message
	// Redelivered is true when the broker delivered this message before and it was not acked.
	Redelivered bool
	// Raw is set instead of Body when the body could not be decoded (on DeadLetter).
	Raw []byte
	// Reason is set on DeadLetter: why the message was rejected. A dead
	// letter's Topic is the topic it was published on, not DeadLetter, so
	// that its Body (or Raw) can be told apart.
	Reason string
}

// DeadLettered is one dead-lettered message as an operator sees it
// (brokers that can list their dead letters return them): why it was
// rejected, where it came from and what it was.
type DeadLettered struct {
	// ID is the message id (a NodeExecution's message_id).
	ID string
	// Key is the execution id.
	Key string
	// Topic is the topic the message was consumed from; a replay publishes
	// it there again.
	Topic Topic
	// Reason is why the message was dead-lettered (the consumer's error).
	Reason string
	// At is when the original was published.
	At time.Time
	// Body is the original message as it was published (its JSON).
	Body []byte
}

// Handler processes one delivery. Returning nil acks it. Returning an error
// wrapping ErrReject dead-letters it with the error text as reason. Any other
// error returns it to its queue to be delivered again after a pause (never in
// a hot loop). A handler that sees its ctx done should return ctx.Err(): the
// message is then delivered again, to this or another consumer.
type Handler func(ctx context.Context, d *Delivery) error

// ErrReject marks a message that can never be processed (malformed, invalid).
var ErrReject = errors.New("message rejected")

// ConsumeOptions tunes a consumer.
type ConsumeOptions struct {
	// Concurrency is how many handlers run at once. Default 1.
	Concurrency int
	// Prefetch is how many unacked messages the broker may hand over at once.
	// Default 2 × Concurrency.
	Prefetch int
}

// Pending is a publish in flight.
type Pending interface {
	// Wait blocks until the broker has durably accepted every message of the
	// publish, or returns the first error.
	Wait(ctx context.Context) error
}

// Broker moves messages between processes with at-least-once delivery.
type Broker interface {
	// Publish hands msgs to the broker and returns at once; Wait on the result
	// to know they are safe. Publishing many messages before waiting pipelines them.
	Publish(ctx context.Context, msgs ...Message) Pending
	// Consume delivers messages of topic to h until ctx is done, then waits for
	// running handlers and returns nil. Unacked messages go back to the queue.
	Consume(ctx context.Context, topic Topic, opts ConsumeOptions, h Handler) error
	// Follow returns the Status and Completion messages published from now on
	// whose Key is key. The channel closes when ctx is done. Following loses
	// nothing while the returned channel is drained.
	Follow(ctx context.Context, key string) (<-chan Message, error)
	// Close releases the broker's connections.
	Close() error
}

// RawPublisher publishes bytes as they are, bypassing encoding. Tests use it
// to deliver malformed messages.
type RawPublisher interface {
	PublishRaw(ctx context.Context, topic Topic, body []byte) error
}

// Done is a Pending that has already finished with Err.
type Done struct{ Err error }

// Wait returns d.Err.
func (d Done) Wait(context.Context) error { return d.Err }
