package server_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rune-org/rune/server"
)

// testRerunFromNode: a re-run from a failed http node runs that node and
// what follows with the context it saw, and never the nodes before it; a
// node inside a split, the trigger, an unknown node and a node that never
// ran are refused with 422 naming it.
func testRerunFromNode(t *testing.T, a *api, id string) {
	var first, second atomic.Int32
	var fail atomic.Bool
	fail.Store(true)
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/first":
			first.Add(1)
			fmt.Fprint(w, `{"token":"t-42"}`)
		case "/call":
			second.Add(1)
			if fail.Load() || r.URL.Query().Get("token") != "t-42" {
				http.Error(w, "down", http.StatusInternalServerError)
				return
			}
			fmt.Fprint(w, `{"sent":true}`)
		}
	}))
	defer peer.Close()
	a.pushWorkflow(wfDef(id, `
		{"id":"first","type":"http","parameters":{"method":"GET","url":"`+peer.URL+`/first"}},
		{"id":"call","type":"http","parameters":{"method":"GET","url":"`+peer.URL+`/call","query":{"token":"{{ $first.body.token }}"}},"retry":{"max_attempts":1}},
		{"id":"after","type":"set","parameters":{"values":{"done":"{{ $trigger.n }}"}}}`,
		`{"id":"e1","src":"start","dst":"first"},{"id":"e2","src":"first","dst":"call"},{"id":"e3","src":"call","dst":"after"}`))
	x := a.trigger(id, `{"n": 5}`)
	if got := a.waitStatus(x.ID, "completed", "failed", "halted"); got.Status != "failed" {
		t.Fatalf("first run: %s, want failed at call: %s", got.Status, got.Completion)
	}
	if first.Load() != 1 || second.Load() != 1 {
		t.Fatalf("first run: %d calls to first, %d to call; want 1 and 1", first.Load(), second.Load())
	}

	// Refused: each names the node.
	for body, want := range map[string]string{
		`{"from_node":"nope"}`:  `"nope"`,
		`{"from_node":"start"}`: `trigger`,
		`{"context":{}}`:        `from_node`,
	} {
		e := a.wantError(http.StatusUnprocessableEntity, server.CodeInvalidRequest, "POST", "/v1/executions/"+x.ID+"/rerun", []byte(body))
		if !strings.Contains(e.Error.Message, want) {
			t.Fatalf("rerun %s: %q, want it to name %s", body, e.Error.Message, want)
		}
	}
	e := a.wantError(http.StatusUnprocessableEntity, server.CodeInvalidRequest, "POST", "/v1/executions/"+x.ID+"/rerun", []byte(`{"from_node":"after"}`))
	if !strings.Contains(e.Error.Message, `"after" did not run`) {
		t.Fatalf("rerun from a node that never ran: %q", e.Error.Message)
	}
	a.wantError(http.StatusBadRequest, server.CodeInvalidJSON, "POST", "/v1/executions/"+x.ID+"/rerun", []byte(`{"from_node":"call","extra":1}`))

	fail.Store(false)
	var r execution
	a.want(http.StatusCreated, "POST", "/v1/executions/"+x.ID+"/rerun", []byte(`{"from_node":"call"}`), &r)
	if r.Trigger != "rerun:"+x.ID || r.ID == x.ID {
		t.Fatalf("rerun %+v", r)
	}
	done := a.waitStatus(r.ID, "completed", "failed", "halted")
	if done.Status != "completed" || !bytes.Contains(done.Completion, []byte(`"done":5`)) {
		t.Fatalf("rerun: %s %s, want completed with after's output", done.Status, done.Completion)
	}
	if first.Load() != 1 || second.Load() != 2 {
		t.Fatalf("after the rerun: %d calls to first, %d to call; want 1 (not run again) and 2", first.Load(), second.Load())
	}
	for _, n := range done.Nodes {
		if n.NodeID == "first" {
			t.Fatalf("the rerun shows a run of first, which it must not run: %+v", n)
		}
	}

	// A given context replaces the recorded one.
	a.want(http.StatusCreated, "POST", "/v1/executions/"+x.ID+"/rerun",
		[]byte(`{"from_node":"call","context":{"$trigger":{"n":9},"$first":{"body":{"token":"t-42"}}}}`), &r)
	done = a.waitStatus(r.ID, "completed", "failed", "halted")
	if done.Status != "completed" || !bytes.Contains(done.Completion, []byte(`"done":9`)) {
		t.Fatalf("rerun with a context: %s %s, want completed with done 9", done.Status, done.Completion)
	}
	if first.Load() != 1 {
		t.Fatalf("first ran again (%d calls)", first.Load())
	}

	// Inside a split: refused, naming the split to re-run from instead.
	split := id + "_split"
	a.pushWorkflow(wfDef(split, `
		{"id":"each","type":"split","parameters":{"input_array":"{{ $trigger.items }}"}},
		{"id":"double","type":"set","parameters":{"values":{"v":"{{ $item * 2 }}"}}},
		{"id":"agg","type":"aggregator"}`,
		`{"id":"e1","src":"start","dst":"each"},{"id":"e2","src":"each","dst":"double"},{"id":"e3","src":"double","dst":"agg"}`))
	y := a.trigger(split, `{"items":[1,2]}`)
	a.waitStatus(y.ID, "completed")
	e = a.wantError(http.StatusUnprocessableEntity, server.CodeInvalidRequest, "POST", "/v1/executions/"+y.ID+"/rerun", []byte(`{"from_node":"double"}`))
	if !strings.Contains(e.Error.Message, `"double"`) || !strings.Contains(e.Error.Message, `split "each"`) {
		t.Fatalf("rerun inside a split: %q, want it to name double and split each", e.Error.Message)
	}
	e = a.wantError(http.StatusUnprocessableEntity, server.CodeInvalidRequest, "POST", "/v1/executions/"+y.ID+"/rerun", []byte(`{"from_node":"agg"}`))
	if !strings.Contains(e.Error.Message, `"agg"`) {
		t.Fatalf("rerun from an aggregator: %q", e.Error.Message)
	}
	a.want(http.StatusCreated, "POST", "/v1/executions/"+y.ID+"/rerun", []byte(`{"from_node":"each"}`), &r)
	if done := a.waitStatus(r.ID, "completed", "failed"); done.Status != "completed" {
		t.Fatalf("rerun of the whole split: %s %s", done.Status, done.Completion)
	}
}

// testWorkflowPause: a paused workflow takes 100 triggers and holds them
// enqueued; its resume releases them, dispatched in the order they came.
func testWorkflowPause(t *testing.T, a *api, id string) {
	var mu sync.Mutex
	var order []string
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		order = append(order, r.URL.Query().Get("i"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{}`)
	}))
	defer peer.Close()
	a.pushWorkflow(wfDef(id, `{"id":"call","type":"http","parameters":{"method":"GET","url":"`+peer.URL+`/","query":{"i":"{{ $trigger.i }}"}}}`,
		`{"id":"e1","src":"start","dst":"call"}`))
	a.wantError(http.StatusNotFound, server.CodeNotFound, "POST", "/v1/workflows/"+id+"_nope/pause", nil)
	var p struct {
		WorkflowID string `json:"workflow_id"`
		Paused     bool   `json:"paused"`
		PausedAt   string `json:"paused_at"`
	}
	a.want(http.StatusOK, "POST", "/v1/workflows/"+id+"/pause", nil, &p)
	if !p.Paused || p.PausedAt == "" || p.WorkflowID != id {
		t.Fatalf("pause: %+v", p)
	}
	const n = 100
	ids := make([]string, n)
	for i := range n {
		ids[i] = a.trigger(id, fmt.Sprintf(`{"i":"%03d"}`, i)).ID
	}
	// Held: every one still enqueued once a later, unpaused workflow's
	// execution has been dispatched and completed.
	other := id + "_other"
	a.pushWorkflow(wfDef(other, `{"id":"s","type":"set","parameters":{"values":{"v":1}}}`, `{"id":"e1","src":"start","dst":"s"}`))
	a.waitStatus(a.trigger(other, `{}`).ID, "completed")
	for _, x := range ids {
		var got execution
		a.want(http.StatusOK, "GET", "/v1/executions/"+x, nil, &got)
		if got.Status != "enqueued" || got.DispatchedAt != nil {
			t.Fatalf("execution %s of the paused workflow is %s (dispatched %v), want enqueued", x, got.Status, got.DispatchedAt)
		}
	}
	a.want(http.StatusOK, "GET", "/v1/workflows/"+id+"/pause", nil, &p)
	if !p.Paused {
		t.Fatalf("GET pause: %+v, want paused", p)
	}
	a.want(http.StatusOK, "POST", "/v1/workflows/"+id+"/resume", nil, &p)
	if p.Paused {
		t.Fatalf("resume: %+v", p)
	}
	for _, x := range ids {
		a.waitStatus(x, "completed")
	}
	// Released in order: dispatched oldest first (the calls themselves
	// race once dispatched, so the order checked is the dispatch order).
	var prev *execution
	for _, x := range ids {
		var got execution
		a.want(http.StatusOK, "GET", "/v1/executions/"+x, nil, &got)
		if prev != nil && got.DispatchedAt.Before(*prev.DispatchedAt) {
			t.Fatalf("execution %s dispatched at %s, before the earlier trigger %s (%s)", got.ID, got.DispatchedAt, prev.ID, prev.DispatchedAt)
		}
		prev = &got
	}
	mu.Lock()
	defer mu.Unlock()
	if len(order) != n {
		t.Fatalf("%d calls, want %d", len(order), n)
	}
}
