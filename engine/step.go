package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"time"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/node"

	"github.com/rune-org/rune/redact"
	"github.com/rune-org/rune/workflow"
)

// step handles one message.
type step struct {
	e    *Engine
	wf   *Workflow
	m    *message.NodeExecution
	node *workflow.Node
	sink Sink
	// resumedAt is set when a wait node's timer came due: the node succeeds
	// without running again.
	resumedAt time.Time
	// items are a split's elements when it has just run (nil on replay,
	// when they are evaluated again: expressions are pure).
	items []any
	// uncounted is set for barrier timeouts, which the live count never
	// included (see HandleTimeout).
	uncounted bool
	// unchecked is set while a message run without Begin awaits its
	// Finish's verdict (coord.Finish.Optimistic).
	unchecked bool
	// running is set while a pure node that skipped Begin awaits its
	// Finish's verdict: its running status, reported only if the verdict is
	// Run.
	running *message.NodeStatus
	// secrets are the credential values this step's node resolved: they
	// are redacted from everything it produces (see stepSecrets).
	secrets redact.Set
	// ref is the definition reference the messages this step produces
	// carry ("": they carry the definition inline, as m does).
	ref string
	// replaying is set when rec comes from the store: fused nodes are
	// replayed from it, not run.
	replaying bool
	// d is what the runtime knows of the message's delivery.
	d Delivery
	// trace is the traceparent the messages this step reports carry:
	// d.Trace, then that of the last node a fused hop ran.
	trace string
}

// record is what Finish stores for a message, so that a redelivery publishes
// the same effects without running the node again.
type record struct {
	Output     any            `json:"output,omitempty"`
	Route      []string       `json:"route"`
	Err        *message.Error `json:"error,omitempty"`
	Retryable  bool           `json:"retryable,omitempty"`
	StartedAt  time.Time      `json:"started_at"`
	FinishedAt time.Time      `json:"finished_at"`
	DurationMS int64          `json:"duration_ms"`
	// Arrival marks an aggregator or merge arrival: replaying it arrives
	// again, which barriers make idempotent per slot.
	Arrival bool `json:"arrival,omitempty"`
	// Noop marks a barrier timeout that found its barrier already closed.
	Noop bool `json:"noop,omitempty"`
	// Fused are the results of the nodes run in this message's hop after
	// its own (see fuse), in order.
	Fused []fusedRecord `json:"fused,omitempty"`
}

func (s *step) handle(ctx context.Context) error {
	if s.optimistic() {
		// A pure node runs before asking the coordinator whether to: its
		// Finish makes Begin's checks, one round trip per node instead of
		// two. Its running status waits for the verdict (the node takes
		// microseconds), so a message that must not run never reports one.
		now := s.e.cfg.Now()
		s.unchecked = true
		s.running = s.status(message.StatusRunning, now)
		rec, err := s.run(ctx, now)
		if err != nil {
			return err
		}
		return s.finish(ctx, rec)
	}
	if s.eager() {
		// A first copy's first delivery: no earlier delivery of it ran, so
		// Begin could only say Drop (a halt landed while it was queued),
		// which its Finish says too, after the node ran. Its running
		// status goes out as a Begin's would: the node may take long.
		s.unchecked = true
		s.sink.Status(ctx, s.status(message.StatusRunning, s.e.cfg.Now()))
		rec, err := s.run(ctx, s.e.cfg.Now())
		if err != nil {
			return err
		}
		return s.finish(ctx, rec)
	}
	b, err := s.e.cfg.Coord.Begin(ctx, s.m.ExecutionID, s.m.MessageID)
	if err != nil {
		return fmt.Errorf("engine: begin message %s: %w", s.m.MessageID, err)
	}
	switch b.State {
	case coord.Drop:
		return s.drop(ctx)
	case coord.Replay:
		return s.replay(ctx, b.Record)
	}
	now := s.e.cfg.Now()
	if !s.resumedAt.IsZero() {
		return s.finish(ctx, &record{Output: map[string]any{ResumeAt: s.resumedAt.UTC().Format(time.RFC3339Nano)}, StartedAt: now, FinishedAt: now})
	}
	if isBarrier(s.node.Type) {
		return s.finish(ctx, &record{Arrival: true, StartedAt: now, FinishedAt: now})
	}
	s.sink.Status(ctx, s.status(message.StatusRunning, now))
	// The node's clock starts after the running status is out: publishing
	// may block (RabbitMQ's flow control), and a wait's time counts from
	// its start, so a blocked publish would end short waits before they
	// suspend.
	rec, err := s.run(ctx, s.e.cfg.Now())
	if err != nil {
		return err
	}
	if rec.Err == nil && isWait(s.node.Type) {
		if due, err := ResumeTime(rec.Output); err == nil && due.After(s.e.cfg.Now()) {
			return s.suspend(ctx, due)
		}
	}
	return s.finish(ctx, rec)
}

// wakeParked wakes the suspended branches of the execution this message
// halted: they resume now and are dropped, so the halted completion comes
// when the last running branch ends, not when the last timer would have.
// A redelivery wakes them again, which changes nothing.
func (s *step) wakeParked(ctx context.Context) error {
	if s.e.cfg.Timers == nil {
		return nil
	}
	ids, err := s.e.cfg.Coord.Parked(ctx, s.m.ExecutionID)
	if err == nil && len(ids) > 0 {
		err = s.e.cfg.Timers.Wake(ctx, s.e.cfg.Now(), ids...)
	}
	if err != nil {
		return fmt.Errorf("engine: wake the waiting branches of halted execution %s: %w", s.m.ExecutionID, err)
	}
	return nil
}

// optimistic says whether the message may run without Begin: its node does
// no I/O, so running it again on a redelivery repeats nothing, and it ends
// in a Finish (a wait suspends instead; a resumed wait, an arrival at a
// barrier and a barrier timeout have paths of their own).
func (s *step) optimistic() bool {
	if !s.resumedAt.IsZero() || s.uncounted || isWait(s.node.Type) {
		return false
	}
	_, pure := s.wf.runners[s.node.ID].(node.Pure)
	return pure
}

// eager says whether the message may run without Begin although its node
// is not pure: the node allows it (node.Eager) and the message is a first
// copy on its first delivery (Delivery.First).
func (s *step) eager() bool {
	if !s.resumedAt.IsZero() || s.uncounted || isWait(s.node.Type) || isBarrier(s.node.Type) {
		return false
	}
	_, eager := s.wf.runners[s.node.ID].(node.Eager)
	return eager && s.d.firstCopy()
}

// replay publishes again the effects of a message that finished before,
// from the record its Finish stored.
func (s *step) replay(ctx context.Context, raw []byte) error {
	var rec record
	if err := json.Unmarshal(raw, &rec); err != nil {
		return invalidf("message %s: stored record is unreadable: %v", s.m.MessageID, err)
	}
	s.items = nil // evaluated again, from the stored record
	s.replaying = true
	return s.finish(ctx, &rec)
}

// suspend freezes the message in the timer store until due and reports the
// node waiting. It does not Finish the message: the branch stays live, and
// the scheduler's Resume finishes it (RFC 006 §5.1).
func (s *step) suspend(ctx context.Context, due time.Time) error {
	if s.e.cfg.Timers == nil {
		return s.finish(ctx, &record{StartedAt: s.e.cfg.Now(), FinishedAt: s.e.cfg.Now(),
			Err: &message.Error{Code: "UNSUPPORTED_NODE", Message: fmt.Sprintf("node %q waits, but this runtime has no timer store", s.node.ID)}})
	}
	frozen, err := s.e.Freeze(ctx, s.m)
	if err != nil {
		return fmt.Errorf("engine: freeze message %s: %w", s.m.MessageID, err)
	}
	id := TimerID(s.m)
	if err := s.e.cfg.Timers.Schedule(ctx, id, due, frozen); err != nil {
		return fmt.Errorf("engine: schedule timer of message %s: %w", s.m.MessageID, err)
	}
	// Parked, a halt wakes it (see wakeParked); halted already, it wakes
	// now, to be dropped rather than hold the completion until due.
	wake, err := s.e.cfg.Coord.Park(ctx, s.m.ExecutionID, id, due)
	if err != nil {
		return fmt.Errorf("engine: park message %s: %w", s.m.MessageID, err)
	}
	if wake {
		if err := s.e.cfg.Timers.Wake(ctx, s.e.cfg.Now(), id); err != nil {
			return fmt.Errorf("engine: wake timer of message %s: %w", s.m.MessageID, err)
		}
	}
	st := s.status(message.StatusWaiting, s.e.cfg.Now())
	st.ResumeAt = &due
	s.sink.Status(ctx, st)
	return nil
}

// run executes the node once. It returns an error only when ctx is done: a
// shutdown is never reported as a node failure.
func (s *step) run(ctx context.Context, now time.Time) (*record, error) {
	rec := &record{StartedAt: now}
	runner := s.wf.runners[s.node.ID]
	if runner == nil {
		rec.Err = &message.Error{Code: "UNSUPPORTED_NODE", Message: fmt.Sprintf("node type %q is not supported by this runtime", s.node.Type)}
		return rec, nil
	}
	timeout := s.node.TimeoutDuration()
	if timeout <= 0 {
		timeout = s.e.cfg.DefaultNodeTimeout
	}
	var res node.Result
	var err error
	if _, pure := runner.(node.Pure); pure {
		res, err = s.call(ctx, runner, now)
	} else {
		rctx, cancel := context.WithTimeout(ctx, timeout)
		res, err = s.call(rctx, runner, now)
		cancel()
	}
	rec.FinishedAt = s.e.cfg.Now()
	rec.DurationMS = rec.FinishedAt.Sub(now).Milliseconds()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	defer s.redactRecord(rec)
	var ie *infraError
	if errors.As(err, &ie) || errors.Is(err, ErrInvalid) {
		return nil, err // the runtime failed, not the node
	}
	if err == nil {
		rec.Output, rec.Route = res.Output, res.Route
		s.items = res.Items
		return rec, nil
	}
	var ne *node.Error
	switch {
	case errors.As(err, &ne):
		rec.Err = &message.Error{Code: ne.Code, Message: ne.Message, Details: ne.Details}
		rec.Retryable = ne.Retryable
	case errors.Is(err, context.DeadlineExceeded):
		rec.Err = &message.Error{Code: "NODE_TIMEOUT", Message: fmt.Sprintf("node %q did not finish within %s", s.node.ID, timeout)}
		rec.Retryable = true
	default:
		rec.Err = &message.Error{Code: "NODE_ERROR", Message: err.Error()}
	}
	return rec, nil
}

// call runs the node, turning a panic into a failure of that node alone.
func (s *step) call(ctx context.Context, r node.Runner, now time.Time) (res node.Result, err error) {
	return s.callWith(ctx, s.node, r, now, s.m.AccumulatedContext)
}

// callWith runs r, the runner of n, on context acc.
func (s *step) callWith(ctx context.Context, n *workflow.Node, r node.Runner, now time.Time, acc map[string]any) (res node.Result, err error) {
	acc, err = s.e.resolve(ctx, s.m.ExecutionID, acc, s.wf.mentions(n.ID))
	var ie *infraError
	if errors.As(err, &ie) {
		return node.Result{}, err
	}
	if err != nil {
		return node.Result{}, &node.Error{Code: "CONTEXT_REFERENCE", Message: err.Error()}
	}
	defer func() {
		if p := recover(); p != nil {
			text := s.secrets.String(fmt.Sprint(p))
			s.log().Error("node panicked", "panic", text, "stack", string(debug.Stack()))
			err = &node.Error{Code: "NODE_PANIC", Message: fmt.Sprintf("node %q panicked: %s", s.node.ID, text)}
		}
	}()
	in := &node.Input{
		Env:            s.env(acc, now),
		NodeID:         s.node.ID,
		ExecutionID:    s.m.ExecutionID,
		Attempt:        s.m.Attempt,
		IdempotencyKey: s.idempotencyKey(),
		Now:            now,
		Logger:         s.log(),
	}
	if s.e.cfg.Secrets != nil {
		in.Secrets = stepSecrets{s}
		if _, pure := r.(node.Pure); !pure {
			// What the node logs passes through the same redaction.
			in.Logger = slog.New(s.secrets.Handler(in.Logger.Handler()))
		}
	}
	return r.Run(ctx, in)
}

// env is the expression environment of the node: the accumulated context plus
// $node, $execution and $now.
func (s *step) env(acc map[string]any, now time.Time) map[string]any {
	if !s.wf.usesNodeMap && !s.wf.usesExecution && !s.wf.usesNow {
		return acc // nothing to add: runners never modify Env
	}
	env := make(map[string]any, len(acc)+3)
	for k, v := range acc {
		env[k] = v
	}
	if s.wf.usesNodeMap {
		nodes := make(map[string]any, len(acc))
		for k, v := range acc {
			if len(k) > 1 {
				nodes[k[1:]] = v
			}
		}
		env["$node"] = nodes
	}
	if s.wf.usesExecution {
		env["$execution"] = map[string]any{
			"id":          s.m.ExecutionID,
			"workflow_id": s.m.WorkflowID,
			"started_at":  s.m.StartedAt.UTC().Format(time.RFC3339Nano),
			"attempt":     s.m.Attempt,
		}
	}
	if s.wf.usesNow {
		env["$now"] = now.UTC().Format(time.RFC3339Nano)
	}
	return env
}

// idempotencyKey is the same for every attempt and redelivery of this node on
// this branch.
func (s *step) idempotencyKey() string {
	k := s.m.ExecutionID + "/" + s.node.ID
	for _, f := range s.m.LineageStack {
		k += fmt.Sprintf("/%s.%d", f.SplitNodeID, f.ItemIndex)
	}
	return childID(k, "")
}

// effects accumulates what one message leads to, before it is committed.
type effects struct {
	statuses []*message.NodeStatus
	next     []*message.NodeExecution
	delay    time.Duration // held-back time of next (a retry)
	timeouts []*message.Timeout
	end      map[string]any
	halt     *message.Failure
}

// hold is how long the execution must be kept for what f holds back: its
// successors' delay (a retry's backoff) and the deadlines of the barrier
// timeouts it arms (coord.Finish.Hold); zero when nothing is held back.
func (f *effects) hold(now time.Time) time.Time {
	var h time.Time
	if f.delay > 0 && len(f.next) > 0 {
		h = now.Add(f.delay)
	}
	for _, t := range f.timeouts {
		if t.Deadline.After(h) {
			h = t.Deadline
		}
	}
	return h
}

func (f *effects) endWith(ctx map[string]any) {
	if f.end == nil {
		f.end = ctx
		return
	}
	for k, v := range ctx { // two branches ended here (a fired barrier's and ours)
		f.end[k] = v
	}
}

// outcome turns a node's result into effects: routing on success, retry or
// the error strategy on failure.
func (s *step) outcome(ctx context.Context, rec *record, f *effects) error {
	at := rec.FinishedAt
	stack := s.m.LineageStack
	if rec.Err == nil {
		st := s.status(message.StatusSuccess, at)
		st.Output = rec.Output
		st.DurationMS = rec.DurationMS
		f.statuses = append(f.statuses, st)
		next := s.extend("$"+s.node.ID, rec.Output)
		if v, ok := s.wf.runners[s.node.ID].(node.Vars); ok {
			st.Var = v.VarName()
			next = withVar(next, st.Var, rec.Output)
		}
		if s.node.Type == "split" {
			// Every branch carries the context: big values go by reference.
			next, err := s.externalize(ctx, next)
			if err != nil {
				return err
			}
			return s.split(ctx, f, next)
		}
		next, err := s.externalize(ctx, next, "$"+s.node.ID)
		if err != nil {
			return err
		}
		return s.follow(ctx, f, s.node, s.successEdges(s.node, rec.Route), next, stack)
	}
	retry := s.node.RetrySettings()
	if rec.Retryable && s.m.Attempt < retry.MaxAttempts {
		f.delay = retry.Backoff(s.m.Attempt)
		next := at.Add(f.delay)
		st := s.status(message.StatusRetrying, at)
		st.Error = rec.Err
		st.DurationMS = rec.DurationMS
		st.NextAttemptAt = &next
		f.statuses = append(f.statuses, st)
		again := *s.m
		again.MessageID = childID(s.m.MessageID, "retry")
		again.Attempt = s.m.Attempt + 1
		f.next = append(f.next, &again)
		return nil
	}
	st := s.status(message.StatusFailed, at)
	st.Error = rec.Err
	st.DurationMS = rec.DurationMS
	f.statuses = append(f.statuses, st)
	errObj := map[string]any{
		"node_id": s.node.ID,
		"message": rec.Err.Message,
		"code":    rec.Err.Code,
		"details": rec.Err.Details,
	}
	next := s.extend("$error", errObj)
	switch s.node.Strategy() {
	case workflow.ErrorIgnore:
		var edges []string
		var routing []string
		if r, ok := s.wf.runners[s.node.ID].(node.Router); ok {
			routing = r.RoutingEdges()
		}
		for _, id := range s.successEdges(s.node, nil) {
			if !contains(routing, id) {
				edges = append(edges, id)
			}
		}
		return s.follow(ctx, f, s.node, edges, next, stack)
	case workflow.ErrorBranch:
		return s.follow(ctx, f, s.node, []string{s.node.ErrorEdge()}, next, stack)
	}
	if len(stack) > 0 && s.wf.aggregatorOf[stack[len(stack)-1].SplitNodeID] != "" {
		// Inside a split, halt ends only this branch: it contributes its
		// error to the aggregator and the other items go on (RFC 004 §6.2).
		return s.endBranch(ctx, f, next, stack, slot{S: slotFailed, V: map[string]any{"error": errObj}})
	}
	f.halt = &message.Failure{NodeID: s.node.ID, Error: *rec.Err}
	f.end = next
	return nil
}

// follow sends ctx along edges of node from (which may be a barrier node
// fired by this message rather than the message's own node), tells merges
// on paths not taken that their parent will not come, and ends the branch
// when no edge is followed.
func (s *step) follow(ctx context.Context, f *effects, from *workflow.Node, edges []string, next map[string]any, stack []message.Frame) error {
	for _, id := range edges {
		e, ok := s.wf.Graph.Edge(id)
		if !ok {
			continue // Validate guarantees routing names real edges
		}
		if agg := s.closingAggregator(e, stack); agg != nil {
			// Arrive here rather than through a message: half the hops
			// of a fan-out, the same arrival the aggregator would make.
			if err := s.itemArrival(ctx, f, agg, from.ID, next, stack); err != nil {
				return err
			}
			continue
		}
		f.next = append(f.next, s.successor(from, e, next, stack, from.ID+"/"+e.ID))
	}
	for _, e := range s.wf.Graph.Outgoing(from.ID) {
		if contains(edges, e.ID) {
			continue
		}
		for _, d := range s.wf.dead[e.ID] {
			if err := s.skip(ctx, f, d, next, stack); err != nil {
				return err
			}
		}
	}
	if len(edges) == 0 {
		return s.endBranch(ctx, f, next, stack, slot{S: slotSkipped})
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// successor is the message that runs e.Dst after from.
func (s *step) successor(from *workflow.Node, e workflow.Edge, next map[string]any, stack []message.Frame, suffix string) *message.NodeExecution {
	m := &message.NodeExecution{
		MessageID:          childID(s.m.MessageID, suffix),
		WorkflowID:         s.m.WorkflowID,
		ExecutionID:        s.m.ExecutionID,
		CurrentNode:        e.Dst,
		FromNode:           from.ID,
		Attempt:            1,
		StartedAt:          s.m.StartedAt,
		AccumulatedContext: next,
		LineageStack:       stack,
	}
	definitionOf(m, s.m, s.ref)
	return m
}

// successEdges are the edges a success of n follows: its chosen route, or
// every outgoing edge but the error edge.
func (s *step) successEdges(n *workflow.Node, route []string) []string {
	if route != nil {
		return route
	}
	errEdge := n.ErrorEdge()
	out := s.wf.Graph.Outgoing(n.ID)
	ids := make([]string, 0, len(out))
	for _, e := range out {
		if e.ID != errEdge {
			ids = append(ids, e.ID)
		}
	}
	return ids
}

// extend returns a copy of the message's context with key set: contexts are
// shared between messages and never modified in place.
func (s *step) extend(key string, v any) map[string]any {
	return with(s.m.AccumulatedContext, key, v)
}

func with(base map[string]any, key string, v any) map[string]any {
	ctx := make(map[string]any, len(base)+1)
	for k, old := range base {
		ctx[k] = old
	}
	ctx[key] = v
	return ctx
}

// MarshalBinary encodes the record for coordinators that store it.
func (r *record) MarshalBinary() ([]byte, error) { return json.Marshal(r) }

// finish works out the effects of rec, records them with the coordinator,
// then reports them.
func (s *step) finish(ctx context.Context, rec *record) error {
	rec = s.jsonOutput(rec)
	f := &effects{}
	var err error
	switch {
	case rec.Noop:
	case rec.Arrival:
		err = s.arrive(ctx, f)
	default:
		err = s.outcome(ctx, rec, f)
	}
	if err != nil {
		return err
	}
	if err := s.fuse(ctx, rec, f); err != nil {
		return err
	}
	return s.commit(ctx, rec, f)
}

// jsonOutput returns rec, or when its output is not JSON (which cannot
// travel) the node's failure saying so.
func (s *step) jsonOutput(rec *record) *record {
	if err := checkJSON(rec.Output, 0); err != nil {
		return &record{StartedAt: rec.StartedAt, FinishedAt: rec.FinishedAt, DurationMS: rec.DurationMS,
			Err: &message.Error{Code: "OUTPUT_NOT_JSON", Message: fmt.Sprintf("node %q produced output that is not JSON: %v", s.node.ID, err)}}
	}
	return rec
}

// commit records the message as finished, then reports its effects.
func (s *step) commit(ctx context.Context, rec *record, f *effects) error {
	spawned := len(f.next)
	if s.uncounted {
		// The live count never included this message: finishing it must not
		// remove it (see HandleTimeout).
		spawned++
	}
	fin := coord.Finish{Spawned: spawned, Record: rec, End: f.end, Halt: f.halt, Optimistic: s.unchecked, Hold: f.hold(s.e.cfg.Now())}
	early, finished, err := s.statusesFirst(ctx, f, fin)
	if err != nil || early == done {
		return err
	}
	var out coord.Outcome
	if finished != nil {
		out = *finished
	} else if out, err = s.e.cfg.Coord.Finish(ctx, s.m.ExecutionID, s.m.MessageID, fin); err != nil {
		return s.finishFailed(err)
	}
	running := s.running
	s.running, s.unchecked = nil, false
	switch out.Verdict {
	case coord.Replay:
		return s.replay(ctx, out.Record)
	case coord.Drop:
		return s.drop(ctx)
	}
	if out.Duplicate && out.Published {
		// The execution ended and its completion is out: every successor
		// was delivered (it finished), and the completer's statuses went
		// out with the completion. Only a non-completer's own statuses may
		// never have been published.
		if !out.Last && early == none {
			for _, st := range f.statuses {
				s.sink.Status(ctx, st)
			}
		}
		return nil
	}
	if f.halt != nil {
		if err := s.wakeParked(ctx); err != nil {
			return err
		}
	}
	s.observe(rec, f, out)
	if early == none {
		if running != nil {
			s.sink.Status(ctx, running)
		}
		for _, st := range f.statuses {
			s.sink.Status(ctx, st)
		}
	}
	// This Finish recorded the message (not a duplicate, not a replay):
	// no other handling publishes these successors but as replays.
	first := !out.Duplicate && !s.replaying
	for _, n := range f.next {
		s.sink.Execute(n, Publish{Delay: f.delay, First: first, Trace: s.trace})
	}
	now := s.e.cfg.Now()
	for _, t := range f.timeouts {
		s.sink.Timeout(t, Publish{Delay: max(0, t.Deadline.Sub(now)), Trace: s.trace})
	}
	at := rec.FinishedAt
	if out.Duplicate && out.Last {
		// Another delivery of this message finished it first (they ran at
		// once): report its completion time, so both completions are equal.
		if b, err := s.e.cfg.Coord.Begin(ctx, s.m.ExecutionID, s.m.MessageID); err == nil && b.State == coord.Replay {
			var first record
			if json.Unmarshal(b.Record, &first) == nil {
				at = first.FinishedAt
			}
		}
		published := func() bool { // Finish again: a duplicate changes nothing
			o, err := s.e.cfg.Coord.Finish(ctx, s.m.ExecutionID, s.m.MessageID, coord.Finish{Record: rec})
			return err == nil && o.Published
		}
		if s.e.completionRouted(ctx, s.m.ExecutionID, at, published) {
			return nil
		}
		// The one window left (docs/dsl.md, "Delivery and idempotency"):
		// the first delivery may have published the completion without
		// living to record it. Logged, so that a fault test can tell these
		// copies from a bug.
		s.e.log.Info(RepublishLog, "execution_id", s.m.ExecutionID, "message_id", s.m.MessageID)
	}
	s.complete(ctx, out, at)
	return nil
}

// finishFailed is what commit returns when Coord.Finish failed with err.
func (s *step) finishFailed(err error) error {
	if !errors.Is(err, coord.ErrUnknownExecution) {
		return fmt.Errorf("engine: finish message %s: %w", s.m.MessageID, err)
	}
	if s.uncounted {
		// A barrier's timeout outlives its execution when the barrier
		// completed in time: nothing is waiting for it.
		s.log().Debug("dropping the timeout of an ended execution")
		return nil
	}
	// Nothing Rune published leads here (a forged message, or one kept
	// past its execution's retention): dead-lettered, with the reason.
	return invalidf("message %s: execution %q is unknown, expired or has ended", s.m.MessageID, s.m.ExecutionID)
}

// receiptHold is how long after the first delivery finished a redelivered
// completer waits before it asks the broker whether the first completion
// is out: a publisher that is alive but slow has then published it.
const receiptHold = time.Second

// completionRouted reports whether exec's completion, first published
// around finished by a delivery that did not live to record it, is out
// after all: recorded as published meanwhile (published), or found in the
// broker (Config.CompletionRouted), which it then records as Completed
// would have.
func (e *Engine) completionRouted(ctx context.Context, exec string, finished time.Time, published func() bool) bool {
	if e.cfg.CompletionRouted == nil {
		return false
	}
	if wait := receiptHold - e.cfg.Now().Sub(finished); wait > 0 {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
	}
	if published() {
		e.log.Debug("completion recorded as published while this redelivery waited", "execution_id", exec)
		return true
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	routed, err := e.cfg.CompletionRouted(rctx, exec)
	if err != nil {
		e.log.Warn("could not ask the broker whether the completion is out; publishing it again", "execution_id", exec, "err", err)
		return false
	}
	if !routed {
		return false
	}
	e.log.Info(RoutedLog, "execution_id", exec)
	e.Completed(ctx, &message.Completion{ExecutionID: exec})
	return true
}

// RoutedLog is what the engine logs when a redelivered completer finds the
// first completion in the broker and publishes none.
const RoutedLog = "completion not recorded as published, but the broker took it: not publishing it again"

// statusTiming says what statusesFirst did.
type statusTiming int

const (
	none     statusTiming = iota // nothing: the statuses go out after Finish
	reported                     // the statuses are out and safe
	done                         // the message was handled another way (Drop, Replay)
)

// statusesFirst publishes f's statuses before the message's Finish when
// the message spawns nothing and is not the execution's last. Such a Finish
// may be the one that lets another branch's message end the execution:
// were the statuses published after it, that completion could reach
// followers before them (a follower stops reading at the completion and
// would miss them). A message that spawns successors cannot be overtaken
// so: the execution lives on at least until they finish, and they are
// published after its statuses.
//
// It asks first for a Finish that records the message only if it is the
// last live one (coord.Finish.IfLast), which makes Begin's checks too. When
// it is (the end of every linear chain), no other message can complete the
// execution: statusesFirst returns that Outcome, and the statuses go out
// after it with the completion, in one publish, in order. When it is not,
// nothing was recorded and the statuses are published and confirmed
// first, as above.
func (s *step) statusesFirst(ctx context.Context, f *effects, fin coord.Finish) (statusTiming, *coord.Outcome, error) {
	if fin.Spawned > 0 || len(f.statuses) == 0 {
		return none, nil, nil
	}
	// A message run without Begin asks in place of its Begin, at no cost.
	// One that had its Begin pays a round trip to ask, unless it ends a
	// branch of a split, which is seldom the last.
	if s.unchecked || len(s.m.LineageStack) == 0 {
		fin.IfLast = true
		out, err := s.e.cfg.Coord.Finish(ctx, s.m.ExecutionID, s.m.MessageID, fin)
		if err != nil {
			return done, nil, s.finishFailed(err)
		}
		if !out.NotLast {
			return none, &out, nil
		}
	}
	if s.unchecked && s.running != nil {
		s.sink.Status(ctx, s.running)
	}
	for _, st := range f.statuses {
		s.sink.Status(ctx, st)
	}
	if err := s.sink.Sync(ctx); err != nil {
		return done, nil, fmt.Errorf("engine: publish the statuses of message %s: %w", s.m.MessageID, err)
	}
	return reported, nil, nil
}

// RepublishLog is what the engine logs when it publishes an execution's
// completion again because no record says the first was published.
const RepublishLog = "completion not recorded as published: publishing it again, identical"

// maxDepth bounds the nesting of a node's output.
const maxDepth = 64

// checkJSON reports why v is not a JSON value: a type JSON cannot hold, a
// NaN or infinity, or nesting deeper than maxDepth. It walks v without
// encoding it, which keeps the embedded runtime free of encoding.
func checkJSON(v any, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("nested deeper than %d levels", maxDepth)
	}
	switch x := v.(type) {
	case nil, bool, string, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, json.Number:
		return nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("number %v", x)
		}
	case float32:
		return checkJSON(float64(x), depth)
	case []any:
		for i, e := range x {
			if err := checkJSON(e, depth+1); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
	case map[string]any:
		for k, e := range x {
			if err := checkJSON(e, depth+1); err != nil {
				return fmt.Errorf(".%s: %w", k, err)
			}
		}
	default:
		if _, err := json.Marshal(v); err != nil {
			return err
		}
	}
	return nil
}

// drop closes the accounting of a message whose execution was halted.
func (s *step) drop(ctx context.Context) error {
	now := s.e.cfg.Now()
	return s.commit(ctx, &record{Noop: true, StartedAt: now, FinishedAt: now},
		&effects{statuses: []*message.NodeStatus{s.status(message.StatusSkipped, now)}})
}

// complete reports the completion when out says this message ended the
// execution. at is when the message finished, from its record, so that a
// redelivery reports the very same completion.
func (s *step) complete(ctx context.Context, out coord.Outcome, at time.Time) {
	if !out.Last {
		return
	}
	if final, err := s.e.resolve(ctx, s.m.ExecutionID, out.FinalContext, nil); err == nil {
		out.FinalContext = final
	} else {
		s.log().Warn("final context keeps references it could not resolve", "err", err)
	}
	c := &message.Completion{
		WorkflowID:      s.m.WorkflowID,
		ExecutionID:     s.m.ExecutionID,
		Status:          completionStatus(out),
		FinalContext:    out.FinalContext,
		CompletedAt:     at.UTC(),
		TotalDurationMS: at.Sub(s.m.StartedAt).Milliseconds(),
		FailureReason:   out.Failure,
	}
	if c.FinalContext == nil {
		c.FinalContext = map[string]any{}
	}
	s.sink.Complete(c)
}

// completionStatus is the status of the completion out reports. The
// coordinators say only whether the execution was halted; the halt's
// failure says why: a halt from outside (Halt: a cancel) names no node and
// completes halted, while a node's failure under the halt strategy (retries
// exhausted or not retryable, an aggregator or merge timeout, a start that
// could not be published) names its node and completes failed, as RFC 001
// §9.1 and seed 003 §4.3 have it.
func completionStatus(out coord.Outcome) string {
	switch {
	case out.Status == "":
		return message.CompletionCompleted
	case out.Status == message.CompletionHalted && out.Failure != nil && out.Failure.NodeID != "":
		return message.CompletionFailed
	}
	return out.Status
}

func (s *step) status(st string, at time.Time) *message.NodeStatus {
	return &message.NodeStatus{
		WorkflowID:   s.m.WorkflowID,
		ExecutionID:  s.m.ExecutionID,
		NodeID:       s.node.ID,
		Status:       st,
		ExecutedAt:   at.UTC(),
		Attempt:      s.m.Attempt,
		LineageStack: s.m.LineageStack,
	}
}

// childID derives a message id from its parent's id: the same parent and
// suffix always give the same id, so redelivered work is recognised. The
// hash resists chosen collisions (unlike FNV): a message id alone names a
// timer across all executions (TimerID), and callers may choose execution
// ids.
func childID(parent, suffix string) string {
	h := sha256.New()
	h.Write([]byte(parent))
	h.Write([]byte{0})
	h.Write([]byte(suffix))
	var b [sha256.Size]byte
	return hex.EncodeToString(h.Sum(b[:0])[:16])
}
