package nodetest

import (
	"errors"
	"strings"
	"testing"

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
