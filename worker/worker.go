// Package worker connects the engine to a broker: it consumes node execution
// messages, lets the engine handle each, publishes the effects and
// acknowledges a message only once every effect is safely published
// (RFC 001 §7.1). The embedded and the distributed runtimes both run it.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/metrics"
	"github.com/rune-org/rune/tracing"
)

// Config configures a worker.
type Config struct {
	// Broker delivers and carries messages. Required.
	Broker broker.Broker
	// Engine handles messages. Required.
	Engine *engine.Engine
	// Concurrency is how many messages are handled at once. Default
	// 128 × GOMAXPROCS: a handler mostly waits (broker confirms, Redis, the
	// nodes' own I/O), and what handlers publish while a confirm is awaited
	// shares RabbitMQ messages, so more handlers cost RabbitMQ less per node;
	// measured in docs/benchmarks.md, round 13.
	Concurrency int
	// Prefetch is how many unacked messages the broker may hand over.
	// Default 2 × Concurrency.
	Prefetch int
	// DrainTimeout bounds how long the messages in hand may run on after ctx
	// is done; what is still running then is handed back to the broker.
	// Default 30s.
	DrainTimeout time.Duration
	// RunningAfter is how long a node must still be running before its
	// running status is published on its own; a node that ends sooner
	// reports it with its other statuses, in one message. Default 50 ms
	// (DefaultRunningAfter); negative publishes every running status at once.
	RunningAfter time.Duration
	// Logger receives worker logs. Default slog.Default().
	Logger *slog.Logger
	// Metrics records messages in flight, dead letters and redeliveries;
	// nil records nothing.
	Metrics *metrics.Recorder
	// Tracer makes a span of each message handled, a child of the span
	// that published it; nil traces nothing.
	Tracer *tracing.Tracer
}

// DefaultConcurrency is Config.Concurrency's default, 128 × GOMAXPROCS.
func DefaultConcurrency() int { return 128 * runtime.GOMAXPROCS(0) }

func (c *Config) defaults() error {
	if c.Broker == nil || c.Engine == nil {
		return errors.New("worker: Config.Broker and Config.Engine are required")
	}
	if c.Concurrency <= 0 {
		c.Concurrency = DefaultConcurrency()
	}
	if c.Prefetch <= 0 {
		c.Prefetch = 2 * c.Concurrency
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// Run consumes node execution messages until ctx is done, then stops taking
// new ones, lets the messages in hand finish (within DrainTimeout) and
// returns nil.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	// Work outlives ctx by up to DrainTimeout: a shutdown lets nodes finish
	// rather than abandoning them half-done.
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(cfg.DrainTimeout, cancelWork)
		context.AfterFunc(work, func() { t.Stop() })
	})
	defer stop()
	cfg.Metrics.WorkerLimits(cfg.Concurrency, cfg.Prefetch)
	// Barrier timeouts are few; a small consumer beside the main one.
	timeouts := make(chan error, 1)
	go func() {
		opts := broker.ConsumeOptions{Concurrency: 2}
		timeouts <- cfg.Broker.Consume(ctx, broker.Timeout, opts, func(_ context.Context, d *broker.Delivery) error {
			return handleTimeout(work, ctx, cfg, d)
		})
	}()
	opts := broker.ConsumeOptions{Concurrency: cfg.Concurrency, Prefetch: cfg.Prefetch}
	err := cfg.Broker.Consume(ctx, broker.Execution, opts, func(_ context.Context, d *broker.Delivery) error {
		return handle(work, ctx, cfg, d)
	})
	return errors.Join(err, <-timeouts)
}

// handleTimeout and handle run a delivery on ctx; running is done once the
// worker is shutting down.
func handleTimeout(ctx, running context.Context, cfg Config, d *broker.Delivery) error {
	t, ok := d.Body.(*message.Timeout)
	if !ok {
		return fmt.Errorf("%w: body of %T on %s", broker.ErrReject, d.Body, d.Topic)
	}
	return settle(ctx, running, cfg, d, runIDs{exec: t.ExecutionID, workflow: t.WorkflowID, node: t.NodeID, stack: t.LineageStack, attempt: 1}, func(s *Publisher) error { return cfg.Engine.HandleTimeout(s.ctx, t, s) })
}

func handle(ctx, running context.Context, cfg Config, d *broker.Delivery) error {
	m, ok := d.Body.(*message.NodeExecution)
	if !ok {
		return fmt.Errorf("%w: body of %T on %s", broker.ErrReject, d.Body, d.Topic)
	}
	err := settle(ctx, running, cfg, d, runIDs{exec: m.ExecutionID, workflow: m.WorkflowID, node: m.CurrentNode, stack: m.LineageStack, attempt: m.Attempt}, func(s *Publisher) error { return cfg.Engine.Handle(s.ctx, m, s) })
	if rejected(err) {
		reportDeadLetter(ctx, cfg, m, err)
	}
	return err
}

// settle runs the engine on a delivery through a Publisher and turns the
// outcome into the broker's: nil acks once every effect is published, an
// invalid message is rejected (dead-lettered), anything else is delivered
// again.
func settle(ctx, running context.Context, cfg Config, d *broker.Delivery, ids runIDs, run func(*Publisher) error) error {
	topic := string(d.Topic)
	cfg.Metrics.InFlight(topic, 1)
	defer cfg.Metrics.InFlight(topic, -1)
	s := &Publisher{ctx: ctx, b: cfg.Broker, onComplete: cfg.Engine.Completed, running: running, first: d.First && !d.Redelivered}
	s.SetRunningAfter(cfg.RunningAfter)
	var err error
	if cfg.Tracer != nil {
		var span trace.Span
		ctx, span = cfg.Tracer.Start(ctx, tracing.Run{ExecutionID: ids.exec, WorkflowID: ids.workflow, NodeID: ids.node,
			Lineage: engine.Lineage(ids.stack), Attempt: ids.attempt, Traceparent: d.Trace})
		defer func() {
			if err != nil {
				// The message was rejected or will be delivered again.
				span.SetStatus(codes.Error, err.Error())
			}
			span.End()
		}()
		s.ctx, s.trace = ctx, cfg.Tracer.Traceparent(ctx)
	}
	err = run(s)
	if errors.Is(err, engine.ErrInvalid) {
		cfg.Logger.Error("rejecting message", append(ids.attrs(d), "err", err)...)
		cfg.Metrics.DeadLetter(topic)
		return fmt.Errorf("%w: %v", broker.ErrReject, err)
	}
	if err == nil {
		err = s.Flush()
	}
	if err != nil && ctx.Err() == nil {
		cfg.Logger.Warn("message will be delivered again", append(ids.attrs(d), "err", err)...)
		cfg.Metrics.Redelivery(topic)
	}
	return err
}

// runIDs name a message's node run in logs.
type runIDs struct {
	exec, workflow, node string
	stack                []message.Frame
	attempt              int
}

// attrs are the log attributes of a delivery of the run: the same the
// engine's lines of a node run carry.
func (r runIDs) attrs(d *broker.Delivery) []any {
	a := []any{"topic", d.Topic, "message_id", d.ID, "execution_id", r.exec, "node_id", r.node}
	if l := engine.Lineage(r.stack); l != "" {
		a = append(a, "lineage", l)
	}
	return a
}

// Publisher is an engine.Sink that publishes to a broker. Everything one
// handled message reports goes out in one pipelined batch at Flush, its
// statuses as one message (*message.Statuses) ahead of its successors. A
// running status is held back for a threshold: published on its own when
// the node is still running then (a user watching a slow call sees it
// run), else in the batch with the node's other statuses.
type Publisher struct {
	ctx       context.Context
	b         broker.Broker
	batch     []broker.Message
	pending   []broker.Pending
	completed []*message.Completion
	// open is the statuses message at the end of batch that the next
	// status joins (nil when the last message is something else).
	open *message.Statuses
	// onComplete, when set, is called for each completion once it is safely
	// published (the engine then releases the execution's large values).
	onComplete func(context.Context, *message.Completion)
	// trace is the traceparent the messages that run nodes carry.
	trace string
	// first is set when the message handled is a first copy on its first
	// delivery; mark when the successors reported now are first copies
	// (engine.FirstCopies).
	first, mark bool

	// runningAfter is how long a running status is held back.
	runningAfter time.Duration
	// running, when set, is done once the worker is shutting down: then
	// no hop is fused (see MayFuse).
	running context.Context
	// mu guards held and pending against the threshold's timer.
	mu    sync.Mutex
	held  *message.NodeStatus
	timer *time.Timer
}

// DefaultRunningAfter is how long a running status is held back by default.
const DefaultRunningAfter = 50 * time.Millisecond

// SetTrace makes the messages that run nodes (executions, timeouts) carry
// traceparent, so that their spans are children of the publisher's.
func (p *Publisher) SetTrace(traceparent string) { p.trace = traceparent }

// OnComplete sets f to be called for each completion once Flush has
// published it.
func (p *Publisher) OnComplete(f func(context.Context, *message.Completion)) { p.onComplete = f }

// SetRunningAfter sets how long a running status is held back before it is
// published on its own: 0 means DefaultRunningAfter, negative publishes it at
// once.
func (p *Publisher) SetRunningAfter(d time.Duration) {
	if d == 0 {
		d = DefaultRunningAfter
	}
	p.runningAfter = d
}

// flushChunk is how many messages one Publish call carries.
const flushChunk = 500

// NewPublisher returns a Publisher on b; ctx bounds its publishes.
func NewPublisher(ctx context.Context, b broker.Broker) *Publisher {
	return &Publisher{ctx: ctx, b: b, runningAfter: DefaultRunningAfter}
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

// Status implements engine.Sink.
func (p *Publisher) Status(s *message.NodeStatus) {
	p.release()
	if s.Status == message.StatusRunning {
		if p.runningAfter < 0 {
			p.publishNow(statusMessage(s))
			return
		}
		p.mu.Lock()
		p.held = s
		p.timer = time.AfterFunc(p.runningAfter, func() { p.expire(s) })
		p.mu.Unlock()
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
func (p *Publisher) expire(s *message.NodeStatus) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held != s {
		return
	}
	p.held = nil
	p.pending = append(p.pending, p.b.Publish(p.ctx, statusMessage(s)))
}

// release settles the held running status before anything else is
// reported: into the batch when its timer had not fired, else published at
// once (the timer fired but has not published it yet), so it always comes
// first.
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
	p.pending = append(p.pending, p.b.Publish(p.ctx, statusMessage(s)))
}

func (p *Publisher) publishNow(m broker.Message) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending = append(p.pending, p.b.Publish(p.ctx, m))
}

// Execute implements engine.Sink. A delayed message (a retry) is never a
// first copy: a delay queue may dead-letter it twice (quorum queues'
// at-least-once dead-lettering).
func (p *Publisher) Execute(m *message.NodeExecution, delay time.Duration) {
	p.release()
	p.open = nil
	p.batch = append(p.batch, broker.Message{Topic: broker.Execution, ID: m.MessageID, Key: m.ExecutionID, Lane: lane(m.LineageStack), Body: m, Delay: delay, Trace: p.trace,
		First: p.mark && delay == 0})
}

// FirstCopy implements engine.FirstCopies.
func (p *Publisher) FirstCopy() bool { return p.first }

// MarkFirst implements engine.FirstCopies.
func (p *Publisher) MarkFirst(first bool) { p.mark = first }

// Timeout implements engine.Sink.
func (p *Publisher) Timeout(t *message.Timeout, delay time.Duration) {
	p.release()
	p.open = nil
	p.batch = append(p.batch, broker.Message{Topic: broker.Timeout, ID: t.Message.MessageID, Key: t.ExecutionID, Body: t, Delay: delay, Trace: p.trace})
}

// Complete implements engine.Sink.
func (p *Publisher) Complete(c *message.Completion) {
	p.release()
	p.open = nil
	p.completed = append(p.completed, c)
	p.batch = append(p.batch, broker.Message{Topic: broker.Completion, ID: c.ExecutionID, Key: c.ExecutionID, Body: c})
}

// MayFuse implements engine.FuseGate: a worker that is shutting down runs
// the node in hand and publishes its successors for another worker.
func (p *Publisher) MayFuse() bool { return p.running == nil || p.running.Err() == nil }

// SyncStatuses implements engine.StatusSyncer: it publishes what is
// batched (the statuses reported so far) and waits until it is safe.
func (p *Publisher) SyncStatuses(context.Context) error {
	return p.Flush()
}

// Flush publishes what is batched and waits until the broker has accepted
// every message this Publisher sent.
func (p *Publisher) Flush() error {
	p.release()
	p.open = nil
	p.mu.Lock()
	// In chunks: a split's many branch messages are then encoded and
	// written a chunk at a time, and their bytes freed as they go, still
	// pipelined (confirms are awaited below, all together).
	for len(p.batch) > 0 {
		n := min(len(p.batch), flushChunk)
		p.pending = append(p.pending, p.b.Publish(p.ctx, p.batch[:n]...))
		p.batch = p.batch[n:]
	}
	p.batch = nil
	pending := p.pending
	p.pending = nil
	p.mu.Unlock()
	var first error
	for _, pd := range pending {
		if err := pd.Wait(p.ctx); err != nil && first == nil {
			first = err
		}
	}
	if first == nil && p.onComplete != nil {
		for _, c := range p.completed {
			p.onComplete(p.ctx, c)
		}
	}
	p.completed = nil
	return first
}
