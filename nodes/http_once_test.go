package nodes

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	coordmem "github.com/rune-org/rune/coord/memory"
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
