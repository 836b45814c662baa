package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/codes"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/client"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/tracing"
	"github.com/rune-org/rune/workflow"
)

// Defaults of DispatchConfig.
const (
	DispatchPollDefault  = 25 * time.Millisecond
	DispatchLeaseDefault = 30 * time.Second
	DispatchBatchDefault = 200
	dispatchParallelism  = 32
)

// DispatchConfig configures the dispatcher. Every field has the default its
// comment states.
type DispatchConfig struct {
	// Poll is the dispatcher's pause when nothing is due (a trigger
	// through this server's API wakes it at once). Defaults to DispatchPollDefault.
	Poll time.Duration
	// Lease is how long a claimed, not yet dispatched execution is
	// this server's before another may dispatch it. Defaults to DispatchLeaseDefault.
	Lease time.Duration
	// Batch is how many executions one claim takes. Defaults to DispatchBatchDefault.
	Batch int
}

func (c DispatchConfig) withDefaults() DispatchConfig {
	c.Poll = cmp.Or(c.Poll, DispatchPollDefault)
	c.Lease = cmp.Or(c.Lease, DispatchLeaseDefault)
	c.Batch = cmp.Or(c.Batch, DispatchBatchDefault)
	return c
}

func (c DispatchConfig) validate() error {
	if c.Batch < 0 {
		return fmt.Errorf("server: Config.Dispatch.Batch is %d, want positive", c.Batch)
	}
	return nil
}

// dispatcher claims due executions and publishes their first messages. The
// claim commits before anything is published (the outbox of seed 003): an
// execution whose publish failed, or whose server died before
// MarkDispatched, is claimed again once its lease ends and published again
// — the engine's deterministic message ids and the coordinator's idempotent
// Start make that second publish harmless.
type dispatcher struct {
	cfg DispatchConfig
	dispatcherDeps
	// wake tells the dispatcher an execution is available now.
	wake chan struct{}
	defs defCache
}

// dispatcherDeps are what the dispatcher uses of the server.
type dispatcherDeps struct {
	store  store.Store
	broker broker.Broker
	engine *engine.Engine
	tracer *tracing.Tracer
	log    *slog.Logger
	now    func() time.Time
	// owner names this server in its claims.
	owner   string
	metrics *serverMetrics
	// commits is told of the completions the dispatcher records itself.
	commits *commits
	// flow decides concurrency slots (flow.go); nil: none.
	flow *flow
}

func newDispatcher(cfg DispatchConfig, deps dispatcherDeps) *dispatcher {
	d := &dispatcher{cfg: cfg, dispatcherDeps: deps, wake: make(chan struct{}, 1)}
	d.defs.store, d.defs.engine = deps.store, deps.engine
	return d
}

// wakeUp tells the dispatcher to claim now.
func (d *dispatcher) wakeUp() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Run claims due executions and dispatches them until ctx is done.
func (d *dispatcher) Run(ctx context.Context) error {
	return rounds(ctx, d.wake, func(ctx context.Context) time.Duration {
		n, err := d.dispatchOnce(ctx)
		if err != nil && ctx.Err() == nil {
			d.log.Warn("dispatcher: claim failed; retrying", "err", err)
		}
		switch {
		case n == d.cfg.Batch:
			return 0 // a full batch: more may be due
		case err != nil:
			return max(d.cfg.Poll, time.Second)
		}
		return d.cfg.Poll
	})
}

// dispatchOnce claims one batch and dispatches it; it returns how many it
// claimed. The executions published are marked dispatched in one write
// after the batch (one commit per batch, not per execution): a server that
// dies before it leaves them claimed, and they are published again after
// the lease, which is harmless.
func (d *dispatcher) dispatchOnce(ctx context.Context) (int, error) {
	xs, err := d.store.ClaimExecutions(ctx, store.Claim{Owner: d.owner, Now: d.now(), Lease: d.cfg.Lease, Limit: d.cfg.Batch})
	if err != nil {
		return 0, err
	}
	now := d.now()
	for _, x := range xs {
		d.metrics.dispatchLag.Observe(max(0, now.Sub(x.AvailableAt).Seconds()))
	}
	prios := d.priorities(ctx, xs)
	sem := make(chan struct{}, dispatchParallelism)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var published []string
	for _, x := range xs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ok, err := d.dispatchOne(ctx, x, prios[x.ID])
			if err != nil && ctx.Err() == nil {
				d.log.Warn("dispatcher: execution not dispatched; it is claimed again after the lease",
					"execution", x.ID, "workflow", x.WorkflowID, "version", x.Version, "lease", d.cfg.Lease, "err", err)
			}
			if ok {
				mu.Lock()
				published = append(published, x.ID)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(published) == 0 {
		return len(xs), nil
	}
	// Another server took over the claims not marked after our lease
	// ended; it publishes the same messages again, which changes nothing.
	d.metrics.dispatched.Add(float64(len(published)))
	if _, err := d.store.MarkDispatchedAll(ctx, published, d.owner, d.now()); err != nil {
		return len(xs), fmt.Errorf("mark %d executions dispatched: %w", len(published), err)
	}
	return len(xs), nil
}

// priorities returns the priorities of the claimed executions xs that have
// another than the default (flow.go): their node messages carry it. On a
// failed read they go at the default priority: the order of node messages
// is a preference, not a guarantee.
func (d *dispatcher) priorities(ctx context.Context, xs []*store.Execution) map[string]int {
	if d.flow == nil || d.flow.fs == nil || len(xs) == 0 {
		return nil
	}
	ids := make([]string, len(xs))
	for i, x := range xs {
		ids[i] = x.ID
	}
	m, err := d.flow.fs.Priorities(ctx, ids)
	if err != nil && ctx.Err() == nil {
		d.log.Warn("dispatcher: reading the priorities of claimed executions failed; their node messages go at the default priority", "err", err)
	}
	return m
}

// dispatchOne publishes x's first messages (ok: published, to be marked
// dispatched) or ends it without publishing.
func (d *dispatcher) dispatchOne(ctx context.Context, x *store.Execution, priority int) (ok bool, err error) {
	ctx, span := d.tracer.Dispatch(ctx, x.ID, x.WorkflowID, x.Version)
	defer func() {
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}()
	if x.CancelRequested {
		return false, d.cancelUndispatched(ctx, x)
	}
	wf, err := d.defs.get(ctx, x.WorkflowID, x.Version)
	var ps workflow.Problems
	if errors.As(err, &ps) {
		// Valid when stored, invalid now (a node type gone from this
		// build): dispatching again would fail again.
		return false, d.endUndispatched(ctx, x, message.CompletionFailed, message.Failure{Error: message.Error{Code: "INVALID_WORKFLOW",
			Message: fmt.Sprintf("workflow %s version %d does not compile on this server: %v", x.WorkflowID, x.Version, ps)}})
	}
	if err != nil {
		return false, err
	}
	// Concurrency by key (flow.go): held for a slot, or dropped.
	if run, err := d.admit(ctx, x, wf); !run || err != nil {
		return false, err
	}
	var input any
	if len(x.Input) > 0 {
		if err := json.Unmarshal(x.Input, &input); err != nil {
			return false, d.endUndispatched(ctx, x, message.CompletionFailed, message.Failure{Error: message.Error{Code: CodeInputRefused,
				Message: "the stored trigger payload is not JSON"}})
		}
	}
	if strings.HasPrefix(x.Trigger, "rerun:") {
		// A re-run from a node starts there (rerun.go).
		if handled, ok, err := d.dispatchRerun(ctx, x, wf); handled {
			return ok, err
		}
	}
	err = client.StartWith(ctx, d.broker, d.engine, wf, x.ID, input, engine.StartOptions{Priority: priority})
	if errors.Is(err, engine.ErrInvalid) {
		// A permanent refusal (the input breaks the policy: enqueued before
		// the API checked it, or by another way in): dispatching again
		// would be refused again.
		return false, d.endUndispatched(ctx, x, message.CompletionFailed, refusedStart(err))
	}
	if err != nil {
		return false, err
	}
	return true, nil
}

// refusedStart is the failure of an execution the engine refused to start.
func refusedStart(err error) message.Failure {
	var pe *message.PolicyError
	if errors.As(err, &pe) {
		return message.Failure{Error: message.Error{Code: CodeInputRefused,
			Message: "the trigger payload breaks the input policy: " + pe.Error()}}
	}
	return message.Failure{Error: message.Error{Code: CodeStartRefused, Message: err.Error()}}
}

// Failure codes of executions the dispatcher ends without running them.
const (
	// CodeInputRefused: the trigger payload breaks the input policy.
	CodeInputRefused = "INVALID_INPUT"
	// CodeStartRefused: the engine refused the start for another
	// permanent reason.
	CodeStartRefused = "START_REFUSED"
)

// cancelUndispatched ends an execution whose cancel came while it was
// claimed: it is halted in case an earlier claimer did publish it, and
// recorded as a halted completion, which the store shows as cancelled. The
// completion's dedupe key is the one a real completion of the execution
// has, so a late real one is the same event.
func (d *dispatcher) cancelUndispatched(ctx context.Context, x *store.Execution) error {
	f := cancelFailure()
	if err := d.engine.Halt(ctx, x.ID, f); err != nil && !errors.Is(err, engine.ErrEnded) {
		return err
	}
	return d.endUndispatched(ctx, x, message.CompletionHalted, f)
}

// endUndispatched records a completion for an execution the dispatcher will
// not publish.
func (d *dispatcher) endUndispatched(ctx context.Context, x *store.Execution, status string, f message.Failure) error {
	now := d.now().UTC()
	c := &message.Completion{WorkflowID: x.WorkflowID, ExecutionID: x.ID, Status: status,
		FinalContext: map[string]any{}, CompletedAt: now, FailureReason: &f}
	body, err := json.Marshal(c)
	if err != nil {
		return err
	}
	_, err = d.store.AppendHistory(ctx, []store.HistoryEvent{{ExecutionID: x.ID, DedupeKey: completionKey(x.ID), Completion: c, Body: body, ReceivedAt: now}})
	if err == nil {
		d.commits.notify()
	}
	return err
}

func cancelFailure() message.Failure {
	return message.Failure{Error: message.Error{Code: engine.CodeCancelled, Message: "cancelled through the API"}}
}

// halt halts a running execution whose cancel was requested. An execution
// claimed but not yet dispatched is unknown to the coordinator until its
// first messages go out: the halt is then retried in the background until
// it takes, the execution ends, or the dispatch lease (after which the
// dispatcher sees the cancel itself) has passed.
func (s *Server) halt(ctx context.Context, x *store.Execution) error {
	err := s.cfg.Engine.Halt(ctx, x.ID, cancelFailure())
	if !errors.Is(err, engine.ErrEnded) {
		return err
	}
	if x.DispatchedAt != nil {
		return nil // ended already; its completion is on its way
	}
	go func() {
		deadline := time.Now().Add(s.cfg.Dispatch.Lease + 5*time.Second)
		ctx := context.WithoutCancel(ctx)
		for time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
			err := s.cfg.Engine.Halt(ctx, x.ID, cancelFailure())
			if err == nil {
				return
			}
			if !errors.Is(err, engine.ErrEnded) {
				s.log.Warn("cancel: halt failed", "execution", x.ID, "err", err)
				return
			}
			if cur, err := s.store.GetExecution(ctx, x.ID); err != nil || store.Final(cur.Status) {
				return
			}
		}
	}()
	return nil
}

// defCache keeps compiled workflow versions: versions are immutable.
type defCache struct {
	store  store.Store
	engine *engine.Engine
	mu     sync.Mutex
	m      map[string]*engine.Workflow
}

func (c *defCache) get(ctx context.Context, id string, version int) (*engine.Workflow, error) {
	key := id + "@" + strconv.Itoa(version)
	c.mu.Lock()
	wf := c.m[key]
	c.mu.Unlock()
	if wf != nil {
		return wf, nil
	}
	stored, err := c.store.GetWorkflow(ctx, id, version)
	if err != nil {
		return nil, fmt.Errorf("workflow %s version %d: %w", id, version, err)
	}
	wf, err = c.engine.Compile(stored.Definition)
	if err != nil {
		return nil, fmt.Errorf("workflow %s version %d: %w", id, version, err)
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) > 1000 {
		c.m = map[string]*engine.Workflow{}
	}
	c.m[key] = wf
	c.mu.Unlock()
	return wf, nil
}
