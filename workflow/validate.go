package workflow

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/rune-org/rune/internal/suggest"
)

// Limits on the size of a definition Validate accepts. Beyond them it reports
// the excess and checks nothing else.
const (
	MaxNodes = 10_000
	MaxEdges = 100_000
)

// Bounds of retry.max_attempts.
const (
	MinAttempts = 1
	MaxAttempts = 100
)

// Validate checks d and returns Problems listing every problem found, each at
// its JSON path, or nil when d is valid. The structure of the graph is checked
// here; what only a node type knows (its parameters) is checked by types,
// which may be nil to skip that step. Validate runs in time linear in the size
// of d (plus whatever types costs).
func Validate(d *Definition, types NodeChecker) error {
	if d == nil {
		return Problems{{Message: "no workflow definition"}}
	}
	v := validator{d: d}
	v.run(types)
	if len(v.ps) == 0 {
		return nil
	}
	return v.ps
}

type validator struct {
	d  *Definition
	ps Problems

	// byID maps a node id to the index of its first node.
	byID map[string]int
	// edgeByID maps an edge id to the index of its first edge.
	edgeByID map[string]int
	// out maps a src id to the edges leaving it, in definition order.
	out map[string][]Edge
	// succ lists, per node index, the indices of edges leaving it whose
	// both ends exist; edgeDst holds each such edge's dst node index.
	succ    [][]int32
	edgeDst []int32
	// guessed marks the edges with an end taken from guess: they count for
	// reachability (no follow-on problems) but never close a cycle, which
	// would be a problem made by the guess.
	guessed []bool
	// triggers are the indices of nodes with trigger:true.
	triggers []int
	// guess maps an edge end that names no node to the node id it was
	// probably meant to be ("" for none): the edge is checked as if it
	// named that node, so that one typo is one problem, not also the
	// unreachable nodes and unknown edges that would follow from it.
	guess map[string]string
	ids   []string // node ids, for guesses
}

func (v *validator) report(path, format string, args ...any) {
	v.ps = append(v.ps, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

func (v *validator) run(types NodeChecker) {
	d := v.d
	if d.ID == "" {
		v.report("id", "missing workflow id")
	} else if !ValidWorkflowID(d.ID) {
		v.report("id", "%q is not a valid workflow id: want 1 to 64 letters, digits, \"_\" or \"-\"", truncate(d.ID))
	}
	if len(d.Nodes) > MaxNodes {
		v.report("nodes", "%d nodes, over the limit of %d", len(d.Nodes), MaxNodes)
	}
	if len(d.Edges) > MaxEdges {
		v.report("edges", "%d edges, over the limit of %d", len(d.Edges), MaxEdges)
	}
	if len(d.Nodes) > MaxNodes || len(d.Edges) > MaxEdges {
		return
	}

	v.index()
	for i := range d.Nodes {
		v.checkNode(i)
	}
	for i := range d.Edges {
		v.checkEdge(i)
	}
	v.checkTrigger()
	v.checkCycles()
	v.checkReachable()
	v.checkFlow() // flow control (issue 35)
	if types != nil {
		names := newContextNames(d)
		for i := range d.Nodes {
			n := &d.Nodes[i]
			if n.Type == "" {
				continue // already reported; a type checker could only repeat it
			}
			c := NewNodeCheck(n, nodePath(i), v.out[n.ID], &v.ps)
			c.names = names
			types.CheckNode(c)
		}
	}
}

// index builds the lookups the checks share.
func (v *validator) index() {
	d := v.d
	v.byID = make(map[string]int, len(d.Nodes))
	for i := range d.Nodes {
		n := &d.Nodes[i]
		if _, dup := v.byID[n.ID]; !dup {
			v.byID[n.ID] = i
			v.ids = append(v.ids, n.ID)
		}
		if n.Trigger {
			v.triggers = append(v.triggers, i)
		}
	}
	v.out = make(map[string][]Edge)
	v.edgeByID = make(map[string]int, len(d.Edges))
	v.succ = make([][]int32, len(d.Nodes))
	v.edgeDst = make([]int32, len(d.Edges))
	v.guessed = make([]bool, len(d.Edges))
	for i, e := range d.Edges {
		if _, dup := v.edgeByID[e.ID]; !dup {
			v.edgeByID[e.ID] = i
		}
		v.out[v.end(e.Src)] = append(v.out[v.end(e.Src)], e)
		src, okSrc := v.byID[v.end(e.Src)]
		dst, okDst := v.byID[v.end(e.Dst)]
		v.edgeDst[i] = -1
		v.guessed[i] = v.end(e.Src) != e.Src || v.end(e.Dst) != e.Dst
		if okSrc && okDst {
			v.succ[src] = append(v.succ[src], int32(i))
			v.edgeDst[i] = int32(dst)
		}
	}
}

// maxGuesses bounds the guesses of misspelled edge ends: each is a pass
// over the node ids.
const maxGuesses = 100

// end is the node id an edge end names, or the one it was probably meant
// to name when it names none (see guess).
func (v *validator) end(id string) string {
	if _, ok := v.byID[id]; ok || id == "" {
		return id
	}
	g, ok := v.guess[id]
	if !ok && len(v.guess) < maxGuesses {
		if v.guess == nil {
			v.guess = map[string]string{}
		}
		g = suggest.Closest(id, v.ids)
		v.guess[id] = g
	}
	if g == "" {
		return id
	}
	return g
}

// reservedIDs are context names the engine sets itself (dsl.md
// "Expressions and templates"); a node with such an id would hide them.
var reservedIDs = map[string]bool{
	"trigger": true, "item": true, "item_index": true, "error": true,
	"vars": true, "execution": true, "now": true, "node": true,
}

func nodePath(i int) string { return fmt.Sprintf("nodes[%d]", i) }
func edgePath(i int) string { return fmt.Sprintf("edges[%d]", i) }

func (v *validator) checkNode(i int) {
	n := &v.d.Nodes[i]
	p := nodePath(i)
	switch {
	case n.ID == "":
		v.report(p+".id", "missing node id")
	case !ValidNodeID(n.ID):
		v.report(p+".id", "%q is not a valid node id: want a letter or \"_\" followed by up to 63 letters, digits or \"_\"", truncate(n.ID))
	case reservedIDs[n.ID] && !(n.Trigger && n.ID == "trigger"):
		v.report(p+".id", "node id %q is reserved: its output would hide the context name $%s; pick another id", n.ID, n.ID)
	}
	if first := v.byID[n.ID]; first != i && n.ID != "" {
		v.report(p+".id", "duplicate node id %q (first used by %s)", truncate(n.ID), nodePath(first))
	}
	if n.Type == "" {
		v.report(p+".type", "missing node type")
	}
	if n.Trigger && n.Type != "" && n.Type != "trigger" {
		v.report(p+".type", "the trigger node must have type \"trigger\", got %q", truncate(n.Type))
	}
	if !n.Trigger && n.Type == "trigger" {
		v.report(p+".trigger", "a node of type \"trigger\" must have \"trigger\": true")
	}
	if n.Credentials != nil && n.Credentials.Ref == "" {
		v.report(p+".credentials.ref", "missing credential reference")
	}
	v.checkCredentialRefs(p, n.Credentials) // provider failover (issue 36)
	if n.Timeout != "" {
		if t, err := ParseDuration(n.Timeout); err != nil {
			v.report(p+".timeout", "%v", err)
		} else if t == 0 {
			v.report(p+".timeout", "a timeout must be longer than zero; leave it out for none")
		}
	}
	v.checkErrorPolicy(n, p)
	v.checkFlowControl(n, p)
	if r := n.Retry; r != nil {
		if r.MaxAttempts != 0 && (r.MaxAttempts < MinAttempts || r.MaxAttempts > MaxAttempts) {
			v.report(p+".retry.max_attempts", "%s", maxAttemptsProblem(r.MaxAttempts))
		}
		if r.InitialDelay != "" {
			if _, err := ParseDuration(r.InitialDelay); err != nil {
				v.report(p+".retry.initial_delay", "%v", err)
			}
		}
		// NaN fails every comparison, so test for the valid range.
		if r.Multiplier != 0 && !(r.Multiplier >= 1 && !math.IsInf(r.Multiplier, 1)) {
			v.report(p+".retry.multiplier", "%s", multiplierProblem(r.Multiplier))
		}
		if r.On != "" && r.On != RetryAny && r.On != RetryRetryable {
			v.report(p+".retry.on", "unknown value %q: want %q (every failure) or %q (only retryable failures, the default)", truncate(r.On), RetryAny, RetryRetryable)
		}
	}
}

func maxAttemptsProblem(n int) string {
	return fmt.Sprintf("%d is out of range: want %d to %d attempts, the first included (1 = no retry)", n, MinAttempts, MaxAttempts)
}

func multiplierProblem(m float64) string {
	return fmt.Sprintf("%v is out of range: want a finite number of at least 1 (1 = the same wait each time)", m)
}

func (v *validator) checkErrorPolicy(n *Node, p string) {
	ep := n.Error
	if ep == nil {
		return
	}
	switch ep.Type {
	case "", ErrorHalt, ErrorIgnore, ErrorBranch:
	default:
		v.report(p+".error.type", "unknown error strategy %q: want %q, %q or %q", truncate(ep.Type), ErrorHalt, ErrorIgnore, ErrorBranch)
		return // whether error_edge belongs is unclear; don't guess
	}
	switch {
	case ep.Type == ErrorBranch && ep.ErrorEdge == "":
		v.report(p+".error.error_edge", "required when error.type is %q: name the outgoing edge to follow on failure", ErrorBranch)
	case ep.Type == ErrorBranch && !leaves(v.out[n.ID], ep.ErrorEdge):
		v.report(p+".error.error_edge", "edge %q does not leave node %q%s", truncate(ep.ErrorEdge), truncate(n.ID), edgeHint(v.out[n.ID], ep.ErrorEdge))
	case ep.Type != ErrorBranch && ep.ErrorEdge != "":
		v.report(p+".error.error_edge", "set, but an error edge is only followed when error.type is %q (it is %q)", ErrorBranch, n.Strategy())
	}
}

func leaves(out []Edge, id string) bool {
	for _, e := range out {
		if e.ID == id {
			return true
		}
	}
	return false
}

func (v *validator) checkEdge(i int) {
	d := v.d
	e := d.Edges[i]
	p := edgePath(i)
	if e.ID == "" {
		v.report(p+".id", "missing edge id")
	} else if first := v.edgeByID[e.ID]; first != i {
		v.report(p+".id", "duplicate edge id %q (first used by %s)", truncate(e.ID), edgePath(first))
	}
	for _, end := range [2]struct{ field, id string }{{"src", e.Src}, {"dst", e.Dst}} {
		if end.id == "" {
			v.report(p+"."+end.field, "missing")
		} else if _, ok := v.byID[end.id]; !ok {
			if g := v.guess[end.id]; g != "" {
				v.report(p+"."+end.field, "no node %q; did you mean %q?", truncate(end.id), g)
			} else {
				v.report(p+"."+end.field, "no node %q", truncate(end.id))
			}
		}
	}
	if j, ok := v.byID[v.end(e.Dst)]; ok && d.Nodes[j].Trigger {
		v.report(p+".dst", "edge into the trigger node %q: nothing may lead to the trigger", truncate(e.Dst))
	}
}

func (v *validator) checkTrigger() {
	switch len(v.triggers) {
	case 1:
		return
	case 0:
		v.report("nodes", "no trigger node: exactly one node must have \"trigger\": true")
	default:
		const show = 10
		names := make([]string, 0, show+1)
		for k, i := range v.triggers {
			if k == show {
				names = append(names, fmt.Sprintf("and %d more", len(v.triggers)-show))
				break
			}
			names = append(names, fmt.Sprintf("%q (%s)", truncate(v.d.Nodes[i].ID), nodePath(i)))
		}
		v.report("nodes", "%d trigger nodes: %s; exactly one node may have \"trigger\": true", len(v.triggers), strings.Join(names, ", "))
	}
}

// checkReachable reports nodes that no path from the trigger reaches. With no
// single trigger that is meaningless, and already reported.
func (v *validator) checkReachable() {
	if len(v.triggers) != 1 {
		return
	}
	// Edges attach to the first node of an id, even when the trigger is a
	// later duplicate (reported as such).
	start := v.byID[v.d.Nodes[v.triggers[0]].ID]
	seen := make([]bool, len(v.d.Nodes))
	seen[start] = true
	queue := []int32{int32(start)}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		for _, e := range v.succ[u] {
			if w := v.edgeDst[e]; !seen[w] {
				seen[w] = true
				queue = append(queue, w)
			}
		}
	}
	trig := truncate(v.d.Nodes[start].ID)
	for i := range v.d.Nodes {
		// A duplicate id is never the target of an edge; it is reported as a
		// duplicate already.
		if !seen[i] && v.byID[v.d.Nodes[i].ID] == i {
			v.report(nodePath(i), "node %q is not reachable from the trigger %q", truncate(v.d.Nodes[i].ID), trig)
		}
	}
}

// checkCycles reports one cycle per strongly connected component that has
// one, naming its nodes, at the path of the edge that closes it. Tarjan's
// algorithm (iterative, so deep graphs cannot overflow the stack) finds the
// components; a breadth-first search inside each finds a shortest cycle
// through its first node. Both are linear.
func (v *validator) checkCycles() {
	n := len(v.d.Nodes)
	const unvisited = 0
	index := make([]int32, n) // 1-based discovery order
	low := make([]int32, n)
	onStack := make([]bool, n)
	comp := make([]int32, n) // 1-based number of the node's cyclic component, 0 for none
	var stack []int32
	type frame struct {
		v    int32
		next int
	}
	var calls []frame
	var counter, comps int32
	var cyclic [][]int32

	visit := func(w int32) {
		counter++
		index[w], low[w] = counter, counter
		stack = append(stack, w)
		onStack[w] = true
		calls = append(calls, frame{v: w})
	}
	for s := range n {
		if index[s] != unvisited {
			continue
		}
		visit(int32(s))
		for len(calls) > 0 {
			f := &calls[len(calls)-1]
			u := f.v
			if f.next < len(v.succ[u]) {
				e := v.succ[u][f.next]
				f.next++
				if v.guessed[e] {
					continue
				}
				w := v.edgeDst[e]
				if index[w] == unvisited {
					visit(w)
				} else if onStack[w] {
					low[u] = min(low[u], index[w])
				}
				continue
			}
			calls = calls[:len(calls)-1]
			if len(calls) > 0 {
				p := calls[len(calls)-1].v
				low[p] = min(low[p], low[u])
			}
			if low[u] != index[u] {
				continue
			}
			k := len(stack) - 1
			for stack[k] != u {
				k--
			}
			members := stack[k:]
			stack = stack[:k]
			for _, m := range members {
				onStack[m] = false
			}
			if len(members) > 1 || v.selfLoop(u) {
				comps++
				for _, m := range members {
					comp[m] = comps
				}
				cyclic = append(cyclic, append([]int32(nil), members...))
			}
		}
	}

	// Report in definition order of each cycle's first node.
	for _, members := range cyclic {
		slices.Sort(members)
	}
	slices.SortFunc(cyclic, func(a, b []int32) int { return int(a[0] - b[0]) })
	parent := make([]int32, n) // edge index that reached the node, -1 unset
	for i := range parent {
		parent[i] = -1
	}
	for _, members := range cyclic {
		v.reportCycle(members[0], comp, parent)
	}
}

func (v *validator) selfLoop(u int32) bool {
	for _, e := range v.succ[u] {
		if v.edgeDst[e] == u && !v.guessed[e] {
			return true
		}
	}
	return false
}

// reportCycle finds a shortest cycle through start inside its component by a
// breadth-first search and reports it.
func (v *validator) reportCycle(start int32, comp, parent []int32) {
	c := comp[start]
	queue := []int32{start}
	var closing int32 = -1
	for len(queue) > 0 && closing < 0 {
		u := queue[0]
		queue = queue[1:]
		for _, e := range v.succ[u] {
			if v.guessed[e] {
				continue
			}
			w := v.edgeDst[e]
			if w == start {
				closing = e
				break
			}
			if comp[w] == c && parent[w] < 0 {
				parent[w] = e
				queue = append(queue, w)
			}
		}
	}
	if closing < 0 {
		return // impossible for a cyclic component; stay safe
	}
	// Walk back from the closing edge's source to start.
	var path []int32
	for u := v.srcOf(closing); u != start; u = v.srcOf(parent[u]) {
		path = append(path, u)
	}
	path = append(path, start)
	names := make([]string, 0, len(path)+1)
	for k := len(path) - 1; k >= 0; k-- {
		names = append(names, truncate(v.d.Nodes[path[k]].ID))
	}
	names = append(names, names[0])
	// A cycle through thousands of nodes is named by its ends.
	const show = 10
	if len(names) > 2*show+1 {
		more := fmt.Sprintf("… (%d more)", len(names)-2*show)
		names = append(append(names[:show:show], more), names[len(names)-show:]...)
	}
	v.report(edgePath(int(closing)), "closes a cycle: %s", strings.Join(names, " -> "))
}

func (v *validator) srcOf(e int32) int32 {
	return int32(v.byID[v.end(v.d.Edges[e].Src)])
}

// ValidWorkflowID reports whether id matches ^[a-zA-Z0-9_-]{1,64}$, the form
// of workflow and execution ids.
func ValidWorkflowID(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if !isAlnum(id[i]) && id[i] != '_' && id[i] != '-' {
			return false
		}
	}
	return true
}

// ValidNodeID reports whether id matches ^[A-Za-z_][A-Za-z0-9_]{0,63}$.
func ValidNodeID(id string) bool {
	if len(id) == 0 || len(id) > 64 || id[0] >= '0' && id[0] <= '9' {
		return false
	}
	for i := 0; i < len(id); i++ {
		if !isAlnum(id[i]) && id[i] != '_' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
