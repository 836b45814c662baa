package server_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/rune-org/rune/server"
)

// TestExecutionPauseWorkerKill (issue 34, distributed): a paused
// execution's parked branch survives a kill -9 of the worker that parked
// it; after the resume a new worker runs it and the execution completes
// once, its last node called once.
func TestExecutionPauseWorkerKill(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{}`)
	}))
	defer peer.Close()
	d := newDeployment(t)
	d.env = allowLoopback
	w := d.worker()
	d.scheduler()
	srv := d.server()
	d.waitHealthy(srv)
	st := d.store()
	a := newAPI(t, &target{url: "http://" + srv.addr, token: newToken(t, st, "pausekill"), store: st, output: d.logs.String})
	id := "pausekill"
	a.pushWorkflow(wfDef(id, `
		{"id":"d","type":"delay","parameters":{"delayMs":1000}},
		{"id":"c","type":"http","parameters":{"method":"GET","url":"`+peer.URL+`/c"},"retry":{"max_attempts":1}}`,
		`{"id":"e1","src":"start","dst":"d"},{"id":"e2","src":"d","dst":"c"}`))
	x := a.trigger(id, `{}`)
	a.want(http.StatusOK, "POST", "/v1/executions/"+x.ID+"/pause", nil, nil)
	a.waitFor(x.ID, "d parked", func(x *execution) bool {
		return x.Status == server.StatusPaused && nodeStatus(x, "d") == "paused"
	})
	w.kill()
	d.worker()
	if got := a.waitStatus(x.ID, server.StatusPaused); calls.Load() != 0 {
		t.Fatalf("c ran while paused (%d calls); %s", calls.Load(), got.Status)
	}
	a.want(http.StatusOK, "POST", "/v1/executions/"+x.ID+"/resume", nil, nil)
	done := a.waitStatus(x.ID, "completed", "failed", "halted", "cancelled")
	if done.Status != "completed" || calls.Load() != 1 {
		t.Fatalf("after the resume: %s, c called %d times; want completed, once", done.Status, calls.Load())
	}
}
