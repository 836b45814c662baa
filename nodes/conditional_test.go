package nodes

import (
	"reflect"
	"strings"
	"testing"

	"github.com/rune-org/rune/workflow"
)

func TestConditionalCheck(t *testing.T) {
	tests := []struct {
		params map[string]any
		out    []string
		want   map[string]string
	}{
		{map[string]any{}, nil, map[string]string{"nodes[1].parameters.expression": "required"}},
		{map[string]any{"expression": 3.0}, nil, map[string]string{"nodes[1].parameters.expression": "must be a string"}},
		{map[string]any{"expression": "$trigger.x >"}, nil, map[string]string{"nodes[1].parameters.expression": "column"}},
		{map[string]any{"expression": "$trigger.x > 1", "true_edge_id": "e_yes", "false_edge_id": "e_no"}, []string{"e_yes"},
			map[string]string{"nodes[1].parameters.false_edge_id": `edge "e_no" does not leave node "n"`}},
		{map[string]any{"expression": "$trigger.x > 1", "true_edge_id": "e_yes", "bogus": 1.0}, []string{"e_yes"},
			map[string]string{"nodes[1].parameters.bogus": "unknown parameter"}},
		{map[string]any{"expression": "$trigger.x > 1", "true_edge_id": "e_yes"}, []string{"e_yes"}, map[string]string{}},
	}
	for _, tt := range tests {
		wantProblems(t, checkNode(t, workflow.Node{ID: "n", Type: "conditional", Parameters: tt.params}, tt.out...), tt.want)
	}
}

func TestConditionalRun(t *testing.T) {
	reg := NewRegistry(Options{})
	both := compileNode(t, reg, workflow.Node{ID: "n", Type: "conditional", Parameters: map[string]any{
		"expression": "{{ $trigger.total >= 100 }}", "true_edge_id": "e_big", "false_edge_id": "e_small"}})
	onlyTrue := compileNode(t, reg, workflow.Node{ID: "n", Type: "conditional", Parameters: map[string]any{
		"expression": "$trigger.total >= 100", "true_edge_id": "e_big"}})
	tests := []struct {
		r     any
		total float64
		want  bool
		route []string
	}{
		{both, 150, true, []string{"e_big"}},
		{both, 50, false, []string{"e_small"}},
		{onlyTrue, 150, true, []string{"e_big"}},
		{onlyTrue, 50, false, []string{}},
	}
	for i, tt := range tests {
		r := both
		if i >= 2 {
			r = onlyTrue
		}
		res, err := run(t, r, map[string]any{"$trigger": map[string]any{"total": tt.total}})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(res.Output, map[string]any{"result": tt.want}) {
			t.Errorf("%d: output %v", i, res.Output)
		}
		if res.Route == nil || !reflect.DeepEqual(res.Route, tt.route) {
			t.Errorf("%d: route %#v, want %#v", i, res.Route, tt.route)
		}
	}

	_, err := run(t, both, map[string]any{"$trigger": map[string]any{"total": "lots"}})
	// string >= number is a run-time expression error.
	nodeError(t, err, CodeExpression, false)

	notBool := compileNode(t, reg, workflow.Node{ID: "n", Type: "conditional", Parameters: map[string]any{"expression": "$trigger.total"}})
	_, err = run(t, notBool, map[string]any{"$trigger": map[string]any{"total": 3.0}})
	ne := nodeError(t, err, CodeExpressionType, false)
	if !strings.Contains(ne.Message, "parameters.expression") {
		t.Errorf("message %q does not name the parameter", ne.Message)
	}

	_, err = run(t, both, map[string]any{"$trigger": map[string]any{"totl": 3.0}})
	ne = nodeError(t, err, CodeExpression, false)
	if ne.Message != `parameters.expression: $trigger.total: no such key "total"` {
		t.Errorf("message %q", ne.Message)
	}
}
