package workflow

import (
	"fmt"
	"testing"
)

func edgeIDs(es []Edge) string {
	ids := make([]string, len(es))
	for i, e := range es {
		ids[i] = e.ID
	}
	return fmt.Sprint(ids)
}

func TestGraph(t *testing.T) {
	d := validDef()
	d.Nodes = append(d.Nodes, Node{ID: "join", Type: "merge"})
	d.Edges = append(d.Edges,
		Edge{ID: "j2", Src: "notify", Dst: "join"},
		Edge{ID: "j1", Src: "failed", Dst: "join"},
	)
	g := NewGraph(d)

	if tr := g.Trigger(); tr == nil || tr.ID != "start" || tr != &d.Nodes[0] {
		t.Fatalf("Trigger() = %v", tr)
	}
	n, ok := g.Node("check")
	if !ok || n != &d.Nodes[2] {
		t.Errorf("Node(check) = %v, %v", n, ok)
	}
	if _, ok := g.Node("nope"); ok {
		t.Error("Node(nope) found")
	}
	e, ok := g.Edge("e_fail")
	if !ok || e != (Edge{ID: "e_fail", Src: "fetch", Dst: "failed"}) {
		t.Errorf("Edge(e_fail) = %v, %v", e, ok)
	}
	if _, ok := g.Edge("nope"); ok {
		t.Error("Edge(nope) found")
	}
	for id, want := range map[string]string{"start": "[e1]", "fetch": "[e2 e_fail]", "join": "[]", "nope": "[]"} {
		if got := edgeIDs(g.Outgoing(id)); got != want {
			t.Errorf("Outgoing(%s) = %s, want %s", id, got, want)
		}
	}
	for id, want := range map[string]string{"start": "[]", "fetch": "[e1]", "join": "[j2 j1]"} {
		if got := edgeIDs(g.Incoming(id)); got != want {
			t.Errorf("Incoming(%s) = %s, want %s", id, got, want)
		}
	}
}

func TestGraphSlicesAreNotShared(t *testing.T) {
	g := NewGraph(validDef())
	out := g.Outgoing("fetch")
	_ = append(out, Edge{ID: "mine"})
	in := g.Incoming("check")
	_ = append(in, Edge{ID: "mine"})
	if got := edgeIDs(g.Outgoing("fetch")); got != "[e2 e_fail]" {
		t.Errorf("Outgoing changed to %s", got)
	}
	// The spare capacity an append could have written into is gone.
	if cap(out) != len(out) || cap(in) != len(in) {
		t.Errorf("returned slices have spare capacity: %d/%d, %d/%d", len(out), cap(out), len(in), cap(in))
	}
}

func TestGraphOnInvalidDefinition(t *testing.T) {
	g := NewGraph(&Definition{
		Nodes: []Node{{ID: "a", Name: "first"}, {ID: "a", Name: "second", Trigger: true}},
		Edges: []Edge{{ID: "e", Src: "a", Dst: "x"}, {ID: "e", Src: "x", Dst: "a"}},
	})
	if n, _ := g.Node("a"); n.Name != "first" {
		t.Errorf("duplicate node: got %q, want the first", n.Name)
	}
	if e, _ := g.Edge("e"); e.Dst != "x" {
		t.Errorf("duplicate edge: got %v, want the first", e)
	}
	if g.Trigger() != nil {
		t.Errorf("the trigger flag of a shadowed duplicate counted")
	}
	if NewGraph(&Definition{}).Trigger() != nil {
		t.Error("empty definition has a trigger")
	}
}
