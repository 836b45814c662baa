package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestDurableServerPauseKill (issue 34): an execution paused on the
// embedded server stays paused across a kill -9 and restart (its delay's
// timer came due while paused and parked), runs nothing while paused, and
// after the resume completes once, its last node called once.
func TestDurableServerPauseKill(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{}`)
	}))
	t.Cleanup(peer.Close)
	data := filepath.Join(t.TempDir(), "data")
	first := startEmbedded(t, "server", data)
	first.call(t, "POST", "/v1/workflows", map[string]any{"id": "paused", "nodes": []any{
		map[string]any{"id": "start", "type": "trigger", "trigger": true},
		map[string]any{"id": "d", "type": "delay", "parameters": map[string]any{"delayMs": 1000}},
		map[string]any{"id": "c", "type": "http", "parameters": map[string]any{"method": "GET", "url": peer.URL + "/c"}},
	}, "edges": []any{
		map[string]any{"id": "e1", "src": "start", "dst": "d"},
		map[string]any{"id": "e2", "src": "d", "dst": "c"},
	}}, http.StatusCreated, nil)
	var x pausedExecution
	first.call(t, "POST", "/v1/workflows/paused/executions", map[string]any{}, http.StatusCreated, &x)
	first.call(t, "POST", "/v1/executions/"+x.ID+"/pause", nil, http.StatusOK, nil)
	// Parked: before d began, or when its timer came due.
	waitFor(t, 60*time.Second, "d parked", func() bool {
		first.call(t, "GET", "/v1/executions/"+x.ID, nil, http.StatusOK, &x)
		return x.Status == "paused" && x.node("d") == "paused"
	})
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.wait(t, 30*time.Second)

	again := startEmbedded(t, "restarted server", data)
	again.call(t, "GET", "/v1/executions/"+x.ID, nil, http.StatusOK, &x)
	if x.Status != "paused" || calls.Load() != 0 {
		t.Fatalf("after the restart: %s, c called %d times; want paused, 0", x.Status, calls.Load())
	}
	again.call(t, "POST", "/v1/executions/"+x.ID+"/resume", nil, http.StatusOK, nil)
	waitFor(t, 60*time.Second, "the execution to end", func() bool {
		again.call(t, "GET", "/v1/executions/"+x.ID, nil, http.StatusOK, &x)
		return x.Status == "completed" || x.Status == "failed" || x.Status == "cancelled"
	})
	if x.Status != "completed" || calls.Load() != 1 {
		t.Fatalf("after the resume: %s, c called %d times; want completed, once", x.Status, calls.Load())
	}
}

type pausedExecution struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Nodes  []struct {
		NodeID string `json:"node_id"`
		Status string `json:"status"`
	} `json:"nodes"`
}

func (x *pausedExecution) node(id string) string {
	for _, n := range x.Nodes {
		if n.NodeID == id {
			return n.Status
		}
	}
	return ""
}
