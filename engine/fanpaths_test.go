package engine_test

import (
	"errors"
	"strings"
	"testing"

	coordmem "github.com/rune-org/rune/coord/memory"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/nodes"
	"github.com/rune-org/rune/workflow"
)

// fanWorkflow is a workflow of nodes and edges after a trigger "start"
// whose one edge "e0" leads to node "s".
func fanWorkflow(nodesJSON, edgesJSON string) string {
	return `{"id":"fan","nodes":[{"id":"start","type":"trigger","trigger":true},` + nodesJSON +
		`],"edges":[{"id":"e0","src":"start","dst":"s"},` + edgesJSON + `]}`
}

const splitNode = `{"id":"s","type":"split","parameters":{"input_array":"{{ $trigger.items }}"}}`

// A split whose item goes down two paths that end apart would fill the
// item's one slot twice, and the second result was dropped without a word
// (issue 30, item 6): validation refuses it, naming the split and its
// edges. Paths that meet at a merge first, a conditional's sides, an error
// edge, a split without aggregator, and a fork further in (the paths share
// what came before it; runtimetest's OneItemByTwoPaths runs one) stay valid.
func TestSplitWhosePathsEndApartIsRefused(t *testing.T) {
	eng, err := engine.New(engine.Config{Registry: nodes.NewRegistry(nodes.Options{}), Coord: coordmem.New(coordmem.Options{}), Barriers: coordmem.NewBarriers()})
	if err != nil {
		t.Fatal(err)
	}
	set := func(id string) string {
		return `{"id":"` + id + `","type":"set","parameters":{"values":{"v":"{{ $item }}"}}}`
	}
	agg := `{"id":"agg","type":"aggregator"}`
	refused := []struct {
		name, def, want string
	}{
		{"split with two edges to the aggregator", fanWorkflow(splitNode+`,`+set("a")+`,`+set("b")+`,`+agg,
			`{"id":"e1","src":"s","dst":"a"},{"id":"e2","src":"s","dst":"b"},{"id":"e3","src":"a","dst":"agg"},{"id":"e4","src":"b","dst":"agg"}`),
			`nodes[1]: split "s" sends each item down 2 paths at once (edges "e1", "e2") that end the item's branch separately, but aggregator "agg" takes one result per item, so one path's result would be lost: join the paths with a merge before the aggregator, or give "s" one outgoing edge`},
		{"one path ends before the aggregator", fanWorkflow(splitNode+`,`+set("a")+`,{"id":"note","type":"log","parameters":{"message":"x"}},`+agg,
			`{"id":"e1","src":"s","dst":"a"},{"id":"e2","src":"s","dst":"note"},{"id":"e3","src":"a","dst":"agg"}`),
			`split "s" sends each item down 2 paths at once (edges "e1", "e2")`},
		{"a merge joins only part of the paths", fanWorkflow(splitNode+`,`+set("a")+`,`+set("b")+`,`+set("c")+`,{"id":"m","type":"merge"},`+agg,
			`{"id":"e1","src":"s","dst":"a"},{"id":"e2","src":"s","dst":"b"},{"id":"e3","src":"s","dst":"c"},{"id":"e4","src":"a","dst":"m"},{"id":"e5","src":"b","dst":"m"},{"id":"e6","src":"m","dst":"agg"},{"id":"e7","src":"c","dst":"agg"}`),
			`split "s" sends each item down 3 paths at once (edges "e1", "e2", "e3")`},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			_, err := eng.Compile([]byte(tc.def))
			var ps workflow.Problems
			if !errors.As(err, &ps) || len(ps) != 1 || !strings.Contains(ps[0].String(), tc.want) {
				t.Fatalf("Compile: %v\nwant one problem containing %s", err, tc.want)
			}
		})
	}
	valid := []struct{ name, def string }{
		{"one path", fanWorkflow(splitNode+`,`+set("a")+`,`+agg, `{"id":"e1","src":"s","dst":"a"},{"id":"e2","src":"a","dst":"agg"}`)},
		{"paths joined by a merge", fanWorkflow(splitNode+`,`+set("a")+`,`+set("b")+`,{"id":"m","type":"merge"},`+agg,
			`{"id":"e1","src":"s","dst":"a"},{"id":"e2","src":"s","dst":"b"},{"id":"e3","src":"a","dst":"m"},{"id":"e4","src":"b","dst":"m"},{"id":"e5","src":"m","dst":"agg"}`)},
		{"a conditional's two sides", fanWorkflow(splitNode+`,{"id":"c","type":"conditional","parameters":{"expression":"$item > 1","true_edge_id":"e2","false_edge_id":"e3"}},`+set("a")+`,`+set("b")+`,`+agg,
			`{"id":"e1","src":"s","dst":"c"},{"id":"e2","src":"c","dst":"a"},{"id":"e3","src":"c","dst":"b"},{"id":"e4","src":"a","dst":"agg"},{"id":"e5","src":"b","dst":"agg"}`)},
		{"an error edge", fanWorkflow(splitNode+`,{"id":"a","type":"set","parameters":{"values":{"v":"{{ $item.x }}"}},"error":{"type":"branch","error_edge":"e3"}},`+set("b")+`,`+agg,
			`{"id":"e1","src":"s","dst":"a"},{"id":"e2","src":"a","dst":"agg"},{"id":"e3","src":"a","dst":"b"},{"id":"e4","src":"b","dst":"agg"}`)},
		{"a conditional side that ends", fanWorkflow(splitNode+`,{"id":"c","type":"conditional","parameters":{"expression":"$item > 1","true_edge_id":"e2"}},`+set("a")+`,`+agg,
			`{"id":"e1","src":"s","dst":"c"},{"id":"e2","src":"c","dst":"a"},{"id":"e3","src":"a","dst":"agg"}`)},
		{"no aggregator", fanWorkflow(splitNode+`,`+set("a")+`,`+set("b"), `{"id":"e1","src":"s","dst":"a"},{"id":"e2","src":"s","dst":"b"}`)},
		{"a node inside the split forks", fanWorkflow(splitNode+`,`+set("x")+`,`+set("a")+`,`+set("b")+`,`+agg,
			`{"id":"e1","src":"s","dst":"x"},{"id":"e2","src":"x","dst":"a"},{"id":"e3","src":"x","dst":"b"},{"id":"e4","src":"a","dst":"agg"},{"id":"e5","src":"b","dst":"agg"}`)},
		{"a nested split's aggregator forks", fanWorkflow(splitNode+`,{"id":"inner","type":"split","parameters":{"input_array":"{{ $item }}"}},`+set("w")+
			`,{"id":"iagg","type":"aggregator"},`+set("a")+`,`+set("b")+`,`+agg,
			`{"id":"e1","src":"s","dst":"inner"},{"id":"e2","src":"inner","dst":"w"},{"id":"e3","src":"w","dst":"iagg"},{"id":"e4","src":"iagg","dst":"a"},{"id":"e5","src":"iagg","dst":"b"},{"id":"e6","src":"a","dst":"agg"},{"id":"e7","src":"b","dst":"agg"}`)},
		{"forks after the aggregator", fanWorkflow(splitNode+`,`+set("a")+`,`+agg+`,`+set("x")+`,`+set("y"),
			`{"id":"e1","src":"s","dst":"a"},{"id":"e2","src":"a","dst":"agg"},{"id":"e3","src":"agg","dst":"x"},{"id":"e4","src":"agg","dst":"y"}`)},
	}
	for _, tc := range valid {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := eng.Compile([]byte(tc.def)); err != nil {
				t.Fatalf("Compile: %v", err)
			}
		})
	}
}
