package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rune-org/rune/client"
	"github.com/rune-org/rune/embedded"
	"github.com/rune-org/rune/server"
	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/store/sqlite"
)

// TestRedispatchAfterLostMarkIsHarmless: a server claimed an execution and
// published its first messages, then died before MarkDispatched. After the
// lease another dispatcher claims and publishes it again while the first
// node is still running (a slow HTTP call): the coordinator's Start is
// idempotent and the first messages have the same ids, so the execution
// completes exactly once; the node may run twice (at-least-once, like a
// redelivery), and then sends the same Idempotency-Key both times.
func TestRedispatchAfterLostMarkIsHarmless(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var mu sync.Mutex
	hits := map[string]int{}
	keys := map[string]bool{}
	counter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		id := strings.TrimPrefix(r.URL.Path, "/hit/")
		hits[id]++
		first := hits[id] == 1
		keys[r.Header.Get("Idempotency-Key")] = true
		mu.Unlock()
		if first {
			time.Sleep(2500 * time.Millisecond) // still running when the 1 s lease ends
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{}`)
	}))
	defer counter.Close()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "rune.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rt, err := embedded.New(embedded.Options{ConsumeEvents: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	def := wfDef("again", `{"id":"call","type":"http","parameters":{"method":"GET","url":"`+counter.URL+`/hit/{{ $execution.id }}"},"retry":{"max_attempts":1}}`,
		`{"id":"e1","src":"start","dst":"call"}`)
	if _, err := st.CreateWorkflow(ctx, store.WorkflowInput{ID: "again", Definition: []byte(def), At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	x, _, err := st.CreateExecution(ctx, store.ExecutionInput{ID: "exec_again_1", WorkflowID: "again", Input: []byte(`{}`), At: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	// The "dead" server: claims with a 1 s lease and publishes, never marks.
	claimed, err := st.ClaimExecutions(ctx, store.Claim{Owner: "dead", Now: time.Now(), Lease: time.Second, Limit: 10})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	wf, err := rt.Engine.Compile([]byte(def))
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Start(ctx, rt.Broker, rt.Engine, wf, x.ID, map[string]any{}); err != nil {
		t.Fatal(err)
	}
	// The live server: its dispatcher claims it again once the lease ends.
	s, err := server.New(server.Config{Store: st, Broker: rt.Broker, Engine: rt.Engine, APIToken: "t", Dispatch: server.DispatchConfig{Lease: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	defer func() { cancel(); <-done }()
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	a := newAPI(t, &target{url: hs.URL, token: "t", store: st})
	a.waitFor(x.ID, "completed and dispatched again by the live server", func(e *execution) bool {
		var raw map[string]json.RawMessage
		a.want(http.StatusOK, "GET", "/v1/executions/"+x.ID, nil, &raw)
		return e.Status == "completed" && string(raw["dispatched_at"]) != "" && string(raw["dispatched_at"]) != "null"
	})
	mu.Lock()
	defer mu.Unlock()
	if hits[x.ID] < 1 || hits[x.ID] > 2 || len(keys) != 1 {
		t.Fatalf("the HTTP node ran %d times with %d idempotency keys, want once or twice with one key", hits[x.ID], len(keys))
	}
	t.Logf("the HTTP node ran %d time(s) with one idempotency key", hits[x.ID])
	var comps int
	evs, err := st.Events(ctx, store.EventFilter{ExecutionID: x.ID, Limit: 5000})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Kind == "completion" {
			comps++
		}
	}
	if comps != 1 {
		t.Fatalf("%d completions recorded, want 1", comps)
	}
}
