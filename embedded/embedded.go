// Package embedded is Rune's single-process runtime: the same engine, nodes
// and worker as the distributed runtime, in one process. By default it runs
// on the in-process broker and coordinator (broker/memory, coord/memory),
// so `rune run` and tests need no server, and nothing outlives the process.
// With Options.DB it is durable: broker and coordination live in one SQLite
// file (broker/sqlite, coord/sqlite), so that `rune server`'s queued,
// running and waiting work survives a restart (docs/architecture.md, "The
// durable embedded runtime").
package embedded

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/broker/memory"
	"github.com/rune-org/rune/client"
	"github.com/rune-org/rune/coord"
	coordmem "github.com/rune-org/rune/coord/memory"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/internal/sqlitedb"
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
	// DB, when set, makes the runtime durable: its queues, coordination,
	// timers, barriers and the records of sends live in this SQLite file,
	// which the caller opened (sqlitedb.Open) and closes after Close. Nil
	// (the default) keeps everything in memory.
	DB *sqlitedb.DB
	// DrainTimeout bounds how long Close lets the node executions in hand
	// run on; what is still running then is handed back to the broker
	// (with DB: delivered again after a restart). Default: the worker's
	// (30s).
	DrainTimeout time.Duration
	// EventRetention is how long a sent event is kept for wait_for_event
	// nodes that reach their wait after it (issue 34). Default: the
	// engine's (24 h).
	EventRetention time.Duration
}

// Runtime runs workflows in this process until Close. Its fields are the
// seams it runs on, in memory or on SQLite (Options.DB).
type Runtime struct {
	Broker   broker.Broker
	Coord    coord.Coordinator
	Timers   coord.Timers
	Barriers coord.Barriers
	// Effects records the sends of email and sms nodes (unless
	// Options.Nodes.Effects or Options.Registry replaced it).
	Effects coord.Effects
	Engine  *engine.Engine
	// Limiter holds the nodes' rate limits and throttles (issues 35, 36).
	Limiter coord.Limiter
	// Events matches sent events to the wait_for_event nodes (issue 34).
	Events coord.Events
	// Digests holds the open digests of digest nodes (issue 36).
	Digests coord.Digests
	// DeadLetters lists, replays and purges the messages the worker
	// rejected; nil in memory, where dead letters are only logged.
	DeadLetters DeadLetters

	blobs coord.Blobs // large values and frozen definitions; nil in memory

	cancel  context.CancelFunc
	wg      sync.WaitGroup
	closers []func() error // the seams' own, after the workers stopped
}

// DeadLetters is a durable broker's dead-letter queue.
type DeadLetters interface {
	// List returns up to limit dead letters, oldest first, and how many
	// there are. It takes nothing away.
	List(ctx context.Context, limit int) ([]DeadLetter, int, error)
	// Replay publishes the dead letters ids again on the topic they came
	// from and removes them; it returns the ids replayed.
	Replay(ctx context.Context, ids []string) ([]string, error)
	// Purge discards every dead letter and returns how many there were.
	Purge(ctx context.Context) (int, error)
}

// DeadLetter is one rejected message.
type DeadLetter = broker.DeadLettered

// New starts a runtime with its workers.
func New(opts Options) (*Runtime, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	followOnly := []broker.Topic{broker.Status, broker.Completion}
	if opts.ConsumeEvents {
		followOnly = nil
	}
	r := &Runtime{}
	if opts.DB != nil {
		if err := r.durable(opts, followOnly); err != nil {
			return nil, err
		}
	} else {
		mb := memory.New(memory.Options{Logger: opts.Logger, FollowOnly: followOnly})
		mc := coordmem.New(coordmem.Options{Retain: 5 * time.Second}) // one process: redeliveries come within a second
		r.Broker, r.Coord, r.Timers, r.Barriers, r.Effects = mb, mc, coordmem.NewTimers(), coordmem.NewBarriers(), coordmem.NewEffects(0)
		r.closers = append(r.closers, mc.Close, mb.Close)
		r.Limiter = coordmem.NewLimiter()
		r.Events = coordmem.NewEvents()
		r.Digests = coordmem.NewDigests()
	}
	reg := opts.Registry
	if reg == nil {
		if opts.Nodes.Effects == nil {
			opts.Nodes.Effects = r.Effects
		}
		reg = nodes.NewRegistry(opts.Nodes)
	}
	// In memory, values travel in the messages and frozen waits carry their
	// definition: nothing to share them with. Durable, they are stored once,
	// as on Redis (a frozen wait's definition outlives it: Blobs keep
	// definitions until released).
	eng, err := engine.New(engine.Config{Registry: reg, Coord: r.Coord, Timers: r.Timers, Barriers: r.Barriers,
		Blobs: r.blobs, Definitions: r.blobs, Secrets: opts.Secrets, Logger: opts.Logger, Metrics: opts.Metrics,
		Limiter: r.Limiter, Events: r.Events, EventRetention: opts.EventRetention,
		ChildResults: r.Effects,  // issue 34: the ends of child executions
		Digests:      r.Digests}) // issue 36
	if err != nil {
		r.closeSeams()
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
		if err := worker.Run(ctx, worker.Config{Broker: r.Broker, Engine: eng, Concurrency: opts.Concurrency, DrainTimeout: opts.DrainTimeout,
			Logger: opts.Logger, Metrics: opts.Metrics, Tracer: opts.Tracer}); err != nil {
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

// Close stops the workers, lets the messages in hand finish (within
// Options.DrainTimeout), and releases the runtime. With Options.DB, what
// was not finished stays in the file for the next Runtime on it.
func (r *Runtime) Close() error {
	r.cancel()
	r.wg.Wait()
	return r.closeSeams()
}

func (r *Runtime) closeSeams() error {
	var errs []error
	for _, c := range r.closers {
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}
