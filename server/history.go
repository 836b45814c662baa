package server

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/workflow"
)

// Defaults of HistoryConfig.
const (
	HistoryBatchDefault   = 500
	HistoryWindowDefault  = 20 * time.Millisecond
	HistoryHoldMaxDefault = 5 * time.Second
	historyConsumerFactor = 2
)

// HistoryConfig configures the history consumer. Every field has the
// default its comment states.
type HistoryConfig struct {
	// Batch is how many statuses and completions one store write takes at
	// most. Defaults to HistoryBatchDefault.
	Batch int
	// Window is how long the history consumer gathers a batch after its
	// first event. Defaults to HistoryWindowDefault.
	Window time.Duration
	// HoldMax is how long the history consumer holds a completion back
	// while statuses of the nodes in its final context are missing (they
	// travel on another queue, and under load arrive after it), so that an
	// execution shows completed only with its node runs recorded. Past it
	// the completion is recorded anyway (a status that expired or was
	// purged never comes). Defaults to HistoryHoldMaxDefault.
	HoldMax time.Duration
}

func (c HistoryConfig) withDefaults() HistoryConfig {
	c.Batch = cmp.Or(c.Batch, HistoryBatchDefault)
	c.Window = cmp.Or(c.Window, HistoryWindowDefault)
	c.HoldMax = cmp.Or(c.HoldMax, HistoryHoldMaxDefault)
	return c
}

func (c HistoryConfig) validate() error {
	if c.Batch < 0 {
		return fmt.Errorf("server: Config.History.Batch is %d, want positive", c.Batch)
	}
	return nil
}

// historyConsumer consumes statuses and completions into the store (Run).
type historyConsumer struct {
	cfg    HistoryConfig
	store  store.Store
	broker broker.Broker
	// engine compiles a definition to learn which of its nodes name a
	// variable (node.Vars).
	engine *engine.Engine
	log    *slog.Logger
	// commits is told of every commit, for the live streams.
	commits *commits
	vars    varCache
	// children starts child executions and delivers their ends after
	// each commit (children.go, issue 34); nil: none.
	children *children
}

func newHistoryConsumer(cfg HistoryConfig, st store.Store, b broker.Broker, e *engine.Engine, log *slog.Logger, c *commits) *historyConsumer {
	return &historyConsumer{cfg: cfg, store: st, broker: b, engine: e, log: log, commits: c}
}

// pendingEvent is one delivery waiting for its batch's commit.
type pendingEvent struct {
	ev   store.HistoryEvent
	done chan error
}

// historyWriters is how many writers commit history at once, each the
// executions whose id hashes to it: a writer waits on its store's round
// trips and commit, and others gather and commit meanwhile (on SQLite they
// take the one write connection in turn, gathering while they wait). One
// execution's events all go through one writer, in the order they came.
const historyWriters = 4

// Run consumes statuses and completions into the store until ctx
// is done. Each delivery's handler waits for the commit of the batch that
// holds it, so a message is acked only once it is persisted; batches of up
// to Batch events, or what arrived within Window, make one
// store write.
func (s *historyConsumer) Run(ctx context.Context) error {
	ins := make([]chan pendingEvent, historyWriters)
	wctx, stopWriter := context.WithCancel(ctx)
	defer stopWriter()
	var wg sync.WaitGroup
	for i := range ins {
		ins[i] = make(chan pendingEvent, s.cfg.Batch)
		wg.Go(func() { s.historyWriter(wctx, ins[i]) })
	}
	// Enough handlers in flight to fill every writer's batch while the
	// last one commits.
	opts := broker.ConsumeOptions{Concurrency: s.cfg.Batch * historyConsumerFactor * historyWriters / 2,
		Prefetch: s.cfg.Batch * historyConsumerFactor * historyWriters}
	handler := func(ctx context.Context, d *broker.Delivery) error {
		// A statuses message (one per hop) is one event per status, in
		// order; the delivery is acked once all are persisted.
		parts := broker.Unbatch(d.Message)
		ps := make([]pendingEvent, len(parts))
		for i, m := range parts {
			ev, err := historyEvent(m)
			if err != nil {
				return fmt.Errorf("%w: %v", broker.ErrReject, err)
			}
			ps[i] = pendingEvent{ev: ev, done: make(chan error, 1)}
		}
		for _, p := range ps {
			select {
			case ins[writerOf(p.ev.ExecutionID)] <- p:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		var first error
		for _, p := range ps {
			select {
			case err := <-p.done:
				if first == nil {
					first = err
				}
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return first
	}
	// One consumer failing stops the other: Run then reports it.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 2)
	for _, topic := range []broker.Topic{broker.Status, broker.Completion} {
		wg.Go(func() {
			err := s.broker.Consume(cctx, topic, opts, handler)
			if err != nil {
				err = fmt.Errorf("consume %s: %w", topic, err)
			}
			errs <- err
			cancel()
		})
	}
	first := <-errs
	second := <-errs
	cancel()
	stopWriter()
	wg.Wait()
	if first != nil {
		return first
	}
	return second
}

// writerOf is the writer of an execution's events (FNV-1a of its id).
func writerOf(execID string) int {
	h := uint32(2166136261)
	for i := 0; i < len(execID); i++ {
		h = (h ^ uint32(execID[i])) * 16777619
	}
	return int(h % historyWriters)
}

// heldEvent is a completion the writer holds back (historyWriter).
type heldEvent struct {
	p        pendingEvent
	due      time.Time // when to look again
	deadline time.Time // recorded then, whatever is missing
	// ask is when to look in the store next, and wait how long to wait
	// after that look: the store is asked only for nodes this writer has
	// not seen end, and seldom (each look was a NodeRuns query).
	ask  time.Time
	wait time.Duration
	// found are nodes whose end the store had.
	found map[string]bool
}

// historyWriter gathers pending events into batches and commits them.
// Completions are held back at least one window and go last in their batch:
// the statuses a worker publishes with a completion travel on another queue
// and usually arrive just after it, and a stream reads best with the
// completion after them. A completion is held longer, up to HoldMax,
// while a node of its final context has no recorded end (completeRuns): an
// execution that shows completed has its node runs. Held completions do not
// count against a batch's size: under load thousands may wait for their
// statuses, and the statuses must still come in full batches.
func (s *historyConsumer) historyWriter(ctx context.Context, in <-chan pendingEvent) {
	var held []*heldEvent
	ended := endedNodes{}
	batch := make([]pendingEvent, 0, s.cfg.Batch)
	add := func(p pendingEvent) {
		if p.ev.Completion != nil {
			now := time.Now()
			// The store is asked first after ten windows: statuses this
			// writer takes usually complete it before.
			held = append(held, &heldEvent{p: p, due: now.Add(s.cfg.Window), deadline: now.Add(s.cfg.HoldMax),
				ask: now.Add(10 * s.cfg.Window), wait: 10 * s.cfg.Window})
			return
		}
		ended.add(p.ev.Status)
		batch = append(batch, p)
	}
	idle := time.NewTimer(time.Hour)
	defer idle.Stop()
	for {
		batch = batch[:0]
		wait := time.Hour
		for _, h := range held {
			wait = min(wait, max(time.Until(h.due), 0))
		}
		idle.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case p := <-in:
			add(p)
		case <-idle.C:
		}
		window := time.NewTimer(s.cfg.Window)
	gather:
		for len(batch) < s.cfg.Batch {
			select {
			case p := <-in:
				add(p)
			case <-window.C:
				break gather
			case <-ctx.Done():
				break gather
			}
		}
		window.Stop()
		now := time.Now()
		kept := held[:0]
		for _, h := range held {
			c := h.p.ev.Completion
			switch {
			case h.due.After(now) || len(batch) >= 2*s.cfg.Batch:
			case now.Before(h.deadline) && !s.completeRuns(ctx, ended, h, now):
				h.due = now.Add(s.cfg.Window)
			default:
				batch = append(batch, h.p)
				delete(ended, c.ExecutionID)
				continue
			}
			kept = append(kept, h)
		}
		clear(held[len(kept):])
		held = kept
		if len(batch) == 0 {
			continue
		}
		err := s.commitHistory(ctx, batch)
		for _, p := range batch {
			p.done <- err
		}
	}
}

// endedNodes is, per execution, the nodes whose end (a status other than
// running, waiting or retrying) this writer has taken, so that a completion
// can tell whether its nodes' statuses came before it without asking the
// store. An execution's entry goes with its completion; executions that
// never complete are bounded by clearing all past endedMax (a completion
// then asks the store).
type endedNodes map[string]map[string]bool

const endedMax = 100_000

// isEnd reports whether a node's status ends its run.
func isEnd(status string) bool {
	return status != message.StatusRunning && status != message.StatusWaiting && status != message.StatusRetrying &&
		status != message.StatusPaused // issue 34
}

func (e endedNodes) add(st *message.NodeStatus) {
	if st == nil || !isEnd(st.Status) {
		return
	}
	nodes := e[st.ExecutionID]
	if nodes == nil {
		if len(e) >= endedMax {
			clear(e)
		}
		nodes = map[string]bool{}
		e[st.ExecutionID] = nodes
	}
	nodes[st.NodeID] = true
}

// completeRuns reports whether every node of h's final context ("$<node
// id>"; the trigger's payload aside) has its end recorded or in the batch
// being gathered: taken by this writer, else (another server's consumer may
// have taken it, or this one restarted) in the store's node runs. The store
// is asked only when h.ask has come, then after twice as long each time (up
// to a second): a held completion costs a map lookup per window, not a
// query. A key that names no node of the definition (a branch's $item)
// needs none.
func (s *historyConsumer) completeRuns(ctx context.Context, ended endedNodes, h *heldEvent, now time.Time) bool {
	c := h.p.ev.Completion
	var missing []string
	for key := range c.FinalContext {
		id, ok := strings.CutPrefix(key, "$")
		if ok && key != "$trigger" && !ended[c.ExecutionID][id] && !h.found[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return true
	}
	if now.Before(h.ask) {
		return false
	}
	h.wait = min(2*h.wait, time.Second) // another server may be recording them
	h.ask = now.Add(h.wait)
	runs, err := s.store.NodeRuns(ctx, c.ExecutionID)
	if err != nil {
		return false
	}
	types := s.vars.nodes(ctx, s, c.ExecutionID).types
	if h.found == nil {
		h.found = map[string]bool{}
	}
	complete := true
	for _, id := range missing {
		if _, isNode := types[id]; !isNode && types != nil {
			h.found[id] = true
			continue
		}
		if slices.ContainsFunc(runs, func(r *store.NodeRun) bool {
			return r.NodeID == id && isEnd(r.Status)
		}) {
			h.found[id] = true
		} else {
			complete = false
		}
	}
	return complete
}

func (s *historyConsumer) commitHistory(ctx context.Context, batch []pendingEvent) error {
	evs := make([]store.HistoryEvent, len(batch))
	for i, p := range batch {
		evs[i] = p.ev
	}
	s.addVars(ctx, evs)
	if _, err := s.store.AppendHistory(ctx, evs); err != nil {
		if ctx.Err() == nil {
			s.log.Warn("history: store write failed; the messages are delivered again", "events", len(evs), "err", err)
		}
		return err
	}
	s.recordSends(ctx, evs) // notifications: sends by provider message id (issue 36)
	s.commits.notify()
	return s.children.afterCommit(ctx, evs) // issue 34
}

// historyEvent turns a delivered message (a status or a completion) into
// the event the store records.
func historyEvent(d broker.Message) (store.HistoryEvent, error) {
	body, err := json.Marshal(d.Body)
	if err != nil {
		return store.HistoryEvent{}, err
	}
	ev := store.HistoryEvent{Body: body, ReceivedAt: time.Now().UTC()}
	switch b := d.Body.(type) {
	case *message.NodeStatus:
		ev.ExecutionID, ev.Status = b.ExecutionID, b
		ev.DedupeKey = statusKey(d.ID, body)
	case *message.Completion:
		ev.ExecutionID, ev.Completion = b.ExecutionID, b
		ev.DedupeKey = completionKey(b.ExecutionID)
	default:
		return store.HistoryEvent{}, fmt.Errorf("history: unexpected %T on %s", d.Body, d.Topic)
	}
	return ev, nil
}

// statusKey is a status's message id, or (statuses carry none) a hash of
// its body: a redelivered status is byte for byte the same.
func statusKey(id string, body []byte) string {
	if id != "" {
		return "status:" + id
	}
	h := sha256.Sum256(body)
	return "status:" + hex.EncodeToString(h[:16])
}

// completionKey is the dedupe key of an execution's completion: there is one
// per execution, and its message id is the execution id.
func completionKey(execID string) string { return "completion:" + execID }

// addVars sets Vars on the success statuses that name a variable
// (message.NodeStatus.Var: the email and sms nodes', seed 003: a user sees
// what a notification step sent), and on a completion for those its final
// context holds: the writer holds a completion until its nodes' statuses
// are recorded, but only for HoldMax, and the vars are whole once
// the execution shows completed even when a status comes later than that.
func (s *historyConsumer) addVars(ctx context.Context, evs []store.HistoryEvent) {
	for i := range evs {
		if c := evs[i].Completion; c != nil {
			evs[i].Vars = s.completionVars(ctx, c)
			continue
		}
		st := evs[i].Status
		if st == nil || st.Status != message.StatusSuccess || st.Var == "" {
			continue
		}
		if out, err := json.Marshal(st.Output); err == nil {
			evs[i].Vars = map[string]json.RawMessage{st.Var: out}
		}
	}
}

// completionVars is what addVars records from a completion: the outputs,
// in its final context ("$<node id>"), of the nodes that name a variable
// (node.Vars, asked of the compiled definition), which are their success
// outputs, as their statuses carry them. A final context without $vars
// holds none: the engine sets $vars with each of them.
func (s *historyConsumer) completionVars(ctx context.Context, c *message.Completion) map[string]json.RawMessage {
	if _, some := c.FinalContext["$vars"]; !some {
		return nil
	}
	var vars map[string]json.RawMessage
	for id, name := range s.vars.nodes(ctx, s, c.ExecutionID).vars {
		v, inContext := c.FinalContext["$"+id]
		if !inContext {
			continue
		}
		if out, err := json.Marshal(v); err == nil {
			if vars == nil {
				vars = map[string]json.RawMessage{}
			}
			vars[name] = out
		}
	}
	return vars
}

// varCache answers which nodes an execution's definition has.
type varCache struct {
	mu     sync.Mutex
	byExec map[string]execNodes
}

// execNodes are the nodes of an execution's definition.
type execNodes struct {
	types map[string]string // node id → type; nil when the store cannot say
	vars  map[string]string // node id → variable name (node.Vars)
}

// nodes returns the nodes of the execution's definition.
func (c *varCache) nodes(ctx context.Context, s *historyConsumer, execID string) execNodes {
	c.mu.Lock()
	nodes, ok := c.byExec[execID]
	c.mu.Unlock()
	if !ok {
		x, err := s.store.GetExecution(ctx, execID)
		if err != nil {
			return execNodes{}
		}
		wf, err := s.store.GetWorkflow(ctx, x.WorkflowID, x.Version)
		if err != nil {
			return execNodes{}
		}
		nodes.types = nodeTypes(wf.Definition)
		if cw, err := s.engine.Compile(wf.Definition); err == nil {
			nodes.vars = cw.VarNames()
		}
		c.mu.Lock()
		if c.byExec == nil || len(c.byExec) > 10_000 {
			c.byExec = map[string]execNodes{}
		}
		c.byExec[execID] = nodes
		c.mu.Unlock()
	}
	return nodes
}

// nodeTypes maps each node id of a definition to its type.
func nodeTypes(raw json.RawMessage) map[string]string {
	var def workflow.Definition
	if err := json.Unmarshal(raw, &def); err != nil {
		return nil
	}
	out := make(map[string]string, len(def.Nodes))
	for _, n := range def.Nodes {
		out[n.ID] = n.Type
	}
	return out
}
