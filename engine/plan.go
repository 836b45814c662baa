package engine

import (
	"context"
	"time"

	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/workflow"
)

// The plan phase: a record becomes effects (statuses, successors, barrier
// timeouts, a branch's end, a halt), and pure successors run in the hop.

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

// plan works out into f the effects of rec (and of the pure nodes fused
// after it).
func (s *step) plan(ctx context.Context, rec *record, f *effects) error {
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
	return s.fuse(ctx, rec, f)
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
	if retry.Again(rec.Retryable, s.m.Attempt) {
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
	var packed map[string]any // next as successors carry it (packs.go)
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
		if packed == nil {
			var err error
			if packed, err = s.pack(ctx, next); err != nil {
				return err
			}
		}
		f.next = append(f.next, s.successor(from, e, packed, stack, from.ID+"/"+e.ID))
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
