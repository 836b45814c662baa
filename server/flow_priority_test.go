package server_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestNodePriorityDistributed (issue 35, item 3): on the distributed
// runtime, a priority-9 execution's node messages are taken before a
// backlog of priority-2 executions' node messages. Two `rune worker`
// processes with two handlers each (and no prefetch beyond them) are held
// busy by a gated peer while 40
// priority-2 executions queue their first node's message; then a
// priority-9 one is triggered and the gate opens. Each workflow runs two
// http nodes, so the second one checks that successors carry the priority.
// In arrival order the priority-9 execution's second call would come after
// all 40 backlog executions' first calls; with priorities it comes after
// the four the workers had in hand and the few handlers taken meanwhile
// (well under half of the backlog).
func TestNodePriorityDistributed(t *testing.T) {
	const backlog = 40
	d := newDeployment(t)
	d.env = allowLoopback
	for range 2 {
		d.start(false, append([]string{"worker", "--postgres", d.pgURL, "--concurrency", "2", "--prefetch", "2"}, d.flags()...)...)
	}
	srv := d.server()
	d.waitHealthy(srv)
	st := d.store()
	a := newAPI(t, &target{url: "http://" + srv.addr, token: newToken(t, st, "prio"), store: st, output: d.logs.String})
	peer := newInflight(t, 0)
	gate := make(chan struct{})
	peer.gate = gate
	opened := false
	defer func() {
		if !opened {
			close(gate)
		}
	}()
	a.pushWorkflow(`{"id":"np","nodes":[{"id":"start","type":"trigger","trigger":true},` +
		`{"id":"one","type":"http","parameters":{"method":"GET","url":"` + peer.srv.URL + `/k/{{ $trigger.n }}"},"retry":{"max_attempts":1}},` +
		`{"id":"two","type":"http","parameters":{"method":"GET","url":"` + peer.srv.URL + `/k/{{ $trigger.n }}b"},"retry":{"max_attempts":1}}],` +
		`"edges":[{"id":"e1","src":"start","dst":"one"},{"id":"e2","src":"one","dst":"two"}]}`)
	trigger := func(n string, priority int) string {
		var x execution
		a.want(http.StatusCreated, "POST", fmt.Sprintf("/v1/workflows/np/executions?priority=%d", priority), []byte(fmt.Sprintf(`{"n":%q}`, n)), &x)
		return x.ID
	}
	dispatched := func(id string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			x, err := st.GetExecution(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if x.DispatchedAt != nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("execution %s not dispatched within 60 s", id)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	var low []string
	for i := range backlog {
		low = append(low, trigger(fmt.Sprintf("l%d", i), 2))
	}
	for _, id := range low {
		dispatched(id)
	}
	// Every handler is busy at the gate: the rest is the queue's backlog.
	deadline := time.Now().Add(60 * time.Second)
	for len(peer.calls()) < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("calls %v: the workers' four handlers not busy within 60 s", peer.calls())
		}
		time.Sleep(20 * time.Millisecond)
	}
	high := trigger("h", 9)
	dispatched(high)
	close(gate)
	opened = true
	a.waitStatus(high, "completed")
	deadline = time.Now().Add(2 * time.Minute)
	for len(peer.calls()) < 2*(backlog+1) {
		if time.Now().After(deadline) {
			t.Fatalf("calls %v: not all %d within 2 minutes", peer.calls(), 2*(backlog+1))
		}
		time.Sleep(50 * time.Millisecond)
	}
	calls := peer.calls()
	at := slices.Index(calls, "hb")
	firsts := 0 // backlog executions' first calls before the high one's second
	for _, c := range calls[:at] {
		if strings.HasPrefix(c, "l") && !strings.HasSuffix(c, "b") {
			firsts++
		}
	}
	t.Logf("calls: %v", calls)
	if firsts > backlog/2 {
		t.Fatalf("the priority-9 execution's second node ran after %d of the %d priority-2 executions' first nodes; want it ahead of most of the backlog (at most %d)",
			firsts, backlog, backlog/2)
	}
}
