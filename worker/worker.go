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
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/metrics"
	"github.com/rune-org/rune/publish"
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
	// (publish.DefaultRunningAfter); negative publishes every running
	// status at once.
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
			return handleTimeout(work, ctx.Done(), cfg, d)
		})
	}()
	opts := broker.ConsumeOptions{Concurrency: cfg.Concurrency, Prefetch: cfg.Prefetch}
	err := cfg.Broker.Consume(ctx, broker.Execution, opts, func(_ context.Context, d *broker.Delivery) error {
		return handle(work, ctx.Done(), cfg, d)
	})
	return errors.Join(err, <-timeouts)
}

// handleTimeout and handle run a delivery on ctx; draining is closed once
// the worker is shutting down.
func handleTimeout(ctx context.Context, draining <-chan struct{}, cfg Config, d *broker.Delivery) error {
	t, ok := d.Body.(*message.Timeout)
	if !ok {
		return fmt.Errorf("%w: body of %T on %s", broker.ErrReject, d.Body, d.Topic)
	}
	return settle(ctx, draining, cfg, d, runIDs{exec: t.ExecutionID, workflow: t.WorkflowID, node: t.NodeID, stack: t.LineageStack, attempt: 1},
		func(ctx context.Context, dl engine.Delivery, s engine.Sink) error {
			return cfg.Engine.HandleTimeout(ctx, dl, t, s)
		})
}

func handle(ctx context.Context, draining <-chan struct{}, cfg Config, d *broker.Delivery) error {
	m, ok := d.Body.(*message.NodeExecution)
	if !ok {
		return fmt.Errorf("%w: body of %T on %s", broker.ErrReject, d.Body, d.Topic)
	}
	err := settle(ctx, draining, cfg, d, runIDs{exec: m.ExecutionID, workflow: m.WorkflowID, node: m.CurrentNode, stack: m.LineageStack, attempt: m.Attempt},
		func(ctx context.Context, dl engine.Delivery, s engine.Sink) error {
			return cfg.Engine.Handle(ctx, dl, m, s)
		})
	if rejected(err) {
		reportDeadLetter(ctx, cfg, m, err)
	}
	return err
}

// settle runs the engine on a delivery through a publisher and turns the
// outcome into the broker's: nil acks once every effect is published, an
// invalid message is rejected (dead-lettered), anything else is delivered
// again.
func settle(ctx context.Context, draining <-chan struct{}, cfg Config, d *broker.Delivery, ids runIDs, run func(context.Context, engine.Delivery, engine.Sink) error) error {
	topic := string(d.Topic)
	cfg.Metrics.InFlight(topic, 1)
	defer cfg.Metrics.InFlight(topic, -1)
	dl := engine.Delivery{First: d.First, Redelivered: d.Redelivered, Draining: draining}
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
		dl.Trace = cfg.Tracer.Traceparent(ctx)
	}
	pc := publish.Config{Broker: cfg.Broker, Completed: cfg.Engine.Completed, RunningAfter: cfg.RunningAfter}
	err = publish.Handle(ctx, pc, func(s engine.Sink) error { return run(ctx, dl, s) })
	if errors.Is(err, engine.ErrInvalid) {
		cfg.Logger.Error("rejecting message", append(ids.attrs(d), "err", err)...)
		cfg.Metrics.DeadLetter(topic)
		return fmt.Errorf("%w: %v", broker.ErrReject, err)
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

// DefaultRunningAfter is Config.RunningAfter's default.
const DefaultRunningAfter = publish.DefaultRunningAfter
