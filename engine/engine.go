// Package engine is the heart of Rune: one NodeExecutionMessage in, its effects
// out (statuses, successor messages, a completion). It owns routing, context
// accumulation, the lineage stack, error strategies, retries and completion
// accounting; node types know nothing of queues, and runtimes know nothing of
// workflow semantics (RFC 001 §7).
package engine

import (
	"bytes"
	"compress/flate"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/expr"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/metrics"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/tracing"
	"github.com/rune-org/rune/workflow"
)

// Config configures an Engine.
type Config struct {
	// Registry holds the node types that do work. Required. The control
	// nodes (split, aggregator, merge, wait, delay) are the engine's own
	// (control.go) and need no registering.
	Registry *node.Registry
	// Coord does completion accounting and cancellation. Required.
	Coord coord.Coordinator
	// Timers holds suspended branches of wait and delay nodes; nil means
	// such nodes fail with UNSUPPORTED_NODE.
	Timers coord.Timers
	// Barriers join branches at aggregators and merges; nil means such
	// nodes cannot run (their messages are rejected).
	Barriers coord.Barriers
	// Blobs hold large context values once per execution; nil means every
	// value travels in every message.
	Blobs coord.Blobs
	// RefThreshold is the JSON size from which a context value travels by
	// reference through Blobs. Default 64 KiB; negative never.
	RefThreshold int
	// PackThreshold is the bound of the JSON size (jsonBound) from which
	// the context values a message would carry inline travel together as
	// one blob, a pack (packs.go). Default DefaultPackThreshold; negative
	// never.
	PackThreshold int
	// BlobCacheBytes bounds the decoded blobs kept in memory. Default 256 MiB.
	BlobCacheBytes int
	// Definitions keeps workflow definitions once, so that frozen messages
	// of waiting branches refer to theirs instead of carrying a copy. Its
	// entries must outlive the longest wait (366 days). Nil means frozen
	// messages carry their definition.
	Definitions coord.Blobs
	// Secrets resolves credential references; nil means nodes get none.
	Secrets node.Secrets
	// Logger receives engine logs. Default slog.Default().
	Logger *slog.Logger
	// Limits bound expression evaluation. Zero means expr's defaults.
	Limits expr.Limits
	// DefaultNodeTimeout bounds one attempt of a node without its own
	// "timeout". Default 5 minutes.
	DefaultNodeTimeout time.Duration
	// Now returns the current time. Default time.Now.
	Now func() time.Time
	// CacheSize is how many compiled workflow definitions are kept. Default 256.
	CacheSize int
	// Metrics records node runs, halts, splits and completions; nil records
	// nothing.
	Metrics *metrics.Recorder
	// CompletionRouted, when set, reports whether the broker took a
	// completion of exec whose publish was never confirmed (its connection
	// was lost with the confirm on its way): amqp.Broker.CompletionRouted.
	// A redelivered completer asks it before publishing the completion
	// again, and publishes none when the first is out. Nil: it publishes
	// again.
	CompletionRouted func(ctx context.Context, exec string) (bool, error)
	// NoFuse runs every node in a hop of its own. Default false: a pure
	// successor (set, conditional, switch, log) runs in the hop of the node
	// before it, unless its workflow's settings say "fuse": false.
	NoFuse bool
	// FuseBudget is how long one hop may go on running fused nodes: past
	// it, the next pure node is published as a message of its own. Default
	// 5 ms (a hop also stops at 64 nodes).
	FuseBudget time.Duration
	// Limiter holds the rate limits and throttles of nodes by key, shared
	// by every worker (flow.go); nil means nodes with a rate_limit or
	// throttle fail with UNSUPPORTED_NODE.
	Limiter coord.Limiter
	// Events matches events to the wait_for_event nodes waiting for them
	// (control_event.go); nil means such nodes fail with UNSUPPORTED_NODE
	// and DeliverEvent with ErrNoEvents.
	Events coord.Events
	// EventRetention is how long a delivered event is kept for the
	// wait_for_event nodes that register their wait after it arrived.
	// Default DefaultEventRetention (24 h).
	EventRetention time.Duration
	// ChildResults keeps the ends of child executions for their parents'
	// workflow nodes (control_workflow.go, DeliverChild); nil means such
	// nodes fail with UNSUPPORTED_NODE. Issue 34.
	ChildResults coord.Effects
	// Digests holds the open digests of digest nodes (control_digest.go);
	// nil means such nodes fail with UNSUPPORTED_NODE. Issue 36.
	Digests coord.Digests
}

// Sink receives the effects of handling one message, in the order the
// engine reports them, and publishes them; the runtime decides how. It is
// the engine's one seam to the runtime (package publish is the runtimes'
// Sink; Effects records effects in memory). Its contract:
//
//   - Status, Execute, Timeout and Complete queue an effect. Nothing
//     reported is safe until Sync returned nil; a runtime must not
//     acknowledge the handled message before.
//   - Status may publish a running status at once, under ctx (a user then
//     sees a slow node run); every other effect waits for Sync.
//   - Effects go out in the order reported: a status reported before a
//     successor or a completion is never published after it.
//   - Sync publishes everything reported so far and returns once it is
//     safely published, or with the error that kept it from it. Effects
//     reported after a Sync go out at the next one. The engine calls Sync
//     itself when some statuses must be safe before it goes on (see
//     statusesFirst); the runtime calls it at the end of the handling.
//
// A Sink serves one handling and is not safe for concurrent use.
type Sink interface {
	// Status reports node progress.
	Status(ctx context.Context, s *message.NodeStatus)
	// Execute sends a message to run a node.
	Execute(m *message.NodeExecution, how Publish)
	// Timeout arms a barrier's deadline: t is delivered to HandleTimeout
	// after how.Delay.
	Timeout(t *message.Timeout, how Publish)
	// Complete ends the execution.
	Complete(c *message.Completion)
	// Sync publishes what was reported and waits until it is safe.
	Sync(ctx context.Context) error
}

// Publish says how a message the engine reports is to be published.
type Publish struct {
	// Delay holds the message back (a retry's backoff, a barrier's
	// deadline).
	Delay time.Duration
	// First marks a first copy (see Delivery.First): a successor reported
	// by the handling whose Finish first recorded its parent.
	First bool
	// Trace is the traceparent the message carries, so that the span of
	// its handling is a child of the span that reported it ("": none).
	Trace string
}

// Delivery is what the runtime knows of the message it hands the engine.
// The zero Delivery is a message that may have been delivered before,
// untraced, by a runtime that is not draining.
type Delivery struct {
	// First says the message is a first copy (broker.Message.First: a
	// successor published by the handling whose Finish first recorded its
	// parent, so each message id has at most one). With Redelivered false,
	// no earlier delivery of it ran, and the engine may run an eager node
	// (node.Eager) before asking the coordinator: its Finish makes Begin's
	// checks (coord.FinishOptimistic). Every other copy (a replay's, a
	// trigger's, a retry's, a dead letter's) is unmarked.
	First bool
	// Redelivered says the broker delivered the message before.
	Redelivered bool
	// Trace is the traceparent of the handling's span: the messages the
	// handling reports carry it (and a fused hop moves it on to each node
	// it runs). "" traces nothing.
	Trace string
	// Draining is closed once the runtime stops taking new work: the
	// engine then finishes the node in hand but fuses no more (its
	// successors are published for another worker). Nil never closes.
	Draining <-chan struct{}

	// unpaused marks the handling of a branch that a pause parked and a
	// resume woke (pause.go): it runs, never parks again.
	unpaused bool
}

// firstCopy reports whether d is a first copy's first delivery.
func (d Delivery) firstCopy() bool { return d.First && !d.Redelivered }

// draining reports whether d's runtime has stopped taking new work.
func (d Delivery) draining() bool {
	select {
	case <-d.Draining:
		return true
	default:
		return false
	}
}

// ErrInvalid marks a message that can never be handled (bad definition,
// unknown node, malformed fields). Runtimes dead-letter such messages.
var ErrInvalid = errors.New("invalid message")

// Engine turns messages into effects. It is safe for concurrent use.
type Engine struct {
	cfg      Config
	types    *node.Registry // Config.Registry's and the control types
	log      *slog.Logger
	compiler *expr.Compiler
	cache    *cache
	blobs    *blobCache
	// inflaters are flate readers for Thaw (Reset takes any dictionary).
	inflaters sync.Pool

	defsMu     sync.Mutex
	defsStored map[uint64]*storedDef // definitions put lately, by hash
}

// New returns an Engine.
func New(cfg Config) (*Engine, error) {
	if cfg.Registry == nil {
		return nil, errors.New("engine: Config.Registry is required")
	}
	if cfg.Coord == nil {
		return nil, errors.New("engine: Config.Coord is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.DefaultNodeTimeout <= 0 {
		cfg.DefaultNodeTimeout = 5 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.CacheSize <= 0 {
		cfg.CacheSize = 256
	}
	if cfg.RefThreshold == 0 {
		cfg.RefThreshold = 64 << 10
	}
	if cfg.PackThreshold == 0 {
		cfg.PackThreshold = DefaultPackThreshold
	}
	if cfg.BlobCacheBytes <= 0 {
		cfg.BlobCacheBytes = 256 << 20
	}
	if cfg.FuseBudget <= 0 {
		cfg.FuseBudget = DefaultFuseBudget
	}
	if cfg.EventRetention <= 0 {
		cfg.EventRetention = DefaultEventRetention
	}
	e := &Engine{
		cfg:        cfg,
		types:      WithControls(cfg.Registry),
		log:        cfg.Logger,
		compiler:   expr.NewCompiler(cfg.Limits),
		cache:      newCache(cfg.CacheSize),
		blobs:      &blobCache{max: cfg.BlobCacheBytes},
		defsStored: map[uint64]*storedDef{},
	}
	e.inflaters.New = func() any { return flate.NewReader(bytes.NewReader(nil)) }
	return e, nil
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Handle runs the node that m names, delivered as d says, and reports every
// effect to sink.
//
// A returned error wrapping ErrInvalid means m can never be handled; any other
// error (coordination unreachable, ctx done) means m should be delivered
// again later. A node's own failure is not an error of Handle: it becomes a
// failed status and follows the node's error strategy.
func (e *Engine) Handle(ctx context.Context, d Delivery, m *message.NodeExecution, sink Sink) error {
	if err := m.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	wf, n, err := e.compiled(ctx, m, "message")
	if err != nil {
		return err
	}
	if n == nil {
		return invalidf("message %s: current_node %q is not a node of workflow %q", m.MessageID, m.CurrentNode, wf.Def.ID)
	}
	if n.Trigger {
		return invalidf("message %s: current_node %q is the trigger, which is never executed", m.MessageID, n.ID)
	}
	tracing.NodeType(ctx, n.Type)
	ref, err := e.refFor(ctx, wf, m)
	if err != nil {
		return err
	}
	st := &step{e: e, wf: wf, m: m, node: n, sink: sink, ref: ref, d: d, trace: d.Trace}
	st.mode = st.modeOf()
	return st.handle(ctx)
}

// Resume ends the wait of a wait or delay node whose timer came due at due:
// the node succeeds and its successors are reported to sink (RFC 006 §5.2).
// d says what the runtime knows (a scheduler: the trace of its span).
// m is the frozen message of the wait node. Resuming twice is harmless: the
// second time replays the first one's effects, with the same message ids.
func (e *Engine) Resume(ctx context.Context, d Delivery, m *message.NodeExecution, due time.Time, sink Sink) error {
	m.MessageID = deferredMessageID(m.MessageID) // a deferred run's timer (defer.go)
	if err := m.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	wf, n, err := e.compiled(ctx, m, "message")
	if err != nil {
		return err
	}
	if n != nil && !isWait(n.Type) && !isEventWait(n.Type) && !isChildWorkflow(n.Type) && !isDigest(n.Type) {
		// The timer of any other node is a deferred run's: by its flow
		// control, or by the node itself (node.Defer).
		return e.resumeDeferred(d, m, sink) // a deferred run (defer.go)
	}
	if n == nil {
		return invalidf("message %s: current_node %q is not a node of workflow %q", m.MessageID, m.CurrentNode, wf.Def.ID)
	}
	tracing.NodeType(ctx, n.Type)
	ref, err := e.refFor(ctx, wf, m)
	if err != nil {
		return err
	}
	st := &step{e: e, wf: wf, m: m, node: n, sink: sink, mode: modeResume, resumedAt: due, ref: ref, d: d, trace: d.Trace}
	return st.handle(ctx)
}

// compiled compiles m's definition and finds its current node (nil when the
// definition has none); what names m in errors.
func (e *Engine) compiled(ctx context.Context, m *message.NodeExecution, what string) (*Workflow, *workflow.Node, error) {
	var wf *Workflow
	var err error
	if len(m.WorkflowDefinition) == 0 && m.DefinitionRef != "" {
		if wf, err = e.byRef(ctx, m.DefinitionRef); err != nil {
			return nil, nil, fmt.Errorf("%s %s: %w", what, m.MessageID, err)
		}
	} else if wf, err = e.Compile(m.WorkflowDefinition); err != nil {
		return nil, nil, fmt.Errorf("%w: %s %s: %v", ErrInvalid, what, m.MessageID, err)
	}
	if m.WorkflowID != wf.Def.ID {
		// Statuses and completions carry workflow_id: it must be the one
		// whose definition runs.
		return nil, nil, invalidf("%s %s: workflow_id %q is not the id of its workflow_definition (%q)", what, m.MessageID, m.WorkflowID, wf.Def.ID)
	}
	n, _ := wf.Graph.Node(m.CurrentNode)
	return wf, n, nil
}
