package engine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rune-org/rune/workflow"
)

// An aggregator's barrier has one slot per item: whatever ends an item's
// branch fills it, once. A split with several outgoing edges whose paths do
// not join again at a merge before the aggregator would end each item's
// branch twice: the first end fills the slot, the second is dropped as a
// repeat, and one path's result is lost without a word. forkedItems finds
// such splits when the workflow is compiled, so that `rune validate`
// refuses them (dsl.md, "split"). A node inside the split that forks is
// allowed: the paths share what came before it (dsl.md says which path's
// result the aggregator keeps).
//
// It follows every way a message can go from the split: all successors at
// once for most nodes; one of them (or none) for a conditional, a switch or
// an error edge. It counts, for each way, the ends that reach the split's
// barrier. A merge fires at most once per item's branch, however many paths
// reach it, so paths meeting at a merge count once.

// pathOutcome is one way an item's branch may go: how many of its ends
// reach the barrier (counted up to 2), the merges reached and not yet
// followed, and those already followed. The sets are sorted ids joined by
// "\x00", so that outcomes compare.
type pathOutcome struct {
	ends           int
	pending, fired string
}

// pathBudget bounds the work on one split: past it the split is not
// checked (a workflow that large is far beyond what users write by hand).
const pathBudget = 1 << 16

type pathCounter struct {
	wf    *Workflow
	agg   string
	memo  map[string][]pathOutcome
	maxOf map[string]int
	reach map[string]map[string]bool
	work  int
}

// forkedItems returns a problem for each split whose items can reach its
// aggregator by more than one path at once.
func (wf *Workflow) forkedItems() workflow.Problems {
	var ps workflow.Problems
	for i := range wf.Def.Nodes {
		n := &wf.Def.Nodes[i]
		agg := wf.aggregatorOf[n.ID]
		if n.Type != "split" || agg == "" {
			continue
		}
		pc := &pathCounter{wf: wf, agg: agg, memo: map[string][]pathOutcome{}, maxOf: map[string]int{}, reach: map[string]map[string]bool{}}
		ends := pc.resolve(pc.follow(successIDs(n, wf.Graph)))
		if ends < 2 || pc.work > pathBudget {
			continue
		}
		// A fork further in (a node inside the split with several edges)
		// stays valid: the item's first path to end fills its slot and the
		// others' ends fire nothing (lateRepeat); dsl.md says to join paths
		// whose results differ with a merge. The split's own edges are
		// refused: there nothing is shared before the paths part.
		fork := pc.fork(n.ID)
		if fork != n.ID {
			continue
		}
		edges := successIDs(pc.node(fork), wf.Graph)
		quoted := make([]string, len(edges))
		for j, e := range edges {
			quoted[j] = fmt.Sprintf("%q", e)
		}
		ps = append(ps, workflow.Problem{Path: fmt.Sprintf("nodes[%d]", i), Message: fmt.Sprintf(
			"%s sends each item down %d paths at once (edges %s) that end the item's branch separately, but aggregator %q takes one result per item, so one path's result would be lost: join the paths with a merge before the aggregator, or give %q one outgoing edge",
			fmt.Sprintf("split %q", n.ID), len(edges), strings.Join(quoted, ", "), agg, fork)})
	}
	return ps
}

// successIDs are the ids of n's outgoing edges other than its error edge.
func successIDs(n *workflow.Node, g *workflow.Graph) []string {
	var ids []string
	for _, e := range g.Outgoing(n.ID) {
		if e.ID != n.ErrorEdge() {
			ids = append(ids, e.ID)
		}
	}
	return ids
}

func (pc *pathCounter) node(id string) *workflow.Node {
	n, _ := pc.wf.Graph.Node(id)
	return n
}

// outcomes are the ways a message into node id may go.
func (pc *pathCounter) outcomes(id string) []pathOutcome {
	if o, ok := pc.memo[id]; ok {
		return o
	}
	n := pc.node(id)
	var out []pathOutcome
	switch {
	case id == pc.agg || n.Type == "aggregator":
		out = []pathOutcome{{ends: 1}}
	case n.Type == "merge":
		out = []pathOutcome{{pending: id}}
	case n.Type == "split":
		// A nested split's branches end at its own aggregator, which then
		// goes on once; without one they end apart from this split.
		if inner := pc.wf.aggregatorOf[id]; inner != "" {
			out = pc.follow(successIDs(pc.node(inner), pc.wf.Graph))
		} else {
			out = []pathOutcome{{}}
		}
	case n.Type == "conditional" || n.Type == "switch":
		out = []pathOutcome{{ends: 1}} // no edge taken
		for _, e := range successIDs(n, pc.wf.Graph) {
			out = union(out, pc.follow([]string{e}))
		}
	default:
		out = pc.follow(successIDs(n, pc.wf.Graph))
	}
	if e := n.ErrorEdge(); e != "" && n.Type != "split" {
		out = union(out, pc.follow([]string{e}))
	}
	pc.memo[id] = out
	return out
}

// follow is the outcomes of messages sent along edges at once; none ends
// the branch.
func (pc *pathCounter) follow(edges []string) []pathOutcome {
	acc := []pathOutcome{{}}
	if len(edges) == 0 {
		return []pathOutcome{{ends: 1}}
	}
	for _, id := range edges {
		e, _ := pc.wf.Graph.Edge(id)
		acc = pc.both(acc, pc.outcomes(e.Dst))
	}
	return acc
}

// both combines two sets of ways taken together.
func (pc *pathCounter) both(a, b []pathOutcome) []pathOutcome {
	var out []pathOutcome
	for _, x := range a {
		for _, y := range b {
			pc.work++
			fired := setUnion(x.fired, y.fired)
			o := pathOutcome{ends: min(x.ends+y.ends, 2), pending: setMinus(setUnion(x.pending, y.pending), fired), fired: fired}
			if !slices.Contains(out, o) && pc.work <= pathBudget {
				out = append(out, o)
			}
		}
	}
	return out
}

func union(a, b []pathOutcome) []pathOutcome {
	for _, o := range b {
		if !slices.Contains(a, o) {
			a = append(a, o)
		}
	}
	return a
}

// resolve follows the merges of each outcome, each once, and returns the
// most ends any way has (up to 2).
func (pc *pathCounter) resolve(outs []pathOutcome) int {
	most := 0
	for _, o := range outs {
		most = max(most, pc.resolveOne(o))
		if most >= 2 || pc.work > pathBudget {
			break
		}
	}
	return most
}

func (pc *pathCounter) resolveOne(o pathOutcome) int {
	if o.pending == "" || o.ends >= 2 {
		return o.ends
	}
	// Follow first a merge that no other pending merge leads to: all the
	// paths into it are then known.
	pending := strings.Split(o.pending, "\x00")
	m := pending[0]
	for _, cand := range pending {
		upstream := false
		for _, other := range pending {
			if other != cand && pc.reaches(other, cand) {
				upstream = true
			}
		}
		if !upstream {
			m = cand
			break
		}
	}
	rest := pathOutcome{ends: o.ends, pending: setMinus(o.pending, m), fired: setUnion(o.fired, m)}
	return pc.resolve(pc.both([]pathOutcome{rest}, pc.follow(successIDs(pc.node(m), pc.wf.Graph))))
}

// reaches reports whether a path leads from node from to node to.
func (pc *pathCounter) reaches(from, to string) bool {
	r, ok := pc.reach[from]
	if !ok {
		r = map[string]bool{}
		stack := []string{from}
		for len(stack) > 0 {
			cur := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, e := range pc.wf.Graph.Outgoing(cur) {
				if !r[e.Dst] {
					r[e.Dst] = true
					stack = append(stack, e.Dst)
				}
			}
		}
		pc.reach[from] = r
	}
	return r[to]
}

// most is the most ends a message into node id may make.
func (pc *pathCounter) most(id string) int {
	if v, ok := pc.maxOf[id]; ok {
		return v
	}
	v := pc.resolve(pc.outcomes(id))
	pc.maxOf[id] = v
	return v
}

// fork walks down from split, always to a successor whose message alone
// may end twice, to the node where the paths part: none of its successors
// may end twice on its own.
func (pc *pathCounter) fork(split string) string {
	cur := split
	for {
		from := cur
		if n := pc.node(cur); n.Type == "split" && cur != split && pc.wf.aggregatorOf[cur] != "" {
			from = pc.wf.aggregatorOf[cur] // a nested split goes on from its aggregator
		}
		next := ""
		for _, e := range pc.wf.Graph.Outgoing(from) {
			if e.Dst != pc.agg && pc.most(e.Dst) >= 2 {
				next = e.Dst
				break
			}
		}
		if next == "" {
			return from
		}
		cur = next
	}
}

func setUnion(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "" || a == b:
		return a
	}
	s := append(strings.Split(a, "\x00"), strings.Split(b, "\x00")...)
	slices.Sort(s)
	return strings.Join(slices.Compact(s), "\x00")
}

func setMinus(a, b string) string {
	if a == "" || b == "" {
		return a
	}
	drop := strings.Split(b, "\x00")
	var keep []string
	for _, x := range strings.Split(a, "\x00") {
		if !slices.Contains(drop, x) {
			keep = append(keep, x)
		}
	}
	return strings.Join(keep, "\x00")
}
