package nodes

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/rune-org/rune/internal/nodetest"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/workflow"
)

// checkNode runs the registry's check of n, with edges e_<x> leaving it for
// each name in out, and returns the problems.
func checkNode(t *testing.T, n workflow.Node, out ...string) workflow.Problems {
	t.Helper()
	var ps workflow.Problems
	var edges []workflow.Edge
	for _, id := range out {
		edges = append(edges, workflow.Edge{ID: id, Src: n.ID, Dst: "x"})
	}
	NewRegistry(Options{}).CheckNode(workflow.NewNodeCheck(&n, "nodes[1]", edges, &ps))
	return ps
}

// wantProblems and nodeError are nodetest's.
var (
	wantProblems = nodetest.WantProblems
	nodeError    = nodetest.NodeError
)

func compileNode(t *testing.T, reg *node.Registry, n workflow.Node) node.Runner {
	t.Helper()
	return nodetest.Compile(t, reg, n, checkNode(t, n, routingEdges(&n)...))
}

func run(t *testing.T, r node.Runner, env map[string]any) (node.Result, error) {
	t.Helper()
	return r.Run(context.Background(), &node.Input{Env: env, NodeID: "n", ExecutionID: "ex1", Attempt: 1})
}

func TestRegistry(t *testing.T) {
	want := []string{"conditional", "email", "http", "log", "set", "sms", "switch", "trigger"}
	if got := NewRegistry(Options{}).Names(); !reflect.DeepEqual(got, want) {
		t.Errorf("Names() = %v, want %v", got, want)
	}
}

// TestCheckNeverPanics feeds every type parameters of every wrong shape.
func TestCheckNeverPanics(t *testing.T) {
	odd := []any{nil, 1.0, "x", "{{", true, []any{nil, 1.0, map[string]any{}}, map[string]any{"": nil, "x": []any{map[string]any{"y": "{{ +"}}}}
	for _, typ := range NewRegistry(Options{}).Names() {
		for _, param := range []string{"expression", "true_edge_id", "cases", "default_edge", "values", "keep", "message", "level",
			"method", "url", "headers", "query", "body", "timeout", "unknown"} {
			for _, v := range odd {
				n := workflow.Node{ID: "n", Type: typ, Parameters: map[string]any{param: v}}
				checkNode(t, n)
			}
		}
		checkNode(t, workflow.Node{ID: "n", Type: typ})
	}
}

func TestTrigger(t *testing.T) {
	wantProblems(t, checkNode(t, workflow.Node{ID: "n", Type: "trigger", Parameters: map[string]any{"x": 1.0}}),
		map[string]string{"nodes[1].parameters.x": "unknown parameter"})
	r := compileNode(t, NewRegistry(Options{}), workflow.Node{ID: "start", Type: "trigger"})
	if _, err := run(t, r, nil); err == nil || !strings.Contains(err.Error(), "start") {
		t.Errorf("running a trigger: %v, want an error naming it", err)
	}
}

func TestRouteMustNotNameTheErrorEdge(t *testing.T) {
	n := workflow.Node{ID: "check", Type: "conditional",
		Parameters: map[string]any{"expression": "$trigger.ok", "true_edge_id": "e_yes", "false_edge_id": "e_err"},
		Error:      &workflow.ErrorPolicy{Type: workflow.ErrorBranch, ErrorEdge: "e_err"}}
	wantProblems(t, checkNode(t, n, "e_yes", "e_err"), map[string]string{
		"nodes[1].parameters.false_edge_id": `edge "e_err" is the node's error edge`,
	})
}

func TestPureRunners(t *testing.T) {
	reg := NewRegistry(Options{})
	pure := map[string]map[string]any{
		"set":         {"values": map[string]any{"a": 1.0}},
		"log":         {"message": "hi"},
		"conditional": {"expression": "true"},
		"switch":      {"cases": []any{}},
	}
	for typ, params := range pure {
		r := compileNode(t, reg, workflow.Node{ID: "n", Type: typ, Parameters: params})
		if _, ok := r.(node.Pure); !ok {
			t.Errorf("%s runner is not node.Pure", typ)
		}
	}
	r := compileNode(t, reg, workflow.Node{ID: "n", Type: "http", Parameters: map[string]any{"url": "http://x"}})
	if _, ok := r.(node.Pure); ok {
		t.Error("the http runner claims to do no I/O")
	}
}

// A routing edge that is a near miss of one leaving the node gets a hint;
// expressions that read a node the workflow lacks are reported (the
// workflow's names come from Validate: a bare NodeCheck checks none).
func TestCheckHints(t *testing.T) {
	t.Parallel()
	ps := checkNode(t, workflow.Node{ID: "n", Type: "conditional", Parameters: map[string]any{
		"expression": "$trigger.x > 1", "true_edge_id": "e_bgi", "false_edge_id": "e_small"}}, "e_big", "e_small")
	wantProblems(t, ps, map[string]string{"nodes[1].parameters.true_edge_id": `edge "e_bgi" does not leave node "n"; did you mean "e_big"?`})
	def := []byte(`{"id": "w", "nodes": [{"id": "start", "type": "trigger", "trigger": true},
		{"id": "mail", "type": "email", "credentials": {"ref": "m"}, "parameters": {"to": "a@b.c", "subject": "Hi {{ $trigger.name }}", "text": "{{ $nosuch }}"}},
		{"id": "say", "type": "log", "parameters": {"message": "{{ $mial.message_id }}"}}],
		"edges": [{"id": "e1", "src": "start", "dst": "mail"}, {"id": "e2", "src": "mail", "dst": "say"}]}`)
	_, err := workflow.Load(def, NewRegistry(Options{}))
	var got workflow.Problems
	if !errors.As(err, &got) {
		t.Fatalf("Load: %v", err)
	}
	wantProblems(t, got, map[string]string{
		"nodes[1].parameters.text":    `$nosuch: no node "nosuch" in this workflow`,
		"nodes[2].parameters.message": `$mial: no node "mial" in this workflow; did you mean $mail?`,
	})
	if len(got) != 2 {
		t.Errorf("%d problems, want 2: %v", len(got), got)
	}
}

// routingEdges are the edges a conditional or switch node names, which
// its check wants to leave it.
func routingEdges(n *workflow.Node) []string {
	var ids []string
	for _, k := range []string{"true_edge_id", "false_edge_id", "default_edge"} {
		if s, ok := n.Parameters[k].(string); ok {
			ids = append(ids, s)
		}
	}
	cases, _ := n.Parameters["cases"].([]any)
	for _, c := range cases {
		if m, ok := c.(map[string]any); ok {
			if s, ok := m["edge"].(string); ok {
				ids = append(ids, s)
			}
		}
	}
	return ids
}
