package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/message"
)

// Issue 34: executions waiting for events survive kill -9 of a worker (the
// distributed runtime) and of the embedded server: events sent before and
// after the kill each resume their execution, and every execution
// completes once, with its own event's data.

const eventExecutions = 200

// eventWorkflowDef waits for order.paid keyed by $trigger.key (timeout 1 h,
// far beyond the test), then records the event's data.
const eventWorkflowDef = `{"id": "paid_e2e", "nodes": [
	{"id": "start", "type": "trigger", "trigger": true},
	{"id": "paid", "type": "wait_for_event", "parameters": {"event": "order.paid", "key": "{{ $trigger.key }}", "timeout": "1h"}},
	{"id": "done", "type": "set", "parameters": {"values": {"key": "{{ $paid.key }}", "n": "{{ $paid.data.n }}"}}}
], "edges": [
	{"id": "e1", "src": "start", "dst": "paid"},
	{"id": "e2", "src": "paid", "dst": "done"}
]}`

func eventKey(prefix string, i int) string { return fmt.Sprintf("%s-k%d", prefix, i) }

// TestKillWorkerWhileWaitingForEvents: two workers (each firing timers);
// 200 executions wait for their events; half the events are sent, worker 1
// is killed with kill -9, the other half is sent, and a new worker starts.
// Each execution completes once with its event's data.
func TestKillWorkerWhileWaitingForEvents(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "")
	workers := []*proc{c.startWorker("--scheduler"), c.startWorker("--scheduler")}
	wf := c.compile([]byte(eventWorkflowDef))
	cs := c.collect()
	ids := linearIDs(c.prefix, eventExecutions)
	c.startAll(wf, ids, func(i int) any { return map[string]any{"key": eventKey(c.prefix, i)} })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	send := func(i int) {
		// An event before its branch reached the node is kept and taken
		// when it does: matched may be 0 here.
		if _, err := c.engine.DeliverEvent(ctx, engine.EventSend{Name: "order.paid", Key: eventKey(c.prefix, i),
			Data: json.RawMessage(fmt.Sprintf(`{"n": %d}`, i)), IdempotencyKey: ids[i]}); err != nil {
			t.Fatalf("deliver event %d: %v", i, err)
		}
	}
	for i := range eventExecutions / 2 {
		send(i)
	}
	if err := workers[0].cmd.Process.Kill(); err != nil {
		t.Fatalf("kill -9 worker 1: %v", err)
	}
	workers[0].wait(t, 10*time.Second)
	workers = append(workers, c.startWorker("--scheduler"))
	for i := eventExecutions / 2; i < eventExecutions; i++ {
		send(i)
	}
	cs.waitDistinct(eventExecutions, 2*time.Minute)
	for _, w := range workers {
		if !w.exited() {
			w.terminate(t, 60*time.Second)
		}
	}
	cs.drain(c)
	checkEventCompletions(t, cs, ids, c.prefix, workers)
}

func checkEventCompletions(t *testing.T, cs *completions, ids []string, prefix string, procs []*proc) {
	t.Helper()
	cs.mu.Lock()
	defer cs.mu.Unlock()
	var problems []string
	for i, id := range ids {
		comp := cs.first[id]
		if comp == nil {
			problems = append(problems, id+": no completion")
			continue
		}
		done, _ := comp.FinalContext["$done"].(map[string]any)
		if comp.Status != message.CompletionCompleted || done["key"] != eventKey(prefix, i) || done["n"] != float64(i) {
			problems = append(problems, fmt.Sprintf("%s: %s, $done %v; want completed with key %s and n %d", id, comp.Status, done, eventKey(prefix, i), i))
		}
	}
	if p := cs.duplicateProblem(procs); p != "" {
		problems = append(problems, p)
	}
	if len(problems) > 0 {
		t.Fatalf("%d problem(s):\n%s", len(problems), strings.Join(problems[:min(len(problems), 20)], "\n"))
	}
}

// TestDurableServerKillWhileWaitingForEvents: the embedded server on a data
// directory; 100 executions wait for their events; half are sent, the
// server is killed with kill -9 and restarted on the directory, the other
// half are sent (the waits are durable). Each completes once, with its own
// event's data; sending an event again resumes nothing.
func TestDurableServerKillWhileWaitingForEvents(t *testing.T) {
	t.Parallel()
	const n = 100
	data := filepath.Join(t.TempDir(), "data")
	first := startEmbedded(t, "server", data)
	first.call(t, "POST", "/v1/workflows", json.RawMessage(eventWorkflowDef), http.StatusCreated, nil)
	for i := range n {
		first.call(t, "POST", "/v1/workflows/paid_e2e/executions", map[string]any{"key": fmt.Sprintf("k%d", i)}, http.StatusCreated, nil)
	}
	var sent struct {
		Matched int `json:"matched"`
	}
	send := func(s *embeddedServer, i int) {
		s.call(t, "POST", "/v1/events", map[string]any{"event": "order.paid", "key": fmt.Sprintf("k%d", i), "data": map[string]any{"n": i}},
			http.StatusAccepted, &sent)
	}
	for i := range n / 2 {
		send(first, i)
	}
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.wait(t, 30*time.Second)
	again := startEmbedded(t, "restarted server", data)
	for i := n / 2; i < n; i++ {
		send(again, i)
	}
	var xs []durableExecution
	waitFor(t, 120*time.Second, fmt.Sprintf("%d executions to end", n), func() bool {
		var page struct {
			Items []durableExecution `json:"items"`
		}
		again.call(t, "GET", "/v1/executions?workflow_id=paid_e2e&limit=500", nil, http.StatusOK, &page)
		xs = page.Items
		ended := 0
		for _, x := range xs {
			switch x.Status {
			case "completed", "failed", "halted", "cancelled":
				ended++
			}
		}
		return ended == n
	})
	if len(xs) != n {
		t.Fatalf("%d executions, want %d", len(xs), n)
	}
	for _, x := range xs {
		key, _ := x.Input["key"].(string)
		if x.Status != "completed" || x.Completion == nil {
			t.Errorf("execution %s (%s): %s; want completed", x.ID, key, x.Status)
			continue
		}
		done, _ := x.Completion.FinalContext["$done"].(map[string]any)
		if done["key"] != key || fmt.Sprintf("k%v", done["n"]) != key {
			t.Errorf("execution %s (%s): $done = %v, want its own event", x.ID, key, done)
		}
	}
	send(again, 0)
	if sent.Matched != 0 {
		t.Fatalf("an event sent again after its execution completed matched %d, want 0", sent.Matched)
	}
}
