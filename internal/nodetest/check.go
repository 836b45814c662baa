package nodetest

import (
	"errors"
	"strings"
	"testing"

	"github.com/rune-org/rune/expr"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/workflow"
)

// WantProblems checks that ps has exactly the given paths, each message
// containing the given text.
func WantProblems(t testing.TB, ps workflow.Problems, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for _, p := range ps {
		got[p.Path] = p.Message
	}
	for path, text := range want {
		msg, ok := got[path]
		if !ok {
			t.Errorf("no problem at %s (want %q); got %v", path, text, ps)
			continue
		}
		if !strings.Contains(msg, text) {
			t.Errorf("%s: %q, want it to contain %q", path, msg, text)
		}
	}
	for path, msg := range got {
		if _, ok := want[path]; !ok {
			t.Errorf("unexpected problem %s: %s", path, msg)
		}
	}
}

// NodeError checks that err is a *node.Error of code and retryability and
// returns it.
func NodeError(t testing.TB, err error, code string, retryable bool) *node.Error {
	t.Helper()
	var ne *node.Error
	if !errors.As(err, &ne) {
		t.Fatalf("error %v (%T), want a *node.Error %s", err, err, code)
	}
	if ne.Code != code || ne.Retryable != retryable {
		t.Fatalf("error %s (retryable %v): %s; want %s (retryable %v)", ne.Code, ne.Retryable, ne.Message, code, retryable)
	}
	return ne
}

// Compile compiles n with its type in reg, failing the test when the
// problems of its check (ps) are not none or the type cannot compile it.
func Compile(t testing.TB, reg *node.Registry, n workflow.Node, ps workflow.Problems) node.Runner {
	t.Helper()
	typ, ok := reg.Lookup(n.Type)
	if !ok {
		t.Fatalf("type %q not registered", n.Type)
	}
	if len(ps) > 0 {
		t.Fatalf("check: %v", ps)
	}
	r, err := typ.Compile(&n, expr.NewCompiler(expr.Limits{}))
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return r
}
