package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rune-org/rune/message"
)

// Issue 36: a digest survives kill -9 of a worker (the distributed runtime)
// and of the embedded server during its window: each key still gets
// exactly one digest, holding every joined execution's value once, and
// every other execution of the key completes with digested_into its
// opener.

// digestWorkflowDef collects $trigger.n per $trigger.key for 15 s: long
// enough for the kill and the restart to fall inside the window on a
// loaded machine.
const digestWorkflowDef = `{"id": "digest_e2e", "nodes": [
	{"id": "start", "type": "trigger", "trigger": true},
	{"id": "dg", "type": "digest", "parameters": {"key": "{{ $trigger.key }}", "window": "15s", "value": "{{ $trigger.n }}"}},
	{"id": "after", "type": "set", "parameters": {"values": {"count": "{{ $dg.count }}"}}}
], "edges": [
	{"id": "e1", "src": "start", "dst": "dg"},
	{"id": "e2", "src": "dg", "dst": "after"}
]}`

// checkDigests checks the final contexts of one key's executions (by
// execution id; ns[id] is the n it sent): one opener whose $dg holds every
// n once, its own first, and ran "after"; every other digested into it.
func checkDigests(key string, finals map[string]map[string]any, ns map[string]float64) []string {
	var problems []string
	opener := ""
	for id, fc := range finals {
		dg, _ := fc["$dg"].(map[string]any)
		if _, ok := dg["items"]; ok {
			if opener != "" {
				problems = append(problems, fmt.Sprintf("key %s: two digests went out, from %s and %s", key, opener, id))
			}
			opener = id
		}
	}
	if opener == "" {
		return append(problems, fmt.Sprintf("key %s: no digest went out", key))
	}
	dg := finals[opener]["$dg"].(map[string]any)
	items, _ := dg["items"].([]any)
	var got, want []float64
	for _, it := range items {
		f, _ := it.(float64)
		got = append(got, f)
	}
	for _, n := range ns {
		want = append(want, n)
	}
	if len(items) == 0 || items[0] != ns[opener] {
		problems = append(problems, fmt.Sprintf("key %s: the digest's items %v do not start with its opener's %v", key, items, ns[opener]))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) || dg["count"] != float64(len(ns)) {
		problems = append(problems, fmt.Sprintf("key %s: digest of %v items %v, want each of %v once", key, dg["count"], got, want))
	}
	if after, _ := finals[opener]["$after"].(map[string]any); after["count"] != float64(len(ns)) {
		problems = append(problems, fmt.Sprintf("key %s: the opener's $after is %v", key, after))
	}
	for id, fc := range finals {
		if id == opener {
			continue
		}
		dg, _ := fc["$dg"].(map[string]any)
		if dg["digested_into"] != opener {
			problems = append(problems, fmt.Sprintf("key %s: execution %s has $dg %v, want digested_into %s", key, id, dg, opener))
		}
		if _, ran := fc["$after"]; ran {
			problems = append(problems, fmt.Sprintf("key %s: execution %s ran the node after the digest it joined", key, id))
		}
	}
	return problems
}

// TestKillWorkerDuringDigest: two workers (each firing timers); 20
// executions on two keys reach the digest; worker 1 is killed with kill -9
// as they run, a new worker starts, and the digests go out when their
// window closes.
func TestKillWorkerDuringDigest(t *testing.T) {
	t.Parallel()
	const n = 20
	c := newCluster(t, "")
	workers := []*proc{c.startWorker("--scheduler"), c.startWorker("--scheduler")}
	wf := c.compile([]byte(digestWorkflowDef))
	cs := c.collect()
	ids := linearIDs(c.prefix, n)
	keyOf := func(i int) string { return fmt.Sprintf("%s-user%d", c.prefix, i%2) }
	c.startAll(wf, ids, func(i int) any { return map[string]any{"key": keyOf(i), "n": i} })
	// Kill as soon as one has joined: the rest are in flight or queued.
	waitFor(t, time.Minute, "a first execution to join its digest", func() bool { return cs.distinct() > 0 })
	if err := workers[0].cmd.Process.Kill(); err != nil {
		t.Fatalf("kill -9 worker 1: %v", err)
	}
	workers[0].wait(t, 10*time.Second)
	workers = append(workers, c.startWorker("--scheduler"))
	cs.waitDistinct(n, 2*time.Minute)
	for _, w := range workers {
		if !w.exited() {
			w.terminate(t, 60*time.Second)
		}
	}
	cs.drain(c)
	cs.mu.Lock()
	defer cs.mu.Unlock()
	var problems []string
	for k := range 2 {
		finals := map[string]map[string]any{}
		ns := map[string]float64{}
		for i, id := range ids {
			if i%2 != k {
				continue
			}
			comp := cs.first[id]
			if comp == nil || comp.Status != message.CompletionCompleted {
				problems = append(problems, fmt.Sprintf("%s: completion %+v, want completed", id, comp))
				continue
			}
			finals[id], ns[id] = comp.FinalContext, float64(i)
		}
		problems = append(problems, checkDigests(keyOf(k), finals, ns)...)
	}
	if p := cs.duplicateProblem(workers); p != "" {
		problems = append(problems, p)
	}
	if len(problems) > 0 {
		t.Fatalf("%d problem(s):\n%s", len(problems), strings.Join(problems[:min(len(problems), 20)], "\n"))
	}
}

// TestDurableServerKillDuringDigest: the embedded server on a data
// directory; 5 executions of a key reach its digest, the server is killed
// with kill -9 and restarted on the directory, 5 more are started (they
// join the digest the first server opened), and the digest goes out once
// with all 10.
func TestDurableServerKillDuringDigest(t *testing.T) {
	t.Parallel()
	const n = 10
	data := filepath.Join(t.TempDir(), "data")
	first := startEmbedded(t, "server", data)
	first.call(t, "POST", "/v1/workflows", json.RawMessage(digestWorkflowDef), http.StatusCreated, nil)
	start := func(s *embeddedServer, i int) {
		s.call(t, "POST", "/v1/workflows/digest_e2e/executions", map[string]any{"key": "alice", "n": i}, http.StatusCreated, nil)
	}
	list := func(s *embeddedServer) []durableExecution {
		var page struct {
			Items []durableExecution `json:"items"`
		}
		s.call(t, "GET", "/v1/executions?workflow_id=digest_e2e&limit=500", nil, http.StatusOK, &page)
		return page.Items
	}
	for i := range n / 2 {
		start(first, i)
	}
	// Four joined (completed at once), the opener waits.
	waitFor(t, 60*time.Second, "4 executions to join the digest", func() bool {
		done := 0
		for _, x := range list(first) {
			if x.Status == "completed" {
				done++
			}
		}
		return done == n/2-1
	})
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.wait(t, 30*time.Second)
	again := startEmbedded(t, "restarted server", data)
	for i := n / 2; i < n; i++ {
		start(again, i)
	}
	var xs []durableExecution
	waitFor(t, 120*time.Second, fmt.Sprintf("%d executions to end", n), func() bool {
		xs = list(again)
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
	finals := map[string]map[string]any{}
	ns := map[string]float64{}
	var problems []string
	for _, x := range xs {
		if x.Status != "completed" || x.Completion == nil {
			problems = append(problems, fmt.Sprintf("execution %s: %s; want completed", x.ID, x.Status))
			continue
		}
		finals[x.ID] = x.Completion.FinalContext
		ns[x.ID], _ = x.Input["n"].(float64)
	}
	problems = append(problems, checkDigests("alice", finals, ns)...)
	if len(problems) > 0 {
		t.Fatalf("%d problem(s):\n%s", len(problems), strings.Join(problems, "\n"))
	}
}
