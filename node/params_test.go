package node_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/workflow"
)

func check(params map[string]any, known ...string) (node.Params, *workflow.Problems) {
	var ps workflow.Problems
	n := &workflow.Node{ID: "n", Type: "t", Parameters: params}
	return node.CheckParams(workflow.NewNodeCheck(n, "nodes[0]", nil, &ps), known...), &ps
}

// Unknown parameters are reported by path, naming the known ones (or that
// the type takes none); String reports a missing, empty or mistyped one.
func TestCheckParams(t *testing.T) {
	_, ps := check(map[string]any{"url": "x", "urll": "y"}, "url")
	if len(*ps) != 1 || (*ps)[0].Path != "nodes[0].parameters.urll" || !strings.Contains((*ps)[0].Message, "known: [url]") {
		t.Errorf("unknown parameter: %v", *ps)
	}
	_, ps = check(map[string]any{"x": 1})
	if len(*ps) != 1 || !strings.Contains((*ps)[0].Message, "t nodes take no parameters") {
		t.Errorf("a type without parameters: %v", *ps)
	}
	p, ps := check(map[string]any{"a": 1, "b": "", "c": "ok"}, "a", "b", "c")
	if _, ok := p.String("a", true); ok {
		t.Error("a number read as a string")
	}
	if _, ok := p.String("b", true); ok {
		t.Error("an empty required string accepted")
	}
	if _, ok := p.String("missing", false); ok {
		t.Error("an absent optional string reported present")
	}
	if s, ok := p.String("c", true); !ok || s != "ok" {
		t.Errorf("String(c) = %q, %v", s, ok)
	}
	want := map[string]string{"nodes[0].parameters.a": "must be a string, not a number", "nodes[0].parameters.b": "required"}
	if len(*ps) != len(want) {
		t.Errorf("problems %v, want %v", *ps, want)
	}
	for _, pr := range *ps {
		if !strings.Contains(pr.Message, want[pr.Path]) || want[pr.Path] == "" {
			t.Errorf("problem %s: %q, want %q", pr.Path, pr.Message, want[pr.Path])
		}
	}
}

// Parameter failures are node errors naming the parameter, not retryable.
func TestParamErrors(t *testing.T) {
	for _, err := range []error{node.ExprError("url", errors.New("no such key")), node.InvalidParam("url", "not a URL: %q", "x"),
		node.TypeError("url", "want a string", 3)} {
		var ne *node.Error
		if !errors.As(err, &ne) || ne.Retryable || ne.Details["parameter"] != "parameters.url" || !strings.HasPrefix(ne.Message, "parameters.url") {
			t.Errorf("%v: want a non-retryable node error naming parameters.url", err)
		}
	}
	if !node.IsTemplate("a {{ $x }}") || node.IsTemplate("a { b } {") {
		t.Error("IsTemplate")
	}
}
