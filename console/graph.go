package console

import (
	"cmp"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/workflow"
)

// Node states shown on the graph: the node-run statuses, plus pending for a
// node that has not run.
const (
	statePending = "pending"
)

// Box sizes of the laid-out graph, in SVG user units.
const (
	boxW      = 150
	boxH      = 54
	colGapMin = 46
	colGapMax = 150
	// charW is a label character's width at 11px, roughly.
	charW  = 6.5
	rowGap = 22
	margin = 16
)

// graphNode is one node of the definition, placed on the graph.
type graphNode struct {
	ID, Name, Type string
	X, Y           int
	// State is one of the node-run statuses, or pending; Progress a
	// split's "734 / 1,000, 3 failed" or a count of branches; Note when a
	// wait resumes or a retry comes. Problems are the validation problems
	// naming the node.
	State    string
	Label    string
	Progress string
	Note     string
	Problems []string
}

// graphEdge is one edge, as an SVG path between two placed nodes. Kind
// is "error" for a node's error edge (followed only on failure), "route"
// for an edge a conditional or switch chooses, else "". Label is what the
// graph writes on it: the definition's label, else what its kind says
// ("on error", "true", "case 2", "default"); Short is Label cut to fit
// the gap between columns (the whole label is its tooltip).
type graphEdge struct {
	ID, Label, Short, Kind, Path string
	LX, LY                       int
	// LW is the width of the label's background, in user units.
	LW int
}

// graph is a definition laid out left to right.
type graph struct {
	Nodes         []*graphNode
	Edges         []graphEdge
	Width, Height int
	// BoxW and BoxH are a node box's size, for the template.
	BoxW, BoxH int
	// Describe is the graph as text, for screen readers.
	Describe string
	// Problems not tied to one node (e.g. a cycle, a missing trigger).
	Problems []string
}

// layout places d's nodes in columns by their longest path from a source
// (so every edge goes right), and orders each column by the mean row of its
// predecessors to keep edges short. A cycle (an invalid definition being
// checked) does not stop it: nodes left on a cycle go after the rest.
func layout(d *workflow.Definition) *graph {
	g := &graph{BoxW: boxW, BoxH: boxH}
	labels := edgeLabels(d)
	// Columns part wide enough for the longest label (up to a bound: a
	// longer one is cut, whole in its tooltip), so labels sit between
	// boxes, never behind them.
	colGap := colGapMin
	for _, l := range labels {
		colGap = max(colGap, min(labelW(l.text)+16, colGapMax))
	}
	idx := make(map[string]int, len(d.Nodes))
	for i, n := range d.Nodes {
		if _, dup := idx[n.ID]; !dup {
			idx[n.ID] = i
		}
	}
	succ := make([][]int, len(d.Nodes))
	pred := make([][]int, len(d.Nodes))
	indeg := make([]int, len(d.Nodes))
	for _, e := range d.Edges {
		s, ok1 := idx[e.Src]
		t, ok2 := idx[e.Dst]
		if !ok1 || !ok2 || s == t {
			continue
		}
		succ[s] = append(succ[s], t)
		pred[t] = append(pred[t], s)
		indeg[t]++
	}
	col := make([]int, len(d.Nodes))
	done := make([]bool, len(d.Nodes))
	queue := make([]int, 0, len(d.Nodes))
	for i := range d.Nodes {
		if indeg[i] == 0 {
			queue = append(queue, i)
		}
	}
	order := make([]int, 0, len(d.Nodes))
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		done[i] = true
		order = append(order, i)
		for _, t := range succ[i] {
			col[t] = max(col[t], col[i]+1)
			if indeg[t]--; indeg[t] == 0 {
				queue = append(queue, t)
			}
		}
	}
	maxCol := 0
	for _, i := range order {
		maxCol = max(maxCol, col[i])
	}
	for i := range d.Nodes {
		if !done[i] {
			maxCol++
			col[i] = maxCol
			order = append(order, i)
		}
	}
	cols := make([][]int, maxCol+1)
	for _, i := range order {
		cols[col[i]] = append(cols[col[i]], i)
	}
	row := make([]float64, len(d.Nodes))
	for _, c := range cols {
		key := func(i int) float64 {
			if len(pred[i]) == 0 {
				return row[i]
			}
			sum := 0.0
			for _, p := range pred[i] {
				sum += row[p]
			}
			return sum / float64(len(pred[i]))
		}
		slices.SortStableFunc(c, func(a, b int) int { return cmp.Compare(key(a), key(b)) })
		for r, i := range c {
			row[i] = float64(r)
		}
	}
	tallest := 0
	for _, c := range cols {
		tallest = max(tallest, len(c))
	}
	g.Nodes = make([]*graphNode, len(d.Nodes))
	for ci, c := range cols {
		// Centre short columns against the tallest one.
		off := (tallest - len(c)) * (boxH + rowGap) / 2
		for r, i := range c {
			n := d.Nodes[i]
			g.Nodes[i] = &graphNode{ID: n.ID, Name: n.Name, Type: n.Type, State: statePending,
				X: margin + ci*(boxW+colGap), Y: margin + off + r*(boxH+rowGap)}
		}
	}
	for _, e := range d.Edges {
		s, ok1 := idx[e.Src]
		t, ok2 := idx[e.Dst]
		if !ok1 || !ok2 {
			continue
		}
		a, b := g.Nodes[s], g.Nodes[t]
		x1, y1 := a.X+boxW, a.Y+boxH/2
		x2, y2 := b.X, b.Y+boxH/2
		l := labels[e.ID]
		ge := graphEdge{ID: e.ID, Label: l.text, Kind: l.kind}
		if ge.Label != "" {
			ge.Short = cut(ge.Label, colGap-8)
			ge.LW = labelW(ge.Short)
		}
		if x2 <= x1 { // a back edge of a cycle: loop under the boxes
			low := max(y1, y2) + boxH
			ge.LX, ge.LY = (x1+x2)/2, low
			ge.Path = fmt.Sprintf("M%d %d C%d %d %d %d %d %d", x1, y1, x1+60, low, x2-60, low, x2, y2)
			g.Edges = append(g.Edges, ge)
			continue
		}
		mid := (x1 + x2) / 2
		ge.Path = fmt.Sprintf("M%d %d C%d %d %d %d %d %d", x1, y1, mid, y1, mid, y2, x2, y2)
		// The label sits in the gap right after the source's column, on
		// the curve: an edge spanning columns passes behind boxes later.
		ge.LX = x1 + colGap/2
		ge.LY = int(math.Round(bezierYAt(float64(ge.LX), float64(x1), float64(y1), float64(mid), float64(x2), float64(y2)))) + 4
		g.Edges = append(g.Edges, ge)
	}
	g.Describe = describe(d)
	g.Width = 2*margin + (maxCol+1)*(boxW+colGap) - colGap
	g.Height = 2*margin + tallest*(boxH+rowGap) - rowGap + boxH // room for back edges
	return g
}

// edgeLabel is what the graph writes on an edge, and its kind.
type edgeLabel struct{ text, kind string }

// edgeLabels names each edge's role: a node's error edge ("on error"), the
// edges a conditional ("true", "false") or switch ("case N", "default")
// chooses among (dsl.md, "Nodes"), and, beside an error edge, the edges
// followed on success ("on success"), so the two paths differ at a
// glance. An edge's own label comes first; its role is added.
func edgeLabels(d *workflow.Definition) map[string]edgeLabel {
	role := map[string]edgeLabel{}
	for i := range d.Nodes {
		n := &d.Nodes[i]
		for _, k := range []struct{ param, text string }{{"true_edge_id", "true"}, {"false_edge_id", "false"}, {"default_edge", "default"}} {
			if id, ok := n.Parameters[k.param].(string); ok {
				role[id] = edgeLabel{k.text, "route"}
			}
		}
		cases, _ := n.Parameters["cases"].([]any)
		for ci, c := range cases {
			if m, ok := c.(map[string]any); ok {
				if id, ok := m["edge"].(string); ok {
					role[id] = edgeLabel{fmt.Sprintf("case %d", ci+1), "route"}
				}
			}
		}
		if id := n.ErrorEdge(); id != "" {
			for _, e := range d.Edges {
				if e.Src == n.ID && e.ID != id {
					if _, routed := role[e.ID]; !routed {
						role[e.ID] = edgeLabel{"on success", "success"}
					}
				}
			}
			role[id] = edgeLabel{"on error", "error"}
		}
	}
	out := make(map[string]edgeLabel, len(d.Edges))
	for _, e := range d.Edges {
		l := role[e.ID]
		switch {
		case e.Label != "" && l.text != "" && e.Label != l.text:
			l.text = l.text + ": " + e.Label
		case e.Label != "":
			l.text = e.Label
		}
		out[e.ID] = l
	}
	return out
}

// labelW is the width a label's background needs.
func labelW(s string) int { return int(float64(utf8.RuneCountInString(s))*charW) + 8 }

// cut shortens s to fit width w, ending it with "…".
func cut(s string, w int) string {
	if labelW(s) <= w {
		return s
	}
	r := []rune(s)
	for len(r) > 1 && labelW(string(r)+"…") > w {
		r = r[:len(r)-1]
	}
	return string(r) + "…"
}

// bezierYAt is the y of the edge curve (x1,y1) C(mid,y1) (mid,y2) (x2,y2)
// where its x is x, found by bisection (x grows along the curve).
func bezierYAt(x, x1, y1, mid, x2, y2 float64) float64 {
	at := func(t float64, a, b, c, d float64) float64 {
		u := 1 - t
		return u*u*u*a + 3*u*u*t*b + 3*u*t*t*c + t*t*t*d
	}
	lo, hi := 0.0, 1.0
	for range 30 {
		t := (lo + hi) / 2
		if at(t, x1, mid, mid, x2) < x {
			lo = t
		} else {
			hi = t
		}
	}
	return at(lo, y1, y1, y2, y2)
}

// describe says what a graph shows, for a screen reader: its nodes and
// where each edge goes.
func describe(d *workflow.Definition) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Workflow graph of %d nodes.", len(d.Nodes))
	labels := edgeLabels(d)
	for _, e := range d.Edges {
		fmt.Fprintf(&b, " %s to %s", e.Src, e.Dst)
		if l := labels[e.ID].text; l != "" {
			fmt.Fprintf(&b, " (%s)", l)
		}
		b.WriteString(".")
	}
	return b.String()
}

// problemNode finds the node index a problem's path names ("nodes[3].type").
var problemNode = regexp.MustCompile(`^nodes\[(\d+)\]`)

// markProblems puts each validation problem on the node its path names,
// the others on the graph.
func (g *graph) markProblems(ps []workflow.Problem) {
	for _, p := range ps {
		if m := problemNode.FindStringSubmatch(p.Path); m != nil {
			if i, err := strconv.Atoi(m[1]); err == nil && i < len(g.Nodes) && g.Nodes[i] != nil {
				g.Nodes[i].Problems = append(g.Nodes[i].Problems, p.String())
				g.Nodes[i].State = "invalid"
				continue
			}
		}
		g.Problems = append(g.Problems, p.String())
	}
}

// nodeState is what the graph shows of one node of a running execution.
type nodeState struct {
	State string `json:"state"`
	// Label is State in words (stateWords).
	Label    string `json:"label"`
	Progress string `json:"progress"`
	Note     string `json:"note"`
}

// statePriority orders the states a node with several runs (one per split
// branch) shows: anything still moving first, then failure.
var statePriority = map[string]int{
	message.StatusRunning: 6, message.StatusRetrying: 5, message.StatusWaiting: 4,
	message.StatusFailed: 3, message.StatusSuccess: 2, message.StatusSkipped: 1, statePending: 0,
}

// nodeStates folds an execution's node runs and split progress into one
// state per node.
func nodeStates(runs []*store.NodeRun, splits []store.SplitProgress) map[string]nodeState {
	type agg struct {
		best              string
		n                 int
		count             map[string]int
		resume, nextRetry time.Time
		reason            string // a deferred run's (flow control)
	}
	by := map[string]*agg{}
	for _, r := range runs {
		a := by[r.NodeID]
		if a == nil {
			a = &agg{best: statePending, count: map[string]int{}}
			by[r.NodeID] = a
		}
		a.n++
		a.count[r.Status]++
		switch r.Status {
		case message.StatusWaiting:
			if r.ResumeAt != nil && (a.resume.IsZero() || r.ResumeAt.Before(a.resume)) {
				a.resume = *r.ResumeAt
				a.reason = store.RunReason(r)
			}
		case message.StatusRetrying:
			if r.NextAttemptAt != nil && (a.nextRetry.IsZero() || r.NextAttemptAt.Before(a.nextRetry)) {
				a.nextRetry = *r.NextAttemptAt
			}
		}
		if statePriority[r.Status] > statePriority[a.best] {
			a.best = r.Status
		}
	}
	out := make(map[string]nodeState, len(by))
	for id, a := range by {
		st := nodeState{State: a.best}
		if a.n > 1 {
			// Each status that some run is in, in words: "3 runs: 2
			// waiting, 1 succeeded", never "0 ok".
			var parts []string
			for _, s := range runStatusOrder {
				if n := a.count[s]; n > 0 {
					parts = append(parts, thousands(n)+" "+stateWords[s])
				}
			}
			st.Progress = thousands(a.n) + " runs: " + strings.Join(parts, ", ")
		}
		if !a.resume.IsZero() && a.best == message.StatusWaiting {
			st.Note = "resumes " + a.resume.UTC().Format("15:04:05")
			if w := reasonWords[a.reason]; w != "" {
				st.Note = w + ", starts " + a.resume.UTC().Format("15:04:05")
			}
		}
		if !a.nextRetry.IsZero() && a.best == message.StatusRetrying {
			st.Note = "next try " + a.nextRetry.UTC().Format("15:04:05")
		}
		out[id] = st
	}
	// A split's own progress: its branches, done / total.
	type sum struct{ total, done, failed, skipped int }
	sp := map[string]*sum{}
	for _, s := range splits {
		a := sp[s.SplitNodeID]
		if a == nil {
			a = &sum{}
			sp[s.SplitNodeID] = a
		}
		a.total += s.Total
		a.done += s.Done
		a.failed += s.Failed
		a.skipped += s.Skipped
	}
	for id, a := range sp {
		st := out[id]
		if st.State == "" {
			st.State = statePending
		}
		st.Progress = fmt.Sprintf("%s / %s branches", thousands(a.done+a.failed+a.skipped), thousands(a.total))
		if a.failed > 0 {
			st.Progress += fmt.Sprintf(", %s failed", thousands(a.failed))
		}
		if a.skipped > 0 {
			st.Progress += fmt.Sprintf(", %s skipped", thousands(a.skipped))
		}
		out[id] = st
	}
	for id, st := range out {
		st.Label = stateWords[st.State]
		out[id] = st
	}
	return out
}

// runStatusOrder is the order a node's run counts are listed in.
var runStatusOrder = []string{message.StatusRunning, message.StatusRetrying, message.StatusWaiting,
	message.StatusFailed, message.StatusSuccess, message.StatusSkipped}

// stateWords says each node and execution status as the console shows it.
var stateWords = map[string]string{
	statePending: "not run yet", message.StatusRunning: "running", message.StatusRetrying: "retrying",
	message.StatusWaiting: "waiting", message.StatusFailed: "failed", message.StatusSuccess: "succeeded",
	message.StatusSkipped: "skipped", "invalid": "invalid",
	store.StatusEnqueued: "queued", store.StatusProcessing: "running", store.StatusCompleted: "completed",
	store.StatusHalted: "halted", store.StatusCancelled: "cancelled",
}

// apply colours the graph's nodes with states.
func (g *graph) apply(states map[string]nodeState) {
	for _, n := range g.Nodes {
		if n == nil {
			continue
		}
		n.Label = stateWords[n.State]
		if st, ok := states[n.ID]; ok {
			n.Label = st.Label
			n.State, n.Progress, n.Note = st.State, st.Progress, st.Note
		}
	}
}

// thousands writes n with comma separators: 10,000.
func thousands(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
