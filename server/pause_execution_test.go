package server_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/rune-org/rune/server"
)

// testExecutionPause (issue 34): a pause stops the execution's branches at
// their next node boundary and shows it paused; a node that would begin
// while paused does not run, nor does what follows a delay whose timer came
// due while paused; each resume lets them go, and the execution completes
// once with every node run once.
func testExecutionPause(t *testing.T, a *api, id string) {
	var calls [3]atomic.Int32
	release := make(chan struct{})
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/a":
			calls[0].Add(1)
			<-release // a is running when the pause comes
		case "/b":
			calls[1].Add(1)
		case "/c":
			calls[2].Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{}`)
	}))
	defer peer.Close()
	a.pushWorkflow(wfDef(id, `
		{"id":"a","type":"http","parameters":{"method":"GET","url":"`+peer.URL+`/a"},"retry":{"max_attempts":1}},
		{"id":"b","type":"http","parameters":{"method":"GET","url":"`+peer.URL+`/b"},"retry":{"max_attempts":1}},
		{"id":"d","type":"delay","parameters":{"delayMs":1500}},
		{"id":"c","type":"http","parameters":{"method":"GET","url":"`+peer.URL+`/c"},"retry":{"max_attempts":1}}`,
		`{"id":"e1","src":"start","dst":"a"},{"id":"e2","src":"a","dst":"b"},{"id":"e3","src":"b","dst":"d"},{"id":"e4","src":"d","dst":"c"}`))
	a.wantError(http.StatusNotFound, server.CodeNotFound, "POST", "/v1/executions/"+id+"_nope/pause", nil)

	x := a.trigger(id, `{}`)
	a.waitFor(x.ID, "running a", func(*execution) bool { return calls[0].Load() == 1 })
	var p execution
	a.want(http.StatusOK, "POST", "/v1/executions/"+x.ID+"/pause", nil, &p)
	if p.Status != server.StatusPaused {
		t.Fatalf("pause answered status %q, want paused", p.Status)
	}
	close(release)
	// a ends; b, its successor, parks before it begins.
	a.waitFor(x.ID, "b parked", func(x *execution) bool { return nodeStatus(x, "b") == "paused" })
	if got := a.waitStatus(x.ID, server.StatusPaused); calls[1].Load() != 0 {
		t.Fatalf("b ran while paused (%d calls); execution %s", calls[1].Load(), got.Status)
	}
	var r execution
	a.want(http.StatusOK, "POST", "/v1/executions/"+x.ID+"/resume", nil, &r)
	a.waitFor(x.ID, "d waiting", func(x *execution) bool { return nodeStatus(x, "d") == "waiting" })
	if calls[1].Load() != 1 {
		t.Fatalf("b ran %d times after the resume, want 1", calls[1].Load())
	}

	// Paused during the delay: its timer comes due while paused and parks.
	a.want(http.StatusOK, "POST", "/v1/executions/"+x.ID+"/pause", nil, &p)
	a.waitFor(x.ID, "d's timer parked", func(x *execution) bool { return nodeStatus(x, "d") == "paused" })
	if got := a.waitStatus(x.ID, server.StatusPaused); calls[2].Load() != 0 {
		t.Fatalf("c ran while paused (%d calls); execution %s", calls[2].Load(), got.Status)
	}
	a.want(http.StatusOK, "POST", "/v1/executions/"+x.ID+"/resume", nil, &r)
	done := a.waitStatus(x.ID, "completed", "failed", "halted", "cancelled")
	if done.Status != "completed" {
		t.Fatalf("after the resume: %s %s, want completed", done.Status, done.Completion)
	}
	for i, n := range []string{"a", "b", "c"} {
		if calls[i].Load() != 1 {
			t.Fatalf("%s ran %d times, want once", n, calls[i].Load())
		}
	}
	// An ended execution cannot be paused.
	a.wantError(http.StatusConflict, server.CodeConflict, "POST", "/v1/executions/"+x.ID+"/pause", nil)

	// A paused execution cancelled: its parked branch is dropped and it
	// ends cancelled; c never runs for it.
	y := a.trigger(id, `{}`)
	a.want(http.StatusOK, "POST", "/v1/executions/"+y.ID+"/pause", nil, &p)
	// Where the branch parks depends on when the pause lands: a, b or d.
	a.waitFor(y.ID, "a branch parked", func(x *execution) bool {
		return nodeStatus(x, "a") == "paused" || nodeStatus(x, "b") == "paused" || nodeStatus(x, "d") == "paused"
	})
	a.want(http.StatusAccepted, "POST", "/v1/executions/"+y.ID+"/cancel", nil, nil)
	if got := a.waitStatus(y.ID, "completed", "failed", "halted", "cancelled"); got.Status != "cancelled" || calls[2].Load() != 1 {
		t.Fatalf("a paused execution cancelled: %s, c called %d times; want cancelled, c not run again", got.Status, calls[2].Load())
	}
}

// nodeStatus is the status of node's run in x ("" when it has none).
func nodeStatus(x *execution, node string) string {
	for _, n := range x.Nodes {
		if n.NodeID == node {
			return n.Status
		}
	}
	return ""
}
