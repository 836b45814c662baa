package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/node"

	"github.com/rune-org/rune/tracing"
	"github.com/rune-org/rune/workflow"
)

// Fan-out, fan-in and merge (RFC 004, RFC 005). A split opens a barrier for
// its items and pushes a lineage frame on each branch; whatever ends a
// branch inside the split (its aggregator, a node with no successor, an
// untaken conditional side, a halt) arrives at that barrier exactly once per
// item. The arrival that completes the barrier fires the aggregator: it pops
// the frame and continues with the split-time context plus the aggregator's
// output. Merges are barriers over their parents, scoped by lineage.

// slot is what one item contributes to its aggregator, or one parent to a merge.
type slot struct {
	S string `json:"s"`
	V any    `json:"v,omitempty"`
	// From and Ctx, for merges: the parent and the context it arrived with.
	From string         `json:"from,omitempty"`
	Ctx  map[string]any `json:"ctx,omitempty"`
	// By is the message that made the arrival: a redelivery of it arrives
	// with the same By, another path to the same slot does not.
	By string `json:"by"`
	// At is when the arrival was made (Unix milliseconds): the earliest of
	// a barrier's is where its aggregator's or merge's wait began.
	At int64 `json:"at,omitempty"`
}

// lateRepeat reports an arrival at a completed barrier whose item's kept
// value came from another message (a second path to the same item): only
// the message whose value the barrier kept fires the node, and again on its
// redeliveries (same By). Deciding by the kept value rather than by which
// arrival counted the slot matters where the two are not one atomic step:
// with sharded barriers the value is written to its shard before the slot
// is counted, so the path that completes the barrier may find the other
// path's value kept, and that other path's arrival then comes as a
// duplicate; both would fire if the completer fired.
func lateRepeat(arr coord.Arrival, slotIdx int, by string) bool {
	if !arr.Complete || slotIdx >= len(arr.Values) {
		return false
	}
	var stored struct {
		By string `json:"by"`
	}
	return json.Unmarshal(arr.Values[slotIdx], &stored) != nil || stored.By != by
}

// observeWait records how long barrier node n waited, from the earliest
// arrival (Unix milliseconds; 0: none known) to now, when it fires.
func (s *step) observeWait(n *workflow.Node, first int64) {
	if m := s.e.cfg.Metrics; m != nil && first > 0 {
		m.BarrierWait(s.m.WorkflowID, n.Type, s.e.cfg.Now().Sub(time.UnixMilli(first)))
	}
}

// earliest is the earlier of two arrival times (0: none).
func earliest(a, b int64) int64 {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}

const (
	slotOK      = "ok"
	slotFailed  = "failed"
	slotSkipped = "skipped"
)

// deadArrival is what an edge not taken tells: a merge, that parent (the
// last node on the dead path) will not come; or a node with several ways in
// (input), that its way in edge is dead. Such a node is dead when all its
// ways in are, and then tells in turn what its own edges lead to.
type deadArrival struct {
	merge, parent string
	input, edge   string
}

// analyse works out, once per definition, what fan-in needs: the aggregator
// closing each split, the parents of each merge, and for every edge the
// merges that a not-taken edge cuts off. It refuses an aggregator that
// closes no split and a split whose items would reach their aggregator by
// two paths (forkedItems).
func (wf *Workflow) analyse() workflow.Problems {
	g := wf.Graph
	wf.aggregatorOf = map[string]string{}
	wf.parents = map[string][]string{}
	wf.dead = map[string][]deadArrival{}
	closes := map[string]bool{}
	for i := range wf.Def.Nodes {
		n := &wf.Def.Nodes[i]
		switch n.Type {
		case "split":
			if agg := matchAggregator(g, n.ID); agg != "" {
				wf.aggregatorOf[n.ID] = agg
				closes[agg] = true
			}
		case "merge":
			for _, e := range g.Incoming(n.ID) {
				if !contains(wf.parents[n.ID], e.Src) {
					wf.parents[n.ID] = append(wf.parents[n.ID], e.Src)
				}
			}
		}
	}
	var ps workflow.Problems
	for i := range wf.Def.Nodes {
		n := &wf.Def.Nodes[i]
		if n.Type == "aggregator" && !closes[n.ID] {
			ps = append(ps, workflow.Problem{Path: fmt.Sprintf("nodes[%d]", i),
				Message: fmt.Sprintf("aggregator %q closes no split: put it downstream of a split node", n.ID)})
		}
	}
	ps = append(ps, wf.forkedItems()...)
	for _, e := range wf.Def.Edges {
		wf.dead[e.ID] = deadPath(g, e, map[string]bool{})
	}
	return ps
}

// matchAggregator finds the aggregator that closes split: the first one
// reached downstream with as many aggregators as splits in between.
func matchAggregator(g *workflow.Graph, split string) string {
	type at struct {
		id    string
		depth int
	}
	seen := map[string]bool{}
	queue := []at{}
	for _, e := range g.Outgoing(split) {
		queue = append(queue, at{e.Dst, 0})
	}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		key := cur.id + "#" + strconv.Itoa(cur.depth)
		if seen[key] {
			continue
		}
		seen[key] = true
		n, _ := g.Node(cur.id)
		depth := cur.depth
		switch n.Type {
		case "aggregator":
			if depth == 0 {
				return n.ID
			}
			depth--
		case "split":
			depth++
		}
		for _, e := range g.Outgoing(n.ID) {
			queue = append(queue, at{e.Dst, depth})
		}
	}
	return ""
}

// deadPath follows a not-taken edge to the merges it cuts off. A node with
// one way in is dead with it, and the walk goes on; one with several is
// told which way is dead (when a merge lies beyond it), since the others may
// still be taken. The walk stops at aggregators (their barrier counts ends
// of branches).
func deadPath(g *workflow.Graph, e workflow.Edge, seen map[string]bool) []deadArrival {
	if seen[e.ID] {
		return nil
	}
	seen[e.ID] = true
	n, _ := g.Node(e.Dst)
	switch {
	case n.Type == "merge":
		return []deadArrival{{merge: n.ID, parent: e.Src}}
	case n.Type == "aggregator":
		return nil
	case len(g.Incoming(n.ID)) > 1:
		for _, next := range g.Outgoing(n.ID) {
			if len(deadPath(g, next, map[string]bool{})) > 0 {
				return []deadArrival{{input: n.ID, edge: e.ID}}
			}
		}
		return nil
	}
	var out []deadArrival
	for _, next := range g.Outgoing(n.ID) {
		out = append(out, deadPath(g, next, seen)...)
	}
	return out
}

// branchOf names the branch a lineage stack is on: "" at the top level.
func branchOf(stack []message.Frame) string {
	if len(stack) == 0 {
		return ""
	}
	return stack[len(stack)-1].BranchID
}

// splitKey is the barrier of the split whose frame tops stack.
func splitKey(stack []message.Frame) string {
	top := stack[len(stack)-1]
	return "split:" + branchOf(stack[:len(stack)-1]) + "|" + top.SplitNodeID
}

func mergeKey(stack []message.Frame, merge string) string {
	return "merge:" + branchOf(stack) + "|" + merge
}

func (s *step) barriers() (coord.Barriers, error) {
	if s.e.cfg.Barriers == nil {
		return nil, fmt.Errorf("%w: node %q needs barriers, which this runtime lacks", ErrInvalid, s.node.ID)
	}
	return s.e.cfg.Barriers, nil
}

func (s *step) barrierSpec(n *workflow.Node, total, need int, state []byte) coord.BarrierSpec {
	timeout := time.Duration(barrierTimeout(n) * float64(time.Second))
	// The barrier outlives its timeout, so the timeout finds it.
	return coord.BarrierSpec{Total: total, Need: need, State: state, TTL: timeout + time.Hour}
}

// split fans out: one branch per item and outgoing edge, each with a new
// lineage frame, and the aggregator's barrier and timeout (RFC 004 §4.1).
func (s *step) split(ctx context.Context, f *effects, next map[string]any) error {
	items := s.items
	if items == nil {
		// A replay: evaluate the array again (expressions are pure).
		res, err := s.call(ctx, s.wf.runners[s.node.ID], s.m.StartedAt)
		if err != nil {
			return fmt.Errorf("engine: replay split %q: %w", s.node.ID, err)
		}
		items = res.Items
	}
	stack := s.m.LineageStack
	aggID := s.wf.aggregatorOf[s.node.ID]
	agg, _ := s.wf.Graph.Node(aggID)
	if len(items) == 0 {
		if agg == nil {
			return s.endBranch(ctx, f, next, stack, slot{S: slotSkipped})
		}
		// Nothing to fan out: straight to the aggregator (RFC 004 §6.1).
		return s.fireAggregator(ctx, f, agg, nil, next, stack, false)
	}
	n := len(items)
	parent := branchOf(stack)
	if parent == "" {
		parent = s.m.ExecutionID
	}
	if agg != nil {
		state, err := json.Marshal(next)
		if err != nil {
			return fmt.Errorf("engine: split %q: encode context: %w", s.node.ID, err)
		}
		b, err := s.barriers()
		if err != nil {
			return err
		}
		probe := append(append([]message.Frame(nil), stack...), message.Frame{SplitNodeID: s.node.ID})
		key := splitKey(probe)
		if err := b.Open(ctx, s.m.ExecutionID, key, s.barrierSpec(agg, n, n, state)); err != nil {
			return fmt.Errorf("engine: open barrier of split %q: %w", s.node.ID, err)
		}
		f.timeouts = append(f.timeouts, s.timeout(agg, key, next, stack))
	}
	edges := s.successEdges(s.node, nil)
	f.next = make([]*message.NodeExecution, 0, n*len(edges))
	for i, item := range items {
		bctx := make(map[string]any, len(next)+2)
		for k, v := range next {
			bctx[k] = v
		}
		bctx["$item"] = item
		bctx["$item_index"] = i
		fstack := make([]message.Frame, len(stack)+1)
		copy(fstack, stack)
		fstack[len(stack)] = message.Frame{
			SplitNodeID: s.node.ID,
			BranchID:    parent + "/" + s.node.ID + "_" + strconv.Itoa(i),
			ItemIndex:   i,
			TotalItems:  n,
		}
		for _, id := range edges {
			e, _ := s.wf.Graph.Edge(id)
			f.next = append(f.next, s.successor(s.node, e, bctx, fstack, e.ID+"#"+strconv.Itoa(i)))
		}
	}
	return nil
}

// timeout is the message that fails barrier node n (an aggregator or a
// merge) if its barrier is still open at the deadline (RFC 005 §5). It runs
// n with ctx and stack: the context and lineage n's successors would take.
func (s *step) timeout(n *workflow.Node, key string, ctx map[string]any, stack []message.Frame) *message.Timeout {
	deadline := s.e.cfg.Now().Add(time.Duration(barrierTimeout(n) * float64(time.Second)))
	m := &message.NodeExecution{
		MessageID:          childID(s.m.ExecutionID+"/"+key, "timeout"),
		WorkflowID:         s.m.WorkflowID,
		ExecutionID:        s.m.ExecutionID,
		CurrentNode:        n.ID,
		Attempt:            1,
		StartedAt:          s.m.StartedAt,
		AccumulatedContext: ctx,
		LineageStack:       stack,
	}
	definitionOf(m, s.m, s.ref)
	return &message.Timeout{
		ExecutionID:  s.m.ExecutionID,
		WorkflowID:   s.m.WorkflowID,
		NodeID:       n.ID,
		LineageStack: stack,
		Deadline:     deadline,
		Key:          key,
		Message:      m,
	}
}

// endBranch ends a branch: at the top level its context joins the final
// context; inside a split it arrives at the split's barrier (RFC 004 §5.3).
func (s *step) endBranch(ctx context.Context, f *effects, next map[string]any, stack []message.Frame, v slot) error {
	if len(stack) == 0 {
		f.endWith(next)
		return nil
	}
	top := stack[len(stack)-1]
	agg, ok := s.wf.Graph.Node(s.wf.aggregatorOf[top.SplitNodeID])
	if !ok {
		// A split without aggregator: its branches end on their own and,
		// as with an aggregator (RFC 004 §5.3), nothing of theirs reaches
		// the final context (dsl.md, "split"): it held whichever branch
		// ended last.
		return nil
	}
	return s.arriveAtAggregator(ctx, f, agg, stack, v)
}

// arriveAtAggregator commits one item's contribution and fires the
// aggregator when it was the last.
func (s *step) arriveAtAggregator(ctx context.Context, f *effects, agg *workflow.Node, stack []message.Frame, v slot) error {
	b, err := s.barriers()
	if err != nil {
		return err
	}
	top := stack[len(stack)-1]
	v.By, v.At = s.m.MessageID, s.e.cfg.Now().UnixMilli()
	val, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("engine: encode arrival at %q: %w", agg.ID, err)
	}
	arr, err := b.Arrive(ctx, s.m.ExecutionID, splitKey(stack), s.barrierSpec(agg, top.TotalItems, top.TotalItems, nil), top.ItemIndex, val)
	if errors.Is(err, coord.ErrBarrierClosed) {
		return nil // timed out: late arrivals are ignored
	}
	if err != nil {
		return fmt.Errorf("engine: arrive at aggregator %q: %w", agg.ID, err)
	}
	if lateRepeat(arr, top.ItemIndex, v.By) {
		return nil
	}
	if !arr.Complete {
		// Progress for a bar: about a hundred updates per barrier rather
		// than one per item, which would be a third of a fan-out's traffic.
		if step := max(top.TotalItems/100, 1); arr.Arrived == 1 || arr.Arrived%step == 0 {
			st := s.statusOf(agg, message.StatusWaiting, stack[:len(stack)-1])
			st.Details = map[string]any{"processed": arr.Arrived, "total": top.TotalItems}
			f.statuses = append(f.statuses, st)
		}
		return nil
	}
	var base map[string]any
	if err := json.Unmarshal(arr.State, &base); err != nil {
		return fmt.Errorf("engine: aggregator %q: split-time context unreadable: %w", agg.ID, err)
	}
	return s.fireAggregator(ctx, f, agg, arr.Values, base, stack[:len(stack)-1], !arr.Duplicate)
}

// fireAggregator completes aggregator agg from the items' contributions:
// the context is the split-time context plus its output, on the outer lineage.
func (s *step) fireAggregator(ctx context.Context, f *effects, agg *workflow.Node, values [][]byte, base map[string]any, outer []message.Frame, observe bool) error {
	items := make([]any, len(values))
	var ok, failed, skipped int
	var first int64
	for i, raw := range values {
		var v slot
		if raw == nil || json.Unmarshal(raw, &v) != nil {
			v.S = slotSkipped
		}
		first = earliest(first, v.At)
		switch v.S {
		case slotOK:
			items[i] = v.V
			ok++
		case slotFailed:
			items[i] = v.V
			failed++
		default:
			skipped++
		}
	}
	if observe {
		s.observeWait(agg, first)
	}
	out := map[string]any{"items": items, "total": len(values), "succeeded": ok, "failed": failed, "skipped": skipped}
	st := s.statusOf(agg, message.StatusSuccess, outer)
	st.Output = out
	f.statuses = append(f.statuses, st)
	return s.follow(ctx, f, agg, s.successEdges(agg, nil), with(base, "$"+agg.ID, out), outer)
}

// closingAggregator returns e's destination when it is the aggregator that
// closes the innermost split of stack.
func (s *step) closingAggregator(e workflow.Edge, stack []message.Frame) *workflow.Node {
	if len(stack) == 0 {
		return nil
	}
	id := s.wf.aggregatorOf[stack[len(stack)-1].SplitNodeID]
	if id == "" || id != e.Dst {
		return nil
	}
	agg, _ := s.wf.Graph.Node(id)
	return agg
}

// arrive handles a message at an aggregator or a merge.
func (s *step) arrive(ctx context.Context, f *effects) error {
	if s.node.Type == "merge" {
		return s.arriveAtMerge(ctx, f, s.node, s.m.FromNode, slot{S: slotOK, From: s.m.FromNode, Ctx: s.m.AccumulatedContext}, s.m.AccumulatedContext, s.m.LineageStack)
	}
	stack := s.m.LineageStack
	if len(stack) == 0 {
		now := s.e.cfg.Now()
		return s.outcome(ctx, &record{StartedAt: now, FinishedAt: now, Err: &message.Error{Code: "AGGREGATOR_OUTSIDE_SPLIT",
			Message: fmt.Sprintf("aggregator %q was reached outside any split", s.node.ID)}}, f)
	}
	return s.itemArrival(ctx, f, s.node, s.m.FromNode, s.m.AccumulatedContext, stack)
}

// itemArrival commits one item's contribution to aggregator agg: the value
// expression on acc, or the output of the node that fed it.
func (s *step) itemArrival(ctx context.Context, f *effects, agg *workflow.Node, fromID string, acc map[string]any, stack []message.Frame) error {
	value := acc["$"+fromID]
	if r := s.wf.runners[agg.ID]; r != nil {
		res, err := s.callWith(ctx, agg, r, s.e.cfg.Now(), acc)
		var ie *infraError
		if errors.As(err, &ie) || errors.Is(err, ErrInvalid) {
			return err
		}
		if err != nil {
			// The item's value cannot be computed: it counts as failed.
			e := map[string]any{"node_id": agg.ID, "code": "EXPRESSION", "message": err.Error()}
			var ne *node.Error
			if errors.As(err, &ne) {
				e["code"], e["message"], e["details"] = ne.Code, ne.Message, ne.Details
			}
			return s.arriveAtAggregator(ctx, f, agg, stack, slot{S: slotFailed, V: map[string]any{"error": e}})
		}
		value = res.Output
	}
	return s.arriveAtAggregator(ctx, f, agg, stack, slot{S: slotOK, V: value})
}

// arriveAtMerge commits parent's arrival (or, with a skipped slot, that
// parent's path not being taken) at merge, on the branch of stack.
func (s *step) arriveAtMerge(ctx context.Context, f *effects, merge *workflow.Node, parent string, v slot, fallback map[string]any, stack []message.Frame) error {
	parents := s.wf.parents[merge.ID]
	idx := -1
	for i, p := range parents {
		if p == parent {
			idx = i
		}
	}
	if idx < 0 {
		return invalidf("message %s: merge %q has no parent %q", s.m.MessageID, merge.ID, parent)
	}
	b, err := s.barriers()
	if err != nil {
		return err
	}
	need := len(parents)
	if mergeWaitsForAny(merge) {
		need = 1
	}
	v.By, v.At = s.m.MessageID, s.e.cfg.Now().UnixMilli()
	val, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("engine: encode arrival at %q: %w", merge.ID, err)
	}
	key := mergeKey(stack, merge.ID)
	arr, err := b.Arrive(ctx, s.m.ExecutionID, key, s.barrierSpec(merge, len(parents), need, nil), idx, val)
	if errors.Is(err, coord.ErrBarrierClosed) {
		if v.S == slotOK {
			// Lost the race (wait_for_any) or came after the timeout.
			f.statuses = append(f.statuses, s.statusOf(merge, message.StatusSkipped, stack))
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("engine: arrive at merge %q: %w", merge.ID, err)
	}
	if lateRepeat(arr, idx, v.By) {
		return nil
	}
	if !arr.Complete {
		st := s.statusOf(merge, message.StatusWaiting, stack)
		st.Details = map[string]any{"arrived": arr.Arrived, "expected": len(parents)}
		f.statuses = append(f.statuses, st)
		if arr.Arrived == 1 || arr.Duplicate {
			// The first arrival arms the timeout; a redelivery arms it again
			// in case the first publish was lost. Copies share one message
			// id, so the timeout acts once.
			f.timeouts = append(f.timeouts, s.timeout(merge, key, fallback, stack))
		}
		return nil
	}
	return s.fireMerge(ctx, f, merge, arr.Values, stack, !arr.Duplicate)
}

// skip tells what d names that a path is not taken.
func (s *step) skip(ctx context.Context, f *effects, d deadArrival, next map[string]any, stack []message.Frame) error {
	if d.input != "" {
		return s.skipInput(ctx, f, d, next, stack)
	}
	return s.skipMerge(ctx, f, d, next, stack)
}

// skipInput records that the way in d.edge of node d.input is dead, on the
// branch of stack. The record that makes every way in dead makes the node
// dead: what its edges lead to is told in turn (again on a redelivery:
// merges count each parent once).
func (s *step) skipInput(ctx context.Context, f *effects, d deadArrival, next map[string]any, stack []message.Frame) error {
	in := s.wf.Graph.Incoming(d.input)
	idx := slices.IndexFunc(in, func(e workflow.Edge) bool { return e.ID == d.edge })
	if idx < 0 {
		return invalidf("message %s: node %q has no way in %q", s.m.MessageID, d.input, d.edge)
	}
	b, err := s.barriers()
	if err != nil {
		return err
	}
	key := "dead:" + branchOf(stack) + "|" + d.input
	arr, err := b.Arrive(ctx, s.m.ExecutionID, key, coord.BarrierSpec{Total: len(in), Need: len(in)}, idx, []byte("1"))
	if errors.Is(err, coord.ErrBarrierClosed) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("engine: mark way in %q of node %q not taken: %w", d.edge, d.input, err)
	}
	if !arr.Complete {
		return nil
	}
	for _, e := range s.wf.Graph.Outgoing(d.input) {
		for _, d := range s.wf.dead[e.ID] {
			if err := s.skip(ctx, f, d, next, stack); err != nil {
				return err
			}
		}
	}
	return nil
}

// skipMerge tells merge d that its parent d.parent will not come.
func (s *step) skipMerge(ctx context.Context, f *effects, d deadArrival, next map[string]any, stack []message.Frame) error {
	merge, _ := s.wf.Graph.Node(d.merge)
	if mergeWaitsForAny(merge) {
		return nil // a race is won by an arrival, never by an absence
	}
	return s.arriveAtMerge(ctx, f, merge, d.parent, slot{S: slotSkipped, From: d.parent}, next, stack)
}

// fireMerge completes merge: the context is the union of the parents'
// contexts plus its output (RFC 005 §4.3).
func (s *step) fireMerge(ctx context.Context, f *effects, merge *workflow.Node, values [][]byte, stack []message.Frame, observe bool) error {
	union := map[string]any{}
	items := []any{}
	from := []any{}
	var first int64
	for _, raw := range values {
		var v slot
		if raw == nil || json.Unmarshal(raw, &v) != nil {
			continue
		}
		first = earliest(first, v.At)
		if v.S != slotOK {
			continue
		}
		for k, val := range v.Ctx {
			unionKey(union, k, val)
		}
		key := "$" + v.From
		if p, ok := s.wf.Graph.Node(v.From); ok && p.Trigger {
			key = "$trigger" // the trigger's output is the payload
		}
		items = append(items, v.Ctx[key])
		from = append(from, v.From)
	}
	if len(from) == 0 {
		return nil // every parent's path was not taken: the merge is not reached
	}
	if observe {
		s.observeWait(merge, first)
	}
	out := map[string]any{"items": items, "from": from}
	if mergeWaitsForAny(merge) {
		out["winner"] = from[0]
	}
	union["$"+merge.ID] = out
	st := s.statusOf(merge, message.StatusSuccess, stack)
	st.Output = out
	f.statuses = append(f.statuses, st)
	return s.follow(ctx, f, merge, s.successEdges(merge, nil), union, stack)
}

// statusOf is a status of node n (which may not be the message's node) on stack.
func (s *step) statusOf(n *workflow.Node, st string, stack []message.Frame) *message.NodeStatus {
	out := s.status(st, s.e.cfg.Now())
	out.NodeID = n.ID
	out.LineageStack = stack
	return out
}

// HandleTimeout fires a barrier's deadline: when the barrier of t's merge or
// aggregator is still open, that node fails with TIMEOUT and its error
// strategy applies; late arrivals are then ignored (RFC 005 §5.3).
//
// Timeout messages are not in the execution's live count (they would hold
// its completion back until the deadline), so finishing one adds its
// successors without removing itself. d is as for Handle.
func (e *Engine) HandleTimeout(ctx context.Context, d Delivery, t *message.Timeout, sink Sink) error {
	if err := t.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	m := t.Message
	wf, n, err := e.compiled(ctx, m, "timeout")
	if err != nil {
		return err
	}
	if n == nil || !isBarrier(n.Type) {
		return invalidf("timeout %s: %q is not a merge or aggregator of workflow %q", m.MessageID, m.CurrentNode, wf.Def.ID)
	}
	tracing.NodeType(ctx, n.Type)
	ref, err := e.refFor(ctx, wf, m)
	if err != nil {
		return err
	}
	st := &step{e: e, wf: wf, m: m, node: n, sink: sink, mode: modeTimeout, ref: ref, d: d, trace: d.Trace}
	if err := st.unpack(ctx); err != nil {
		return st.packGone(ctx, err)
	}
	b, err := e.cfg.Coord.Begin(ctx, m.ExecutionID, m.MessageID)
	if err != nil {
		return fmt.Errorf("engine: begin timeout %s: %w", m.MessageID, err)
	}
	switch b.State {
	case coord.Drop:
		return nil // the execution ended or halted
	case coord.Replay:
		rec, err := st.stored(b.Record)
		if err != nil {
			return err
		}
		return st.settle(ctx, rec, unverified{})
	}
	bar, err := st.barriers()
	if err != nil {
		return err
	}
	now := e.cfg.Now()
	open, err := bar.Cancel(ctx, m.ExecutionID, t.Key)
	if err != nil {
		return fmt.Errorf("engine: cancel barrier of %q: %w", n.ID, err)
	}
	if !open {
		return st.settle(ctx, &record{Noop: true, StartedAt: now, FinishedAt: now}, unverified{})
	}
	return st.settle(ctx, &record{StartedAt: now, FinishedAt: now, Err: &message.Error{
		Code:    "TIMEOUT",
		Message: fmt.Sprintf("Timeout exceeded: %s %q did not complete within %gs", n.Type, n.ID, barrierTimeout(n)),
	}}, unverified{})
}
