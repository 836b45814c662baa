package nodes

import (
	"reflect"
	"testing"

	"github.com/rune-org/rune/workflow"
)

func TestSwitchCheck(t *testing.T) {
	params := map[string]any{
		"cases": []any{
			map[string]any{"expression": "$trigger.country == 'DE'", "edge": "e_de"},
			map[string]any{"expression": "$trigger.country in ['FR', 'IT'", "edge": "e_eu"},
			map[string]any{"expression": "true", "edge": "e_gone"},
			"not an object",
			map[string]any{"edge": "e_de", "extra": 1.0},
		},
		"default_edge": "e_nowhere",
	}
	wantProblems(t, checkNode(t, workflow.Node{ID: "n", Type: "switch", Parameters: params}, "e_de", "e_eu"), map[string]string{
		"nodes[1].parameters.cases[1].expression": "column",
		"nodes[1].parameters.cases[2].edge":       `edge "e_gone" does not leave node "n"`,
		"nodes[1].parameters.cases[3]":            "must be an object",
		"nodes[1].parameters.cases[4].expression": "required",
		"nodes[1].parameters.cases[4].extra":      "unknown field",
		"nodes[1].parameters.default_edge":        `edge "e_nowhere" does not leave node "n"`,
	})
	wantProblems(t, checkNode(t, workflow.Node{ID: "n", Type: "switch", Parameters: map[string]any{"cases": map[string]any{}}}),
		map[string]string{"nodes[1].parameters.cases": "must be a list"})
	wantProblems(t, checkNode(t, workflow.Node{ID: "n", Type: "switch"}),
		map[string]string{"nodes[1].parameters.cases": "required"})
}

func TestSwitchRun(t *testing.T) {
	reg := NewRegistry(Options{})
	cases := []any{
		map[string]any{"expression": "$trigger.country == 'DE'", "edge": "e_de"},
		map[string]any{"expression": "$trigger.country in ['DE', 'FR', 'IT']", "edge": "e_eu"},
	}
	withDefault := compileNode(t, reg, workflow.Node{ID: "n", Type: "switch", Parameters: map[string]any{"cases": cases, "default_edge": "e_world"}})
	noDefault := compileNode(t, reg, workflow.Node{ID: "n", Type: "switch", Parameters: map[string]any{"cases": cases}})
	tests := []struct {
		country string
		dflt    bool
		matched int
		route   []string
	}{
		{"DE", true, 0, []string{"e_de"}}, // the first true case wins
		{"FR", true, 1, []string{"e_eu"}},
		{"US", true, -1, []string{"e_world"}},
		{"US", false, -1, []string{}},
	}
	for _, tt := range tests {
		r := noDefault
		if tt.dflt {
			r = withDefault
		}
		res, err := run(t, r, map[string]any{"$trigger": map[string]any{"country": tt.country}})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(res.Output, map[string]any{"matched": tt.matched}) || res.Route == nil || !reflect.DeepEqual(res.Route, tt.route) {
			t.Errorf("%s (default %v): output %v route %#v, want matched %d route %v", tt.country, tt.dflt, res.Output, res.Route, tt.matched, tt.route)
		}
	}
	bad := compileNode(t, reg, workflow.Node{ID: "n", Type: "switch", Parameters: map[string]any{"cases": []any{
		map[string]any{"expression": "false", "edge": "a"}, map[string]any{"expression": "$trigger.country", "edge": "b"}}}})
	_, err := run(t, bad, map[string]any{"$trigger": map[string]any{"country": "DE"}})
	if ne := nodeError(t, err, CodeExpressionType, false); ne.Details["parameter"] != "parameters.cases[1].expression" {
		t.Errorf("details %v", ne.Details)
	}
}
