package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rune-org/rune/apiv1"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/expr"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/workflow"
)

// Flow control by key (issue 35; docs/dsl.md "Flow control"):
//
//   - priority: set when an execution is created (?priority=, a hook's or
//     schedule's setting, the workflow's settings.priority); the claim takes
//     the highest first.
//   - debounce: decided when an execution is created (CreateFlowExecution).
//   - concurrency: an execution the API or a hook creates due at once
//     takes a free slot of its key in the create's transaction, or, the
//     slots taken (or executions of the key queued), is created queued,
//     held (CreateFlowExecution), so the dispatcher's claim, which takes
//     arrivals in order, never sees a busy key's backlog: the promoter
//     serves keys round-robin from the first turn. Every other
//     execution's slot is decided when the dispatcher first claims it
//     (Admit), whatever made it (a schedule, a re-run, a start_at, a
//     debounce, on_limit drop or cancel_oldest): it holds a slot of its key and is
//     dispatched, or goes back enqueued, held, until the promoter
//     (FlowConfig) gives it a freed slot. A slot is the execution itself,
//     so it frees when the execution ends, however its workers died on
//     the way.

// Defaults of FlowConfig.
const (
	FlowPollDefault   = 100 * time.Millisecond
	FlowKeysDefault   = 100
	flowGaugeInterval = 5 * time.Second
	// CodeConcurrencyLimit ends an execution dropped by on_limit "drop".
	CodeConcurrencyLimit = "CONCURRENCY_LIMIT"
)

// FlowConfig configures the promoter, which gives the slots of ended
// executions to queued ones.
type FlowConfig struct {
	// Poll is the promoter's pause when no history commit of this server
	// woke it. Defaults to FlowPollDefault.
	Poll time.Duration
	// Keys bounds the concurrency keys one round serves (round-robin,
	// least recently served first). Defaults to FlowKeysDefault.
	Keys int
}

func (c FlowConfig) withDefaults() FlowConfig {
	c.Poll = cmp.Or(c.Poll, FlowPollDefault)
	c.Keys = cmp.Or(c.Keys, FlowKeysDefault)
	return c
}

// flowSpec is a workflow version's flow settings, keys compiled.
type flowSpec struct {
	priority    int
	concurrency *workflow.Concurrency
	ckey        expr.Value
	debounce    *workflow.Debounce
	dkey        expr.Value
	period      time.Duration
	maxWait     time.Duration
}

// flow is the server's flow control: the specs of workflow versions, the
// promoter and the queued gauge.
type flow struct {
	cfg     FlowConfig
	fs      store.FlowStore // nil: a store without flow control
	st      store.Store
	engine  *engine.Engine
	log     *slog.Logger
	now     func() time.Time
	compile *expr.Compiler
	defs    *defCache // the dispatcher's compiled versions
	queued  *prometheus.GaugeVec
	// paused, when set, says whether a workflow is paused (issue 35's
	// "paused" reason; the pause feature sets it).
	paused func(ctx context.Context, workflowID string) (bool, error)

	mu    sync.Mutex
	specs map[string]*flowSpec
	// latest caches, per workflow, whether its latest version (read less
	// than a second ago) has settings the create path needs.
	latest map[string]latestSpec
}

type latestSpec struct {
	at    time.Time
	needs bool
}

func newFlow(cfg FlowConfig, st store.Store, raw store.Store, e *engine.Engine, log *slog.Logger, now func() time.Time, reg prometheus.Registerer) *flow {
	f := &flow{cfg: cfg, st: st, engine: e, log: log, now: now, compile: expr.NewCompiler(expr.Limits{}),
		specs: map[string]*flowSpec{}, latest: map[string]latestSpec{}}
	f.fs, _ = raw.(store.FlowStore)
	f.queued = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "rune_server_executions_queued",
		Help: "Executions enqueued (not yet dispatched: due, delayed, debounced or held for a concurrency slot), per workflow."},
		[]string{"workflow"})
	reg.MustRegister(f.queued)
	return f
}

// spec returns the flow settings of a compiled workflow version.
func (f *flow) spec(id string, version int, wf *engine.Workflow) (*flowSpec, error) {
	key := id + "@" + strconv.Itoa(version)
	f.mu.Lock()
	sp := f.specs[key]
	f.mu.Unlock()
	if sp != nil {
		return sp, nil
	}
	sp = &flowSpec{priority: store.PriorityDefault}
	if st := wf.Def.Settings; st != nil {
		if st.Priority != nil {
			sp.priority = *st.Priority
		}
		if c := st.Concurrency; c != nil {
			v, err := f.compile.Value(c.Key)
			if err != nil {
				return nil, fmt.Errorf("settings.concurrency.key: %w", err)
			}
			sp.concurrency, sp.ckey = c, v
		}
		if d := st.Debounce; d != nil {
			v, err := f.compile.Value(d.Key)
			if err != nil {
				return nil, fmt.Errorf("settings.debounce.key: %w", err)
			}
			sp.debounce, sp.dkey = d, v
			sp.period, _ = workflow.ParseDuration(d.Period)
			if d.MaxWait != "" {
				sp.maxWait, _ = workflow.ParseDuration(d.MaxWait)
			}
		}
	}
	f.mu.Lock()
	if len(f.specs) > 1000 {
		f.specs = map[string]*flowSpec{}
	}
	f.specs[key] = sp
	f.mu.Unlock()
	return sp, nil
}

// needsCreate reports whether a create of the version goes through the
// flow path: a debounce, a default priority other than 5, or a
// concurrency limit that queues (a create finding the key full is held at
// once, so the dispatcher's claim, in arrival order, never sees it: the
// promoter's round-robin orders the key's executions from the first turn;
// one finding a free slot takes it at once).
func (sp *flowSpec) needsCreate() bool {
	return sp.debounce != nil || sp.priority != store.PriorityDefault || sp.queues()
}

// queues reports whether the version has a concurrency limit whose
// on_limit is "queue".
func (sp *flowSpec) queues() bool {
	return sp.concurrency != nil && cmp.Or(sp.concurrency.OnLimit, store.OnLimitQueue) == store.OnLimitQueue
}

// specOf returns the flow settings of workflow id's version.
func (f *flow) specOf(ctx context.Context, id string, version int) (*flowSpec, error) {
	wf, err := f.defs.get(ctx, id, version)
	if err != nil {
		return nil, err
	}
	return f.spec(id, version, wf)
}

// key renders a key template over the trigger payload: a string as it is,
// anything else as JSON, null as "".
func (f *flow) key(v expr.Value, input json.RawMessage) (string, error) {
	var trigger any
	if len(input) > 0 {
		if err := json.Unmarshal(input, &trigger); err != nil {
			return "", err
		}
	}
	out, err := v.Eval(map[string]any{"$trigger": trigger})
	if err != nil {
		return "", err
	}
	switch o := out.(type) {
	case nil:
		return "", nil
	case string:
		return o, nil
	}
	b, err := json.Marshal(out)
	return string(b), err
}

// needsCreate reports whether triggers of workflow id's latest version go
// through the flow path (a debounce or a default priority other than 5),
// from a cache of at most a second: a new version's debounce or priority
// applies to triggers through other servers at most a second late (a
// concurrency limit applies at once all the same: the dispatcher's Admit
// decides the slot of an execution created without it).
func (f *flow) needsCreate(ctx context.Context, id string) (bool, error) {
	now := time.Now()
	f.mu.Lock()
	l, ok := f.latest[id]
	f.mu.Unlock()
	if ok && now.Sub(l.at) < time.Second {
		return l.needs, nil
	}
	w, err := f.st.GetWorkflow(ctx, id, 0)
	if err != nil {
		return false, err
	}
	needs := false
	// A version that does not compile here is the dispatcher's to fail
	// (INVALID_WORKFLOW): the plain create path.
	if wf, err := f.engine.Compile(w.Definition); err == nil {
		if sp, err := f.spec(w.ID, w.Version, wf); err == nil {
			needs = sp.needsCreate()
		}
	}
	f.mu.Lock()
	if len(f.latest) > 10000 {
		f.latest = map[string]latestSpec{}
	}
	f.latest[id] = latestSpec{at: now, needs: needs}
	f.mu.Unlock()
	return needs, nil
}

// forget drops what the flow caches of workflow id (a new version).
func (f *flow) forget(id string) {
	f.mu.Lock()
	delete(f.latest, id)
	f.mu.Unlock()
}

// created is createExecution's answer.
type created struct {
	x         *store.Execution
	created   bool
	debounced bool
}

// createExecution enqueues an execution as the store's CreateExecution
// does, with the workflow's debounce and a priority (0: the workflow's
// default). A create that collapses into a debounced execution returns it,
// debounced.
func (s *Server) createExecution(ctx context.Context, in store.ExecutionInput, priority int) (created, error) {
	f := s.flow
	if f.fs == nil {
		x, ok, err := s.store.CreateExecution(ctx, in)
		return created{x: x, created: ok}, err
	}
	needs := priority != 0 && priority != store.PriorityDefault
	switch {
	case needs:
	case in.Version > 0:
		sp, err := f.specOf(ctx, in.WorkflowID, in.Version)
		if err != nil {
			return created{}, err
		}
		needs = sp.needsCreate()
	default:
		var err error
		if needs, err = f.needsCreate(ctx, in.WorkflowID); err != nil {
			return created{}, err
		}
	}
	if !needs {
		x, ok, err := s.store.CreateExecution(ctx, in)
		return created{x: x, created: ok}, err
	}
	w, err := s.store.GetWorkflow(ctx, in.WorkflowID, in.Version)
	if err != nil {
		return created{}, err
	}
	if w.DeletedAt != nil {
		return created{}, fmt.Errorf("workflow %s: %w", in.WorkflowID, store.ErrNotFound)
	}
	in.Version = w.Version
	sp, err := f.specOf(ctx, w.ID, w.Version)
	if err != nil {
		return created{}, err
	}
	fc := store.FlowCreate{Priority: cmp.Or(priority, sp.priority)}
	if sp.debounce != nil {
		k, err := f.key(sp.dkey, in.Input)
		if err != nil {
			return created{}, errorf(http.StatusUnprocessableEntity, CodeInvalidInput,
				"workflow %s: settings.debounce.key: %v", w.ID, err)
		}
		fc.DebounceKey, fc.Period, fc.MaxWait = k, sp.period, sp.maxWait
	}
	if sp.queues() {
		k, err := f.key(sp.ckey, in.Input)
		if err != nil {
			k = "" // as admit does: one key for all such
		}
		fc.ConcurrencyKey, fc.Limit = k, sp.concurrency.Limit
	}
	x, ok, debounced, err := f.fs.CreateFlowExecution(ctx, in, fc)
	return created{x: x, created: ok, debounced: debounced}, err
}

// admit decides the concurrency slot of an execution the dispatcher
// claimed: run reports that it is to be dispatched now.
func (d *dispatcher) admit(ctx context.Context, x *store.Execution, wf *engine.Workflow) (run bool, err error) {
	f := d.flow
	if f == nil || f.fs == nil || wf.Def.Settings == nil || wf.Def.Settings.Concurrency == nil {
		return true, nil
	}
	sp, err := f.spec(x.WorkflowID, x.Version, wf)
	if err != nil {
		return false, err
	}
	key, err := f.key(sp.ckey, x.Input)
	if err != nil {
		// The payload is the same on every claim: one key for all such.
		d.log.Warn("flow: concurrency key does not render; using the empty key", "execution", x.ID, "workflow", x.WorkflowID, "err", err)
		key = ""
	}
	a, err := f.fs.Admit(ctx, x, store.Admission{Key: key, Limit: sp.concurrency.Limit,
		OnLimit: cmp.Or(sp.concurrency.OnLimit, store.OnLimitQueue), Owner: d.owner, Now: d.now()})
	if err != nil {
		return false, err
	}
	if a.Cancel != "" {
		d.cancelDisplaced(ctx, a.Cancel)
	}
	if a.Drop {
		return false, d.endUndispatched(ctx, x, message.CompletionHalted, message.Failure{Error: message.Error{Code: CodeConcurrencyLimit,
			Message: fmt.Sprintf("dropped: concurrency key %q of workflow %s is at its limit of %d", key, x.WorkflowID, sp.concurrency.Limit)}})
	}
	return a.Run, nil
}

// cancelDisplaced cancels the execution on_limit "cancel_oldest" displaced.
func (d *dispatcher) cancelDisplaced(ctx context.Context, id string) {
	x, err := d.store.CancelExecution(ctx, id, d.now())
	if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
		return // ended meanwhile
	}
	if err == nil && x.CancelRequested && !store.Final(x.Status) {
		err = d.engine.Halt(ctx, id, message.Failure{Error: message.Error{Code: engine.CodeCancelled,
			Message: "cancelled: a newer execution of its concurrency key took its place (on_limit cancel_oldest)"}})
		if errors.Is(err, engine.ErrEnded) {
			err = nil // not dispatched yet: the dispatcher ends it on its claim
		}
	}
	if err != nil {
		d.log.Warn("flow: cancel of the oldest execution failed", "execution", id, "err", err)
	}
}

// Run promotes queued executions to freed slots until ctx is done: at once
// after each history commit of this server (completions free slots), else
// every Poll; and refreshes the queued gauge.
func (f *flow) Run(ctx context.Context, commits *commits, wakeDispatcher func()) error {
	if f.fs == nil {
		<-ctx.Done()
		return nil
	}
	wake := make(chan struct{}, 1)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-commits.next():
			}
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}()
	var gaugeAt time.Time
	return rounds(ctx, wake, func(ctx context.Context) time.Duration {
		n, err := f.fs.Promote(ctx, f.now(), f.cfg.Keys)
		if err != nil && ctx.Err() == nil {
			f.log.Warn("flow: promotion failed; retrying", "err", err)
		}
		if n > 0 {
			wakeDispatcher()
		}
		if time.Since(gaugeAt) >= flowGaugeInterval {
			gaugeAt = time.Now()
			f.refreshGauge(ctx)
		}
		return f.cfg.Poll
	})
}

func (f *flow) refreshGauge(ctx context.Context) {
	m, err := f.fs.QueuedByWorkflow(ctx)
	if err != nil {
		if ctx.Err() == nil {
			f.log.Warn("flow: counting queued executions failed", "err", err)
		}
		return
	}
	f.queued.Reset()
	for wf, n := range m {
		f.queued.WithLabelValues(wf).Set(float64(n))
	}
}

// queueState says why enqueued execution x has not started.
func (s *Server) queueState(ctx context.Context, x *store.Execution, v *apiv1.Execution) error {
	f := s.flow
	if f.fs == nil {
		return nil
	}
	st, err := f.fs.FlowState(ctx, x.ID)
	if err != nil {
		return err
	}
	v.Priority = st.Priority
	if x.Status != store.StatusEnqueued {
		return nil
	}
	q := &apiv1.QueueState{Reason: apiv1.QueueDue}
	if st.Limit > 0 {
		q.ConcurrencyKey, q.Limit, q.Running, q.Position = &st.Key, st.Limit, st.Running, st.Position
	}
	now := s.cfg.Now()
	paused := false
	if f.paused != nil {
		if paused, err = f.paused(ctx, x.WorkflowID); err != nil {
			return err
		}
	}
	switch {
	case paused:
		q.Reason = apiv1.QueuePaused
	case st.Queued:
		q.Reason = apiv1.QueueConcurrency
		v.AvailableAt = time.Time{} // held: unset until a slot frees
	case st.Debounced && x.AvailableAt.After(now):
		q.Reason = apiv1.QueueDebounce
		q.DebounceKey = &st.DebounceKey
		at := x.AvailableAt
		q.StartAt = &at
	case x.AvailableAt.After(now):
		q.Reason = apiv1.QueueStartAt
		at := x.AvailableAt
		q.StartAt = &at
	}
	v.Queue = q
	return nil
}

// queryPriority reads ?priority= (1…10; 0 when absent).
func queryPriority(r *http.Request) (int, error) {
	return queryInt(r, "priority", store.PriorityMin, store.PriorityMax)
}

// checkPriority checks a hook's or schedule's priority setting.
func checkPriority(p int) error {
	if p != 0 && (p < store.PriorityMin || p > store.PriorityMax) {
		return fmt.Errorf("priority: %d is out of range: want %d (lowest) to %d (highest)", p, store.PriorityMin, store.PriorityMax)
	}
	return nil
}

// prioritize sets the priority of executions a schedule fired: p, else
// their workflow's settings.priority. The fire's transaction has committed
// them at the default priority, so a dispatcher may take one first: the
// priority orders a backlog, which a just-fired slot is rarely behind.
func (f *flow) prioritize(ctx context.Context, xs []*store.Execution, p int) {
	if f.fs == nil {
		return
	}
	if p == 0 {
		sp, err := f.specOf(ctx, xs[0].WorkflowID, xs[0].Version)
		if err != nil {
			return
		}
		p = sp.priority
	}
	if p == store.PriorityDefault {
		return
	}
	ids := make([]string, len(xs))
	for i, x := range xs {
		ids[i] = x.ID
	}
	if err := f.fs.SetPriority(ctx, ids, p); err != nil {
		f.log.Warn("flow: setting the priority of fired executions failed", "err", err)
	}
}
