// Package publish is the runtimes' engine.Sink: it turns the effects the
// engine reports while handling one message into broker messages, and
// publishes them in one pipelined batch. The worker, the scheduler, the
// client (and through it the server's dispatcher) publish through it.
package publish

import (
	"context"
	"sync"
	"time"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/message"
)

// Config configures a Publisher.
type Config struct {
	// Broker carries the messages. Required.
	Broker broker.Broker
	// Completed, when set, is called for each completion once it is safely
	// published (engine.Engine.Completed: the engine then records it and
	// releases the execution's large values). Nil calls nothing.
	Completed func(context.Context, *message.Completion)
	// RunningAfter is how long a running status is held back before it is
	// published on its own: a node that ends sooner reports it with its
	// other statuses, in one message. 0 means DefaultRunningAfter; negative
	// publishes every running status at once.
	RunningAfter time.Duration
}

// DefaultRunningAfter is how long a running status is held back by default.
const DefaultRunningAfter = 50 * time.Millisecond

// Handle lets handle report the effects of one handling to a new Publisher
// and, when it returns nil, publishes them (Sync). It returns handle's
// error, else Sync's.
func Handle(ctx context.Context, cfg Config, handle func(engine.Sink) error) error {
	p := New(cfg)
	if err := handle(p); err != nil {
		return err
	}
	return p.Sync(ctx)
}

// Publisher is an engine.Sink that publishes to a broker. Everything one
// handled message reports goes out in one pipelined batch at Sync, its
// statuses as one message (*message.Statuses) ahead of its successors. A
// running status is held back for a threshold: published on its own when
// the node is still running then (a user watching a slow call sees it
// run), else in the batch with the node's other statuses.
type Publisher struct {
	cfg       Config
	batch     []broker.Message
	completed []*message.Completion
	// open is the statuses message at the end of batch that the next
	// status joins (nil when the last message is something else).
	open *message.Statuses

	// mu guards held, early and pending against the threshold's timer.
	mu    sync.Mutex
	held  *message.NodeStatus
	timer *time.Timer
	// early are running statuses whose threshold passed while they were
	// being released: they go out first at Sync, ahead of the batch.
	early   []broker.Message
	pending []broker.Pending
}

var _ engine.Sink = (*Publisher)(nil)

// flushChunk is how many messages one Publish call carries.
const flushChunk = 500

// New returns a Publisher on cfg.Broker.
func New(cfg Config) *Publisher {
	if cfg.RunningAfter == 0 {
		cfg.RunningAfter = DefaultRunningAfter
	}
	return &Publisher{cfg: cfg}
}

// lane keeps one branch's messages in order while the branches of a
// fan-out spread over the broker's channels.
func lane(stack []message.Frame) string {
	if len(stack) == 0 {
		return ""
	}
	return stack[len(stack)-1].BranchID
}

func statusMessage(s *message.NodeStatus) broker.Message {
	return broker.Message{Topic: broker.Status, Key: s.ExecutionID, Lane: lane(s.LineageStack), Body: s}
}

// Status implements engine.Sink. A running status is held back (see
// Config.RunningAfter); when its threshold passes first it is published
// on its own, under ctx.
func (p *Publisher) Status(ctx context.Context, s *message.NodeStatus) {
	p.release()
	if s.Status == message.StatusRunning {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.cfg.RunningAfter < 0 {
			p.pending = append(p.pending, p.cfg.Broker.Publish(ctx, statusMessage(s)))
			return
		}
		p.held = s
		p.timer = time.AfterFunc(p.cfg.RunningAfter, func() { p.expire(ctx, s) })
		return
	}
	p.add(s)
}

// add appends s to the statuses message at the end of the batch, or starts
// one.
func (p *Publisher) add(s *message.NodeStatus) {
	if p.open != nil && p.open.ExecutionID == s.ExecutionID && p.open.WorkflowID == s.WorkflowID {
		p.open.Statuses = append(p.open.Statuses, s)
		return
	}
	p.open = &message.Statuses{WorkflowID: s.WorkflowID, ExecutionID: s.ExecutionID, Statuses: []*message.NodeStatus{s}}
	msg := statusMessage(s)
	msg.Body = p.open
	p.batch = append(p.batch, msg)
}

// expire publishes the held running status s when its threshold passed and
// nothing released it.
func (p *Publisher) expire(ctx context.Context, s *message.NodeStatus) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held != s {
		return
	}
	p.held = nil
	p.pending = append(p.pending, p.cfg.Broker.Publish(ctx, statusMessage(s)))
}

// release settles the held running status before anything else is
// reported: into the batch when its timer had not fired, else ahead of
// the batch (the timer fired but has not published it yet), so it always
// comes first.
func (p *Publisher) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.held
	if s == nil {
		return
	}
	p.held = nil
	if p.timer.Stop() {
		p.add(s)
		return
	}
	p.early = append(p.early, statusMessage(s))
}

// settle ends the statuses message being built, after releasing the held
// running status: what is reported next starts a message of its own.
func (p *Publisher) settle() {
	p.release()
	p.open = nil
}

// Execute implements engine.Sink. A delayed message (a retry) is never
// marked a first copy: a delay queue may dead-letter it twice (quorum
// queues' at-least-once dead-lettering).
func (p *Publisher) Execute(m *message.NodeExecution, how engine.Publish) {
	p.settle()
	p.batch = append(p.batch, broker.Message{Topic: broker.Execution, ID: m.MessageID, Key: m.ExecutionID, Lane: lane(m.LineageStack), Body: m,
		Delay: how.Delay, Trace: how.Trace, First: how.First && how.Delay == 0, Priority: m.Priority})
}

// Timeout implements engine.Sink.
func (p *Publisher) Timeout(t *message.Timeout, how engine.Publish) {
	p.settle()
	p.batch = append(p.batch, broker.Message{Topic: broker.Timeout, ID: t.Message.MessageID, Key: t.ExecutionID, Body: t, Delay: how.Delay, Trace: how.Trace})
}

// Complete implements engine.Sink.
func (p *Publisher) Complete(c *message.Completion) {
	p.settle()
	p.completed = append(p.completed, c)
	p.batch = append(p.batch, broker.Message{Topic: broker.Completion, ID: c.ExecutionID, Key: c.ExecutionID, Body: c})
}

// Sync implements engine.Sink: it publishes what is batched and waits
// until the broker has accepted every message this Publisher sent, then
// calls Config.Completed for the completions among them.
func (p *Publisher) Sync(ctx context.Context) error {
	p.settle()
	p.mu.Lock()
	if len(p.early) > 0 {
		p.pending = append(p.pending, p.cfg.Broker.Publish(ctx, p.early...))
		p.early = nil
	}
	// In chunks: a split's many branch messages are then encoded and
	// written a chunk at a time, and their bytes freed as they go, still
	// pipelined (confirms are awaited below, all together).
	for len(p.batch) > 0 {
		n := min(len(p.batch), flushChunk)
		p.pending = append(p.pending, p.cfg.Broker.Publish(ctx, p.batch[:n]...))
		p.batch = p.batch[n:]
	}
	p.batch = nil
	pending := p.pending
	p.pending = nil
	p.mu.Unlock()
	var first error
	for _, pd := range pending {
		if err := pd.Wait(ctx); err != nil && first == nil {
			first = err
		}
	}
	if first == nil && p.cfg.Completed != nil {
		for _, c := range p.completed {
			p.cfg.Completed(ctx, c)
		}
	}
	p.completed = nil
	return first
}
