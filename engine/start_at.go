package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/rune-org/rune/coord"

	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/tracing"
)

// Re-running an execution from a node (issue 34): a new execution that
// begins at that node, with the context it saw, instead of at the trigger.
// The nodes before it do not run again.

// StartNodeError says why an execution cannot start at a node; Node names it.
type StartNodeError struct {
	Node   string
	Reason string
}

func (e *StartNodeError) Error() string { return fmt.Sprintf("from_node %q: %s", e.Node, e.Reason) }

// CheckStartAt says why an execution of wf cannot start at node from (a
// *StartNodeError), or nil. It may start at any node outside a split's
// branches that is not the trigger, an aggregator or a merge, and from
// which every merge it leads to can hear from all its parents:
//   - a node inside a split's branches ran once per item, with the item in
//     its context: the re-run starts at the split instead (the whole
//     split runs again);
//   - an aggregator or merge joins branches that would not come;
//   - so would a merge downstream with a parent the re-run never reaches.
func (wf *Workflow) CheckStartAt(from string) error {
	n, ok := wf.Graph.Node(from)
	switch {
	case from == "":
		return &StartNodeError{Node: from, Reason: "required"}
	case !ok:
		return &StartNodeError{Node: from, Reason: fmt.Sprintf("is not a node of workflow %q", wf.Def.ID)}
	case n.Trigger:
		return &StartNodeError{Node: from, Reason: "is the trigger: re-run the whole execution instead (no from_node)"}
	case isBarrier(n.Type):
		return &StartNodeError{Node: from, Reason: fmt.Sprintf("is %s %s, which joins branches that a re-run from it would not have: re-run from a node before it", article(n.Type), n.Type)}
	}
	if split := wf.splitAround(from); split != "" {
		return &StartNodeError{Node: from, Reason: fmt.Sprintf("runs inside the branches of split %q (once per item): re-run from %q to run the whole split again", split, split)}
	}
	reach := wf.reachable(from)
	for id := range reach {
		m, _ := wf.Graph.Node(id)
		if m.Type != "merge" {
			continue
		}
		for _, p := range wf.parents[id] {
			if p != from && !reach[p] {
				return &StartNodeError{Node: from, Reason: fmt.Sprintf("leads to merge %q, whose parent %q a re-run from it never reaches (the merge would wait for it): re-run from a node before both", id, p)}
			}
		}
	}
	return nil
}

func article(typ string) string {
	if typ == "aggregator" {
		return "an"
	}
	return "a"
}

// reachable returns the nodes reachable from id by any edge (id itself only
// when a cycle leads back to it).
func (wf *Workflow) reachable(id string) map[string]bool {
	seen := map[string]bool{}
	queue := []string{id}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, e := range wf.Graph.Outgoing(cur) {
			if !seen[e.Dst] {
				seen[e.Dst] = true
				queue = append(queue, e.Dst)
			}
		}
	}
	return seen
}

// splitAround returns the split whose item branches node id runs in ("" when
// it runs outside every split): id is reachable from the split without
// passing its aggregator.
func (wf *Workflow) splitAround(id string) string {
	for i := range wf.Def.Nodes {
		s := &wf.Def.Nodes[i]
		if s.Type != "split" || s.ID == id {
			continue
		}
		agg := wf.aggregatorOf[s.ID]
		seen := map[string]bool{}
		queue := []string{s.ID}
		for len(queue) > 0 {
			cur := queue[0]
			queue = queue[1:]
			for _, e := range wf.Graph.Outgoing(cur) {
				if e.Dst == agg || seen[e.Dst] {
					continue
				}
				if e.Dst == id {
					return s.ID
				}
				seen[e.Dst] = true
				queue = append(queue, e.Dst)
			}
		}
	}
	return ""
}

// Upstream returns the ids of the nodes with a path to node from (the
// trigger among them): the nodes whose outputs its context may hold.
func (wf *Workflow) Upstream(from string) []string {
	seen := map[string]bool{}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, e := range wf.Graph.Incoming(cur) {
			if !seen[e.Src] {
				seen[e.Src] = true
				queue = append(queue, e.Src)
			}
		}
	}
	ids := make([]string, 0, len(seen))
	for id := range seen {
		if id != from {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// ContextAt rebuilds the context node from saw in a run, from that run's
// trigger payload and the outputs its upstream nodes recorded (by node id;
// nodes that did not succeed are absent): "$trigger", "$<node id>" and
// "$vars", as the engine accumulates them.
func (wf *Workflow) ContextAt(from string, input any, outputs map[string]any) map[string]any {
	acc := map[string]any{"$trigger": input}
	vars := wf.VarNames()
	for _, id := range wf.Upstream(from) {
		n, _ := wf.Graph.Node(id)
		out, ok := outputs[id]
		if n.Trigger || !ok {
			continue
		}
		acc["$"+id] = out
		if name, ok := vars[id]; ok {
			acc = withVar(acc, name, out)
		}
	}
	return acc
}

// StartAt begins execution execID of wf at node from, with acc as its
// accumulated context (a re-run from a node; CheckStartAt says which nodes
// may be). It registers the execution with the coordinator, reports the
// trigger's success (with acc's "$trigger") and one first message to from.
// Like Start, it may be called again for the same execution: the message id
// is the same, and the coordinator's Start changes nothing the second time.
func (e *Engine) StartAt(ctx context.Context, wf *Workflow, execID, from string, acc map[string]any, sink Sink) error {
	if err := wf.CheckStartAt(from); err != nil {
		return fmt.Errorf("%w: execution %s: %w", ErrInvalid, execID, err)
	}
	if err := message.CheckValue("context", acc); err != nil {
		return fmt.Errorf("%w: execution %s: %w", ErrInvalid, execID, err)
	}
	trig := wf.Graph.Trigger()
	if trig == nil {
		return invalidf("workflow %q has no trigger", wf.Def.ID)
	}
	first := &message.NodeExecution{WorkflowDefinition: wf.Raw}
	ref, err := e.refFor(ctx, wf, first)
	if err != nil {
		return err
	}
	if err := e.cfg.Coord.Start(ctx, execID, 1); err != nil {
		return fmt.Errorf("engine: start execution %s: %w", execID, err)
	}
	now := e.cfg.Now().UTC()
	if acc == nil {
		acc = map[string]any{}
	}
	sink.Status(ctx, &message.NodeStatus{
		WorkflowID: wf.Def.ID, ExecutionID: execID, NodeID: trig.ID,
		Status: message.StatusSuccess, Output: acc["$trigger"], ExecutedAt: now, Attempt: 1,
	})
	// FromNode is the node's first way in: only merges read it, and a
	// re-run never starts at one.
	fromNode := trig.ID
	if in := wf.Graph.Incoming(from); len(in) > 0 {
		fromNode = in[0].Src
	}
	m := &message.NodeExecution{
		MessageID:          childID(execID, "rerun:"+from),
		WorkflowID:         wf.Def.ID,
		ExecutionID:        execID,
		CurrentNode:        from,
		FromNode:           fromNode,
		Attempt:            1,
		StartedAt:          now,
		AccumulatedContext: acc,
	}
	definitionOf(m, first, ref)
	sink.Execute(m, Publish{Trace: tracing.ExecutionTraceparent(ctx, execID)})
	return nil
}

// AbortStartAt is AbortStart for an execution begun by StartAt at node from.
func (e *Engine) AbortStartAt(ctx context.Context, wf *Workflow, execID, from string, cause error) error {
	trig := wf.Graph.Trigger()
	if trig == nil {
		return nil
	}
	now := e.cfg.Now()
	halt := &message.Failure{NodeID: trig.ID, Error: message.Error{Code: "START_FAILED",
		Message: "the execution's first message could not be published: " + cause.Error()}}
	_, err := e.cfg.Coord.Finish(ctx, execID, childID(execID, "rerun:"+from), coord.Finish{
		Record: &record{Noop: true, StartedAt: now, FinishedAt: now}, Halt: halt,
	})
	if err != nil && !errors.Is(err, coord.ErrUnknownExecution) {
		return fmt.Errorf("engine: abort the start of execution %s: %w", execID, err)
	}
	return nil
}
