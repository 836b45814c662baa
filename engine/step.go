package engine

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"runtime/debug"
	"time"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/nodes"
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
}

func (s *step) handle(ctx context.Context) error {
	b, err := s.e.cfg.Coord.Begin(ctx, s.m.ExecutionID, s.m.MessageID)
	if err != nil {
		return fmt.Errorf("engine: begin message %s: %w", s.m.MessageID, err)
	}
	switch b.State {
	case coord.Drop:
		return s.drop(ctx)
	case coord.Replay:
		var rec record
		if err := json.Unmarshal(b.Record, &rec); err != nil {
			return invalidf("message %s: stored record is unreadable: %v", s.m.MessageID, err)
		}
		return s.finish(ctx, &rec)
	}
	now := s.e.cfg.Now()
	if !s.resumedAt.IsZero() {
		return s.finish(ctx, &record{Output: map[string]any{nodes.ResumeAt: s.resumedAt.UTC().Format(time.RFC3339Nano)}, StartedAt: now, FinishedAt: now})
	}
	s.sink.Status(s.status(message.StatusRunning, now))
	rec, err := s.run(ctx, now)
	if err != nil {
		return err
	}
	if rec.Err == nil && isWait(s.node.Type) {
		if due, err := nodes.ResumeTime(rec.Output); err == nil && due.After(s.e.cfg.Now()) {
			return s.suspend(ctx, due)
		}
	}
	return s.finish(ctx, rec)
}

// suspend freezes the message in the timer store until due and reports the
// node waiting. It does not Finish the message: the branch stays live, and
// the scheduler's Resume finishes it (RFC 006 §5.1).
func (s *step) suspend(ctx context.Context, due time.Time) error {
	if s.e.cfg.Timers == nil {
		return s.finish(ctx, &record{StartedAt: s.e.cfg.Now(), FinishedAt: s.e.cfg.Now(),
			Err: &message.Error{Code: "UNSUPPORTED_NODE", Message: fmt.Sprintf("node %q waits, but this runtime has no timer store", s.node.ID)}})
	}
	frozen, err := json.Marshal(s.m)
	if err != nil {
		return fmt.Errorf("engine: freeze message %s: %w", s.m.MessageID, err)
	}
	if err := s.e.cfg.Timers.Schedule(ctx, TimerID(s.m), due, frozen); err != nil {
		return fmt.Errorf("engine: schedule timer of message %s: %w", s.m.MessageID, err)
	}
	st := s.status(message.StatusWaiting, s.e.cfg.Now())
	st.ResumeAt = &due
	s.sink.Status(st)
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
	rctx, cancel := context.WithTimeout(ctx, timeout)
	res, err := s.call(rctx, runner, now)
	cancel()
	rec.FinishedAt = s.e.cfg.Now()
	rec.DurationMS = rec.FinishedAt.Sub(now).Milliseconds()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err == nil {
		rec.Output, rec.Route = res.Output, res.Route
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
	defer func() {
		if p := recover(); p != nil {
			s.e.log.Error("node panicked", "execution_id", s.m.ExecutionID, "node_id", s.node.ID, "panic", p, "stack", string(debug.Stack()))
			err = &node.Error{Code: "NODE_PANIC", Message: fmt.Sprintf("node %q panicked: %v", s.node.ID, p)}
		}
	}()
	return r.Run(ctx, &node.Input{
		Env:            s.env(now),
		NodeID:         s.node.ID,
		ExecutionID:    s.m.ExecutionID,
		Attempt:        s.m.Attempt,
		IdempotencyKey: s.idempotencyKey(),
		Secrets:        s.e.cfg.Secrets,
		Now:            now,
		Logger:         s.e.log,
	})
}

// env is the expression environment of the node: the accumulated context plus
// $node, $execution and $now.
func (s *step) env(now time.Time) map[string]any {
	acc := s.m.AccumulatedContext
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

// plan is what a finished node leads to.
type plan struct {
	status *message.NodeStatus
	next   []*message.NodeExecution
	delay  time.Duration
	end    map[string]any
	halt   *message.Failure
}

func (s *step) plan(rec *record) *plan {
	p := &plan{}
	at := rec.FinishedAt
	if rec.Err == nil {
		p.status = s.status(message.StatusSuccess, at)
		p.status.Output = rec.Output
		p.status.DurationMS = rec.DurationMS
		ctx := s.extend("$"+s.node.ID, rec.Output)
		p.follow(s, s.successEdges(rec.Route), ctx)
		return p
	}
	retry := s.node.RetrySettings()
	if rec.Retryable && s.m.Attempt < retry.MaxAttempts {
		p.delay = retry.Backoff(s.m.Attempt)
		next := at.Add(p.delay)
		p.status = s.status(message.StatusRetrying, at)
		p.status.Error = rec.Err
		p.status.DurationMS = rec.DurationMS
		p.status.NextAttemptAt = &next
		again := *s.m
		again.MessageID = childID(s.m.MessageID, "retry")
		again.Attempt = s.m.Attempt + 1
		p.next = []*message.NodeExecution{&again}
		return p
	}
	p.status = s.status(message.StatusFailed, at)
	p.status.Error = rec.Err
	p.status.DurationMS = rec.DurationMS
	ctx := s.extend("$error", map[string]any{
		"node_id": s.node.ID,
		"message": rec.Err.Message,
		"code":    rec.Err.Code,
		"details": rec.Err.Details,
	})
	switch s.node.Strategy() {
	case workflow.ErrorIgnore:
		p.follow(s, s.successEdges(nil), ctx)
	case workflow.ErrorBranch:
		p.follow(s, []string{s.node.ErrorEdge()}, ctx)
	default:
		p.halt = &message.Failure{NodeID: s.node.ID, Error: *rec.Err}
		p.end = ctx
	}
	return p
}

// follow adds one successor message per edge, or ends the branch when there are none.
func (p *plan) follow(s *step, edges []string, ctx map[string]any) {
	for _, id := range edges {
		e, ok := s.wf.Graph.Edge(id)
		if !ok {
			continue // Validate guarantees routing names real edges
		}
		p.next = append(p.next, &message.NodeExecution{
			MessageID:          childID(s.m.MessageID, e.ID),
			WorkflowID:         s.m.WorkflowID,
			ExecutionID:        s.m.ExecutionID,
			CurrentNode:        e.Dst,
			FromNode:           s.node.ID,
			Attempt:            1,
			StartedAt:          s.m.StartedAt,
			WorkflowDefinition: s.m.WorkflowDefinition,
			AccumulatedContext: ctx,
			LineageStack:       s.m.LineageStack,
		})
	}
	if len(p.next) == 0 {
		p.end = ctx
	}
}

// successEdges are the edges a success follows: the node's chosen route, or
// every outgoing edge but the error edge.
func (s *step) successEdges(route []string) []string {
	if route != nil {
		return route
	}
	errEdge := s.node.ErrorEdge()
	out := s.wf.Graph.Outgoing(s.node.ID)
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
	ctx := make(map[string]any, len(s.m.AccumulatedContext)+1)
	for k, old := range s.m.AccumulatedContext {
		ctx[k] = old
	}
	ctx[key] = v
	return ctx
}

// MarshalBinary encodes the record for coordinators that store it.
func (r *record) MarshalBinary() ([]byte, error) { return json.Marshal(r) }

// finish records the outcome with the coordinator, then reports the effects.
func (s *step) finish(ctx context.Context, rec *record) error {
	if err := checkJSON(rec.Output, 0); err != nil {
		// An output that is not JSON cannot travel; it is the node's failure.
		rec = &record{StartedAt: rec.StartedAt, FinishedAt: rec.FinishedAt, DurationMS: rec.DurationMS,
			Err: &message.Error{Code: "OUTPUT_NOT_JSON", Message: fmt.Sprintf("node %q produced output that is not JSON: %v", s.node.ID, err)}}
	}
	p := s.plan(rec)
	out, err := s.e.cfg.Coord.Finish(ctx, s.m.ExecutionID, s.m.MessageID, coord.Finish{
		Spawned: len(p.next), Record: rec, End: p.end, Halt: p.halt,
	})
	if errors.Is(err, coord.ErrUnknownExecution) {
		s.e.log.Warn("dropping message of an unknown or expired execution", "execution_id", s.m.ExecutionID, "message_id", s.m.MessageID)
		return nil
	}
	if err != nil {
		return fmt.Errorf("engine: finish message %s: %w", s.m.MessageID, err)
	}
	s.sink.Status(p.status)
	for _, n := range p.next {
		s.sink.Execute(n, p.delay)
	}
	s.complete(out)
	return nil
}

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
	out, err := s.e.cfg.Coord.Finish(ctx, s.m.ExecutionID, s.m.MessageID, coord.Finish{})
	if errors.Is(err, coord.ErrUnknownExecution) {
		s.e.log.Warn("dropping message of an unknown or expired execution", "execution_id", s.m.ExecutionID, "message_id", s.m.MessageID)
		return nil
	}
	if err != nil {
		return fmt.Errorf("engine: finish dropped message %s: %w", s.m.MessageID, err)
	}
	s.sink.Status(s.status(message.StatusSkipped, s.e.cfg.Now()))
	s.complete(out)
	return nil
}

func (s *step) complete(out coord.Outcome) {
	if !out.Last {
		return
	}
	now := s.e.cfg.Now()
	c := &message.Completion{
		WorkflowID:      s.m.WorkflowID,
		ExecutionID:     s.m.ExecutionID,
		Status:          out.Status,
		FinalContext:    out.FinalContext,
		CompletedAt:     now.UTC(),
		TotalDurationMS: now.Sub(s.m.StartedAt).Milliseconds(),
		FailureReason:   out.Failure,
	}
	if c.Status == "" {
		c.Status = message.CompletionCompleted
	}
	if c.FinalContext == nil {
		c.FinalContext = map[string]any{}
	}
	s.sink.Complete(c)
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
// suffix always give the same id, so redelivered work is recognised.
func childID(parent, suffix string) string {
	h := fnv.New128a()
	h.Write([]byte(parent))
	h.Write([]byte{0})
	h.Write([]byte(suffix))
	var b [16]byte
	return hex.EncodeToString(h.Sum(b[:0]))
}
