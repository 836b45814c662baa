package nodes

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	coordmem "github.com/rune-org/rune/coord/memory"
	"github.com/rune-org/rune/internal/testinfra"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/workflow"
)

// With idempotency_key: true a repeated run (a retry or redelivery after a
// successful call) returns the recorded response without calling again;
// without it every run calls.
func TestHTTPIdempotencyKeyOnce(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"charge": %d, "key": %q}`, n, r.Header.Get("Idempotency-Key"))
	}))
	defer srv.Close()
	reg := NewRegistry(Options{Effects: coordmem.NewEffects(0)})
	for _, once := range []bool{true, false} {
		calls.Store(0)
		r := compileNode(t, reg, workflow.Node{ID: "charge", Type: "http", Parameters: map[string]any{
			"method": "POST", "url": srv.URL, "idempotency_key": once}})
		var outs []any
		for range 2 {
			res, err := r.Run(t.Context(), &node.Input{Env: map[string]any{}, NodeID: "charge", ExecutionID: "ex1", Attempt: 1,
				IdempotencyKey: fmt.Sprintf("key-%v", once)})
			if err != nil {
				t.Fatal(err)
			}
			outs = append(outs, res.Output.(map[string]any)["body"])
		}
		want := int64(2)
		if once {
			want = 1
			if fmt.Sprint(outs[0]) != fmt.Sprint(outs[1]) {
				t.Errorf("recorded response %v differs from the first %v", outs[1], outs[0])
			}
		}
		if calls.Load() != want {
			t.Errorf("idempotency_key %v: %d calls, want %d", once, calls.Load(), want)
		}
	}
	ps := checkNode(t, workflow.Node{ID: "h", Type: "http", Parameters: map[string]any{"url": "http://x", "idempotency_key": "yes"}})
	wantProblems(t, ps, map[string]string{"nodes[1].parameters.idempotency_key": "must be true or false"})
}

// A retry after a refused connection (nothing sent) logs no warning that
// an earlier attempt may have sent; a redelivery of an attempt that began
// and never returned does.
func TestHTTPIdempotencyKeyRetryWarning(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	refused := srv.URL
	srv.Close() // its port now refuses connections
	var logs testinfra.Buffer
	effects := coordmem.NewEffects(0)
	reg := NewRegistry(Options{Effects: effects, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	r := compileNode(t, reg, workflow.Node{ID: "charge", Type: "http", Parameters: map[string]any{
		"method": "POST", "url": "{{ $trigger.url }}", "idempotency_key": true}})
	run := func(attempt int, url string) error {
		in := &node.Input{Env: map[string]any{"$trigger": map[string]any{"url": url}}, NodeID: "charge", ExecutionID: "ex1",
			Attempt: attempt, IdempotencyKey: "key-retry", Logger: slog.New(slog.NewTextHandler(&logs, nil))}
		_, err := r.Run(t.Context(), in)
		return err
	}
	if err := run(1, refused); err == nil {
		t.Fatal("a refused connection succeeded")
	}
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	defer ok.Close()
	if err := run(2, ok.URL); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "may have sent") {
		t.Errorf("the retry after a refused connection warns:\n%s", logs.String())
	}
	// An attempt whose delivery began (Begin) and died before returning:
	// its redelivery may send a second time, and says so.
	if _, err := effects.Begin(t.Context(), "key-died"); err != nil {
		t.Fatal(err)
	}
	in := &node.Input{Env: map[string]any{"$trigger": map[string]any{"url": ok.URL}}, NodeID: "charge", ExecutionID: "ex1",
		Attempt: 1, IdempotencyKey: "key-died", Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	if _, err := r.Run(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "an earlier attempt may have sent without recording it") {
		t.Errorf("the redelivery does not warn:\n%s", logs.String())
	}
}
