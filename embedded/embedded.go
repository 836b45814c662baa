// Package embedded is Rune's single-process runtime: the same engine, nodes
// and worker as the distributed runtime, on the in-process broker and
// coordinator, so `rune run` and tests need no server.
package embedded

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/broker/memory"
	"github.com/rune-org/rune/client"
	coordmem "github.com/rune-org/rune/coord/memory"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/metrics"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/nodes"
	"github.com/rune-org/rune/scheduler"
	"github.com/rune-org/rune/tracing"
	"github.com/rune-org/rune/worker"
)

// Options configures a Runtime. The zero value is ready to use.
type Options struct {
	// Logger receives runtime and node logs. Default slog.Default().
	Logger *slog.Logger
	// Concurrency is how many node executions run at once. Default: worker's default.
	Concurrency int
	// Nodes configures the built-in node types.
	Nodes nodes.Options
	// Registry replaces the built-in node types when set.
	Registry *node.Registry
	// Secrets resolves credential references; nil means nodes get none.
	Secrets node.Secrets
	// ConsumeEvents queues Status and Completion messages for Consume as
	// well as for followers: an embedded `rune server` consumes them into
	// its history. Default false: followers only (nobody would read the
	// queue, and it would only grow).
	ConsumeEvents bool
	// Metrics records what the engine, worker and scheduler do; nil
	// records nothing.
	Metrics *metrics.Recorder
	// Tracer makes a span of each node run; nil traces nothing.
	Tracer *tracing.Tracer
}

// Runtime runs workflows in this process until Close.
type Runtime struct {
	Broker *memory.Broker
	Coord  *coordmem.Coordinator
	Timers *coordmem.Timers
	Engine *engine.Engine

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New starts a runtime with its workers.
func New(opts Options) (*Runtime, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	reg := opts.Registry
	if reg == nil {
		if opts.Nodes.Effects == nil {
			opts.Nodes.Effects = coordmem.NewEffects(0)
		}
		reg = nodes.NewRegistry(opts.Nodes)
	}
	followOnly := []broker.Topic{broker.Status, broker.Completion}
	if opts.ConsumeEvents {
		followOnly = nil
	}
	r := &Runtime{
		Broker: memory.New(memory.Options{Logger: opts.Logger, FollowOnly: followOnly}),
		Coord:  coordmem.New(coordmem.Options{Retain: 5 * time.Second}), // one process: redeliveries come within a second
	}
	r.Timers = coordmem.NewTimers()
	eng, err := engine.New(engine.Config{Registry: reg, Coord: r.Coord, Timers: r.Timers, Barriers: coordmem.NewBarriers(),
		Secrets: opts.Secrets, Logger: opts.Logger, Metrics: opts.Metrics})
	if err != nil {
		return nil, err
	}
	r.Engine = eng
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.wg.Add(2)
	go func() {
		defer r.wg.Done()
		// In process, timers fire within 10 ms of their due time.
		_ = scheduler.Run(ctx, scheduler.Config{Timers: r.Timers, Broker: r.Broker, Engine: eng, Poll: 10 * time.Millisecond, Logger: opts.Logger, Metrics: opts.Metrics, Tracer: opts.Tracer})
	}()
	go func() {
		defer r.wg.Done()
		if err := worker.Run(ctx, worker.Config{Broker: r.Broker, Engine: eng, Concurrency: opts.Concurrency, Logger: opts.Logger, Metrics: opts.Metrics, Tracer: opts.Tracer}); err != nil {
			opts.Logger.Error("embedded worker stopped", "err", err)
		}
	}()
	return r, nil
}

// Run executes the workflow definition raw with trigger payload input and
// returns its completion, calling onStatus (when not nil) for each status.
// An invalid definition returns workflow.Problems.
func (r *Runtime) Run(ctx context.Context, raw []byte, input any, onStatus func(*message.NodeStatus)) (*message.Completion, error) {
	wf, err := r.Engine.Compile(raw)
	if err != nil {
		return nil, err
	}
	return r.RunCompiled(ctx, wf, input, onStatus)
}

// RunCompiled is Run for a definition compiled with r.Engine.
func (r *Runtime) RunCompiled(ctx context.Context, wf *engine.Workflow, input any, onStatus func(*message.NodeStatus)) (*message.Completion, error) {
	return client.Run(ctx, r.Broker, r.Engine, wf, engine.NewExecutionID(time.Now()), input, onStatus)
}

// Close stops the workers, lets the messages in hand finish, and releases the runtime.
func (r *Runtime) Close() error {
	r.cancel()
	r.wg.Wait()
	r.Coord.Close()
	return r.Broker.Close()
}
