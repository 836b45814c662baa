package console

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/workflow"
)

// TestLayout: every edge of a DAG goes right, no two nodes overlap, and a
// cycle (an invalid definition being checked) still lays out.
func TestLayout(t *testing.T) {
	d := &workflow.Definition{Nodes: []workflow.Node{{ID: "a"}, {ID: "b"}, {ID: "c"}, {ID: "d"}, {ID: "e"}},
		Edges: []workflow.Edge{{Src: "a", Dst: "b"}, {Src: "a", Dst: "c"}, {Src: "b", Dst: "d"}, {Src: "c", Dst: "d"}, {Src: "a", Dst: "d"}, {Src: "d", Dst: "e"}}}
	g := layout(d)
	pos := map[string]*graphNode{}
	for _, n := range g.Nodes {
		pos[n.ID] = n
	}
	for _, e := range d.Edges {
		if pos[e.Src].X >= pos[e.Dst].X {
			t.Errorf("edge %s→%s goes from x=%d to x=%d, want rightwards", e.Src, e.Dst, pos[e.Src].X, pos[e.Dst].X)
		}
	}
	seen := map[[2]int]string{}
	for _, n := range g.Nodes {
		k := [2]int{n.X, n.Y}
		if o, dup := seen[k]; dup {
			t.Errorf("%s and %s overlap at %v", n.ID, o, k)
		}
		seen[k] = n.ID
		if n.X+boxW > g.Width || n.Y+boxH > g.Height {
			t.Errorf("%s at %d,%d is outside the %dx%d graph", n.ID, n.X, n.Y, g.Width, g.Height)
		}
	}
	cyc := layout(&workflow.Definition{Nodes: []workflow.Node{{ID: "a"}, {ID: "b"}}, Edges: []workflow.Edge{{Src: "a", Dst: "b"}, {Src: "b", Dst: "a"}}})
	if len(cyc.Nodes) != 2 || cyc.Nodes[0] == nil || cyc.Nodes[1] == nil || len(cyc.Edges) != 2 {
		t.Errorf("a cycle lays out as %+v", cyc)
	}
}

// TestEdgeLabels: the error edge, a node's success edges beside it, and a
// conditional's and a switch's edges say what they are; a label sits in
// the gap after its source, on no box, and a long one is cut to the gap.
func TestEdgeLabels(t *testing.T) {
	d := &workflow.Definition{
		Nodes: []workflow.Node{{ID: "t"}, {ID: "fetch", Error: &workflow.ErrorPolicy{Type: workflow.ErrorBranch, ErrorEdge: "bad"}},
			{ID: "if", Parameters: map[string]any{"true_edge_id": "yes", "false_edge_id": "no"}},
			{ID: "sw", Parameters: map[string]any{"cases": []any{map[string]any{"edge": "c1"}}, "default_edge": "dflt"}},
			{ID: "a"}, {ID: "b"}, {ID: "c"}, {ID: "d"}, {ID: "alert"}},
		Edges: []workflow.Edge{{ID: "e0", Src: "t", Dst: "fetch"}, {ID: "good", Src: "fetch", Dst: "if"}, {ID: "bad", Src: "fetch", Dst: "alert"},
			{ID: "yes", Src: "if", Dst: "sw", Label: "a very long label that cannot fit between two columns"}, {ID: "no", Src: "if", Dst: "a"},
			{ID: "c1", Src: "sw", Dst: "b"}, {ID: "dflt", Src: "sw", Dst: "c"}, {ID: "far", Src: "t", Dst: "d"},
			{ID: "long", Src: "t", Dst: "c", Label: "shortcut"}},
	}
	g := layout(d)
	want := map[string][2]string{"good": {"on success", "success"}, "bad": {"on error", "error"}, "no": {"false", "route"},
		"yes": {"true: a very long label that cannot fit between two columns", "route"}, "c1": {"case 1", "route"},
		"dflt": {"default", "route"}, "e0": {"", ""}, "far": {"", ""}, "long": {"shortcut", ""}}
	for _, e := range g.Edges {
		if w := want[e.ID]; e.Label != w[0] || e.Kind != w[1] {
			t.Errorf("edge %s: label %q kind %q, want %q %q", e.ID, e.Label, e.Kind, w[0], w[1])
		}
		if e.Label == "" {
			continue
		}
		if e.LW > colGapMax-8 || !strings.HasPrefix(e.Label, strings.TrimSuffix(e.Short, "…")) {
			t.Errorf("edge %s: short %q (width %d) of %q", e.ID, e.Short, e.LW, e.Label)
		}
		// The label's box, centred on LX, overlaps no node box.
		l, r, top, bot := e.LX-e.LW/2, e.LX+e.LW/2, e.LY-11, e.LY+4
		for _, n := range g.Nodes {
			if l < n.X+boxW && r > n.X && top < n.Y+boxH && bot > n.Y {
				t.Errorf("edge %s's label [%d..%d]x[%d..%d] lies on node %s at %d,%d", e.ID, l, r, top, bot, n.ID, n.X, n.Y)
			}
		}
	}
	if !strings.Contains(g.Describe, "fetch to alert (on error)") {
		t.Errorf("description %q does not say where the error edge goes", g.Describe)
	}
}

// TestNodeStates: a node with several runs shows the most pressing state
// and counts; a split shows done / total; a wait when it resumes.
func TestNodeStates(t *testing.T) {
	rateSlot := time.Date(2026, 5, 1, 9, 0, 1, 0, time.UTC)
	run := func(node, branch, status string) *store.NodeRun {
		return &store.NodeRun{NodeID: node, Branch: branch, Status: status}
	}
	st := nodeStates([]*store.NodeRun{
		run("s", "", message.StatusSuccess),
		run("x", "s:0", message.StatusSuccess), run("x", "s:1", message.StatusFailed), run("x", "s:2", message.StatusRunning),
		run("y", "s:0", message.StatusSuccess), run("y", "s:1", message.StatusFailed),
		run("w", "", message.StatusWaiting),
		// A wait inside a split, all its branches waiting: said as such,
		// not "3 runs: 0 ok".
		run("v", "s:0", message.StatusWaiting), run("v", "s:1", message.StatusWaiting), run("v", "s:2", message.StatusWaiting),
		// A run deferred by a rate limit (issue 35) says so.
		{NodeID: "r", Status: message.StatusWaiting, ResumeAt: &rateSlot, Details: []byte(`{"reason":"RATE_LIMITED"}`)},
		// An email held back by its subscriber's quiet hours (issue 36).
		{NodeID: "q", Status: message.StatusWaiting, ResumeAt: &rateSlot, Details: []byte(`{"reason":"QUIET_HOURS"}`)},
	}, []store.SplitProgress{{SplitNodeID: "s", Total: 10000, Done: 733, Failed: 1}})
	for id, want := range map[string]nodeState{
		"s": {State: message.StatusSuccess, Label: "succeeded", Progress: "734 / 10,000 branches, 1 failed"},
		"x": {State: message.StatusRunning, Label: "running", Progress: "3 runs: 1 running, 1 failed, 1 succeeded"},
		"y": {State: message.StatusFailed, Label: "failed", Progress: "2 runs: 1 failed, 1 succeeded"},
		"w": {State: message.StatusWaiting, Label: "waiting"},
		"v": {State: message.StatusWaiting, Label: "waiting", Progress: "3 runs: 3 waiting"},
		"r": {State: message.StatusWaiting, Label: "waiting", Note: "rate limited, starts 09:00:01"},
		"q": {State: message.StatusWaiting, Label: "waiting", Note: "quiet hours, starts 09:00:01"},
	} {
		if st[id] != want {
			t.Errorf("node %s: %+v, want %+v", id, st[id], want)
		}
	}
}

// eventsOnly is a store whose event log holds the given ids.
type eventsOnly struct {
	store.Store
	ids []int64
}

func (s eventsOnly) Events(_ context.Context, f store.EventFilter) ([]store.Event, error) {
	for _, id := range s.ids {
		if id > f.AfterID {
			return []store.Event{{ID: id}}, nil
		}
	}
	return nil, nil
}

// TestLatestEventID: the bisection finds the newest id, gaps or not.
func TestLatestEventID(t *testing.T) {
	for _, ids := range [][]int64{nil, {1}, {1, 2, 3}, {5, 9, 1000}, {7, 1 << 40}, {2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}} {
		got, err := latestEventID(context.Background(), eventsOnly{ids: ids}, "")
		var want int64
		if len(ids) > 0 {
			want = ids[len(ids)-1]
		}
		if err != nil || got != want {
			t.Errorf("ids %v: got %d, %v; want %d", ids, got, err, want)
		}
	}
}
