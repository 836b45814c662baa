package console

import (
	"context"
	"testing"

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

// TestNodeStates: a node with several runs shows the most pressing state
// and counts; a split shows done / total; a wait when it resumes.
func TestNodeStates(t *testing.T) {
	run := func(node, branch, status string) *store.NodeRun {
		return &store.NodeRun{NodeID: node, Branch: branch, Status: status}
	}
	st := nodeStates([]*store.NodeRun{
		run("s", "", message.StatusSuccess),
		run("x", "s:0", message.StatusSuccess), run("x", "s:1", message.StatusFailed), run("x", "s:2", message.StatusRunning),
		run("y", "s:0", message.StatusSuccess), run("y", "s:1", message.StatusFailed),
		run("w", "", message.StatusWaiting),
	}, []store.SplitProgress{{SplitNodeID: "s", Total: 10000, Done: 733, Failed: 1}})
	for id, want := range map[string]nodeState{
		"s": {State: message.StatusSuccess, Progress: "734 / 10,000, 1 failed"},
		"x": {State: message.StatusRunning, Progress: "3 runs: 1 ok, 1 failed"},
		"y": {State: message.StatusFailed, Progress: "2 runs: 1 ok, 1 failed"},
		"w": {State: message.StatusWaiting},
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
