package console

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"time"

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
	boxW   = 150
	boxH   = 54
	colGap = 46
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
	Progress string
	Note     string
	Problems []string
}

// graphEdge is one edge, as an SVG path between two placed nodes.
type graphEdge struct {
	ID, Label, Path string
	LX, LY          int
}

// graph is a definition laid out left to right.
type graph struct {
	Nodes         []*graphNode
	Edges         []graphEdge
	Width, Height int
	// BoxW and BoxH are a node box's size, for the template.
	BoxW, BoxH int
	// Problems not tied to one node (e.g. a cycle, a missing trigger).
	Problems []string
}

// layout places d's nodes in columns by their longest path from a source
// (so every edge goes right), and orders each column by the mean row of its
// predecessors to keep edges short. A cycle (an invalid definition being
// checked) does not stop it: nodes left on a cycle go after the rest.
func layout(d *workflow.Definition) *graph {
	g := &graph{BoxW: boxW, BoxH: boxH}
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
		mid := (x1 + x2) / 2
		if x2 <= x1 { // a back edge of a cycle: loop under the boxes
			g.Edges = append(g.Edges, graphEdge{ID: e.ID, Label: e.Label, LX: (x1 + x2) / 2, LY: max(y1, y2) + boxH,
				Path: fmt.Sprintf("M%d %d C%d %d %d %d %d %d", x1, y1, x1+60, max(y1, y2)+boxH, x2-60, max(y1, y2)+boxH, x2, y2)})
			continue
		}
		g.Edges = append(g.Edges, graphEdge{ID: e.ID, Label: e.Label, LX: mid, LY: (y1+y2)/2 - 4,
			Path: fmt.Sprintf("M%d %d C%d %d %d %d %d %d", x1, y1, mid, y1, mid, y2, x2, y2)})
	}
	g.Width = 2*margin + (maxCol+1)*(boxW+colGap) - colGap
	g.Height = 2*margin + tallest*(boxH+rowGap) - rowGap + boxH // room for back edges
	return g
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
	State    string `json:"state"`
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
		n, ok, bad, skip  int
		resume, nextRetry time.Time
	}
	by := map[string]*agg{}
	for _, r := range runs {
		a := by[r.NodeID]
		if a == nil {
			a = &agg{best: statePending}
			by[r.NodeID] = a
		}
		a.n++
		switch r.Status {
		case message.StatusSuccess:
			a.ok++
		case message.StatusFailed:
			a.bad++
		case message.StatusSkipped:
			a.skip++
		case message.StatusWaiting:
			if r.ResumeAt != nil && (a.resume.IsZero() || r.ResumeAt.Before(a.resume)) {
				a.resume = *r.ResumeAt
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
			st.Progress = fmt.Sprintf("%s runs: %s ok", thousands(a.n), thousands(a.ok))
			if a.bad > 0 {
				st.Progress += fmt.Sprintf(", %s failed", thousands(a.bad))
			}
			if a.skip > 0 {
				st.Progress += fmt.Sprintf(", %s skipped", thousands(a.skip))
			}
		}
		if !a.resume.IsZero() && a.best == message.StatusWaiting {
			st.Note = "resumes " + a.resume.UTC().Format("15:04:05")
		}
		if !a.nextRetry.IsZero() && a.best == message.StatusRetrying {
			st.Note = "next attempt " + a.nextRetry.UTC().Format("15:04:05")
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
		st.Progress = fmt.Sprintf("%s / %s", thousands(a.done+a.failed+a.skipped), thousands(a.total))
		if a.failed > 0 {
			st.Progress += fmt.Sprintf(", %s failed", thousands(a.failed))
		}
		if a.skipped > 0 {
			st.Progress += fmt.Sprintf(", %s skipped", thousands(a.skipped))
		}
		out[id] = st
	}
	return out
}

// apply colours the graph's nodes with states.
func (g *graph) apply(states map[string]nodeState) {
	for _, n := range g.Nodes {
		if n == nil {
			continue
		}
		if st, ok := states[n.ID]; ok {
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
