// Package e2e tests the distributed runtime end to end: real `rune worker`
// and `rune start` processes (the binary is built once per test run) on the
// real RabbitMQ and Redis, each test under a prefix of its own.
//
// The three tests that push 1,000 executions through two workers (plain,
// kill -9, close_all_connections) run one after another, because they
// compete for the CPU; the light ones run in parallel after them.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/client"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/internal/bench"
	"github.com/rune-org/rune/internal/testinfra"
	"github.com/rune-org/rune/message"
)

const (
	linearExecutions = 1000
	linearNodes      = 10
	// linearTimeout bounds one run of 1,000 executions (about 5 s on an
	// idle 2-core machine, see the test logs).
	linearTimeout = 120 * time.Second
)

// runLinear runs linearExecutions executions of the linear workflow on two
// workers, calls disrupt (when not nil) once 30% of them completed, and
// checks that every execution completed exactly once with the right result.
func runLinear(t *testing.T, c *cluster, disrupt func(workers []*proc)) {
	workers := []*proc{c.startWorker(), c.startWorker()}
	waitFor(t, 30*time.Second, "both workers consuming", func() bool {
		return inspectQueue(t, c, c.prefix+".workflow.execution").Consumers == 2
	})
	wf := c.compile(bench.LinearWorkflow(linearNodes))
	cs := c.collect()
	ids := linearIDs(c.prefix, linearExecutions)
	begin := time.Now()
	if disrupt != nil {
		// The workers are held (SIGSTOP) while the executions start, so the
		// disruption finds most of them in flight: on a slow machine two
		// workers once finished all 1,000 before the last was started.
		// Starting takes seconds, well inside the 10 s heartbeats.
		signalAll(t, workers, syscall.SIGSTOP)
	}
	c.startAll(wf, ids, func(i int) any { return map[string]any{"seed": i} })
	t.Logf("started %d executions in %v", len(ids), time.Since(begin).Round(time.Millisecond))
	if disrupt != nil {
		signalAll(t, workers, syscall.SIGCONT)
		waitFor(t, linearTimeout, "30% of the completions", func() bool { return cs.distinct() >= linearExecutions*3/10 })
		n := cs.distinct()
		if n == linearExecutions {
			t.Fatal("every execution completed before the disruption: it tested nothing")
		}
		t.Logf("disrupting after %d completions", n)
		disrupt(workers)
	}
	cs.waitDistinct(linearExecutions, linearTimeout)
	elapsed := time.Since(begin)
	t.Logf("%d executions of %d nodes completed in %v (%.0f node executions/s)",
		linearExecutions, linearNodes, elapsed.Round(time.Millisecond), float64(linearExecutions*linearNodes)/elapsed.Seconds())
	// Stopping the workers first means nothing is published after the
	// sentinel, so drain sees every completion, duplicates included.
	for _, w := range workers {
		if !w.exited() {
			w.terminate(t, 60*time.Second)
		}
	}
	cs.drain(c)
	var faulty []*proc // with no fault injected, no duplicate is allowed
	if disrupt != nil {
		faulty = workers
	}
	cs.checkLinear(ids, linearNodes, faulty)
}

func signalAll(t *testing.T, procs []*proc, sig syscall.Signal) {
	t.Helper()
	for _, p := range procs {
		if err := p.cmd.Process.Signal(sig); err != nil {
			t.Fatalf("signal %v: %v", sig, err)
		}
	}
}

// Two workers, 1,000 executions of a 10-node workflow: each completes once.
func TestTwoWorkers(t *testing.T) {
	c := newCluster(t, "")
	runLinear(t, c, nil)
}

// kill -9 of one of two workers mid-run: the other one finishes everything,
// each execution still completes once.
func TestKillWorker(t *testing.T) {
	c := newCluster(t, "")
	runLinear(t, c, func(w []*proc) {
		if err := w[0].cmd.Process.Kill(); err != nil {
			t.Fatalf("kill -9 worker 1: %v", err)
		}
		if code := w[0].wait(t, 10*time.Second); code != -1 {
			t.Fatalf("worker 1 exited with status %d, want killed (-1)", code)
		}
	})
}

// rabbitmqctl close_all_connections mid-run: the workers reconnect and each
// execution still completes once. The test runs on a RabbitMQ virtual host
// of its own, so closing all its connections disturbs no other test.
func TestCloseAllConnections(t *testing.T) {
	testinfra.RequireCommand(t, "rabbitmqctl")
	testinfra.RedisURL(t)
	vhost := "rune-e2e-" + testinfra.Name(t)
	c := newCluster(t, testinfra.OwnVhost(t, vhost))
	runLinear(t, c, func(w []*proc) {
		testinfra.Rabbitmqctl(t, "close_all_connections", "-p", vhost, "e2e")
		for _, p := range w {
			p.waitLog(t, "amqp broker: reconnected", 30*time.Second)
		}
	})
}

// Malformed messages on workflow.execution land in the dead-letter queue
// with the reason, while the worker goes on with the executions flowing.
func TestMalformedMessageDeadLettered(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "")
	w := c.startWorker()
	def := bench.LinearWorkflow(linearNodes)
	wf := c.compile(def)
	cs := c.collect()

	type dead struct {
		topic  broker.Topic
		raw    []byte
		reason string
	}
	var (
		mu    sync.Mutex
		deads []dead
	)
	dctx, dcancel := context.WithCancel(context.Background())
	dstopped := make(chan struct{})
	go func() {
		defer close(dstopped)
		err := c.master.Consume(dctx, broker.DeadLetter, broker.ConsumeOptions{}, func(_ context.Context, d *broker.Delivery) error {
			mu.Lock()
			defer mu.Unlock()
			deads = append(deads, dead{d.Topic, d.Raw, d.Reason})
			return nil
		})
		if err != nil {
			t.Errorf("consume dead letters: %v", err)
		}
	}()
	stopDead := func() { dcancel(); <-dstopped }
	t.Cleanup(stopDead)

	ids := linearIDs(c.prefix, 201)
	seed := func(i int) any { return map[string]any{"seed": i} }
	c.startAll(wf, ids[:100], seed)

	garbage := []byte("{this is not JSON")
	noExec, err := json.Marshal(map[string]any{
		"message_id": "m_no_exec", "workflow_id": "bench_linear", "current_node": "step_1", "from_node": "start",
		"attempt": 1, "execution_started_at": time.Now().UTC(), "workflow_definition": json.RawMessage(def),
		"accumulated_context": map[string]any{"$trigger": map[string]any{"seed": 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for _, body := range [][]byte{garbage, noExec} {
		if err := c.master.PublishRaw(ctx, broker.Execution, body); err != nil {
			t.Fatalf("PublishRaw: %v", err)
		}
	}
	c.startAll(wf, ids[100:200], func(i int) any { return seed(100 + i) })

	waitFor(t, 30*time.Second, "two dead letters", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(deads) >= 2
	})
	// An execution started after the dead-lettering still completes.
	c.startAll(wf, ids[200:], func(int) any { return seed(200) })
	cs.waitDistinct(len(ids), 60*time.Second)
	if w.exited() {
		t.Fatalf("the worker exited: %v", w.err)
	}
	w.terminate(t, 30*time.Second)
	cs.drain(c)
	cs.checkLinear(ids, linearNodes, nil) // no fault: no duplicate allowed

	// Nothing else was dead-lettered: what the consumer did not take is
	// still in the queue once it stopped.
	stopDead()
	left := queueLength(t, c, c.prefix+".workflow.dlq")
	mu.Lock()
	defer mu.Unlock()
	if len(deads) != 2 || left != 0 {
		t.Errorf("got %d dead letters (+%d left in the queue), want 2: %+v", len(deads), left, deads)
	}
	want := map[string][]string{
		string(garbage): {"decode", "workflow.execution", "invalid character"},
		string(noExec):  {"decode", "execution_id", "missing"},
	}
	for _, d := range deads {
		words, ok := want[string(d.raw)]
		if !ok {
			t.Errorf("unexpected dead letter on %s: %q (reason %q)", d.topic, d.raw, d.reason)
			continue
		}
		delete(want, string(d.raw))
		if d.topic != broker.Execution {
			t.Errorf("dead letter %q: topic %q, want %q", d.raw, d.topic, broker.Execution)
		}
		for _, w := range words {
			if !strings.Contains(d.reason, w) {
				t.Errorf("dead letter %.40q: reason %q does not mention %q", d.raw, d.reason, w)
			}
		}
		t.Logf("dead letter %.40q: reason %q", d.raw, d.reason)
	}
	for raw := range want {
		t.Errorf("no dead letter for %.60q", raw)
	}
}

// A worker receiving SIGTERM while an http node runs finishes that node,
// publishes its successor, takes nothing more and exits 0; a second worker
// finishes the execution, without running the http node again.
func TestSIGTERMFinishesNodeInFlight(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "")
	const hold = time.Second
	var hits atomic.Int32
	arrived := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		select {
		case arrived <- struct{}{}:
		default:
		}
		select {
		case <-time.After(hold):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok": true}`)
	}))
	t.Cleanup(srv.Close)
	def := fmt.Sprintf(`{"id": "sigterm", "nodes": [
		{"id": "start", "type": "trigger", "trigger": true},
		{"id": "slow", "type": "http", "parameters": {"method": "GET", "url": %q, "timeout": "20s"}},
		{"id": "after", "type": "set", "parameters": {"values": {"code": "{{ $slow.status }}", "ok": "{{ $slow.body.ok }}"}}}
	], "edges": [{"id": "e1", "src": "start", "dst": "slow"}, {"id": "e2", "src": "slow", "dst": "after"}]}`, srv.URL+"/slow")

	w1 := c.startWorker(allowLoopback...)
	wf := c.compile([]byte(def))
	execID := "e2e_" + c.prefix + "_sigterm"
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	events, err := c.master.Follow(ctx, execID)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Start(ctx, c.master, c.engine, wf, execID, map[string]any{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-arrived:
	case <-ctx.Done():
		t.Fatal("the http node's request never arrived")
	}
	signalled := time.Now()
	w1.terminate(t, 30*time.Second)
	t.Logf("worker 1 exited 0, %v after SIGTERM", time.Since(signalled).Round(time.Millisecond))
	if d := time.Since(signalled); d < hold/2 {
		t.Errorf("worker 1 exited %v after SIGTERM, before the node could finish (it holds %v)", d, hold)
	}

	var statuses []*message.NodeStatus
	var comp *message.Completion
	next := func(deadline <-chan time.Time) {
		t.Helper()
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("the follower stopped")
			}
			switch b := ev.Body.(type) {
			case *message.NodeStatus:
				statuses = append(statuses, b)
			case *message.Completion:
				comp = b
			}
		case <-deadline:
			t.Fatalf("timed out following the execution; statuses so far: %s", describe(statuses))
		}
	}
	// Worker 1 reported the http node's success before exiting...
	deadline := time.After(10 * time.Second)
	for !hasStatus(statuses, "slow", message.StatusSuccess) {
		next(deadline)
	}
	w2Started := time.Now()
	w2 := c.startWorker(allowLoopback...)
	// ...and the successor ran on worker 2.
	deadline = time.After(30 * time.Second)
	for comp == nil {
		next(deadline)
	}
	if comp.Status != message.CompletionCompleted {
		t.Fatalf("completion %s, failure %+v; statuses %s", comp.Status, comp.FailureReason, describe(statuses))
	}
	got := comp.FinalContext["$after"]
	if want := map[string]any{"code": float64(200), "ok": true}; !reflect.DeepEqual(got, want) {
		t.Errorf("$after = %v, want %v", got, want)
	}
	var slow []string
	for _, s := range statuses {
		switch s.NodeID {
		case "slow":
			slow = append(slow, s.Status)
		case "after":
			if s.ExecutedAt.Before(w2Started) {
				t.Errorf("node after reported %s at %v, before worker 2 started (%v): worker 1 took it after SIGTERM",
					s.Status, s.ExecutedAt, w2Started)
			}
		}
	}
	if want := []string{message.StatusRunning, message.StatusSuccess}; !reflect.DeepEqual(slow, want) {
		t.Errorf("statuses of the http node: %v, want %v", slow, want)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("the http node sent %d requests, want 1", n)
	}
	w2.terminate(t, 30*time.Second)
}

func hasStatus(ss []*message.NodeStatus, nodeID, status string) bool {
	for _, s := range ss {
		if s.NodeID == nodeID && s.Status == status {
			return true
		}
	}
	return false
}

func describe(ss []*message.NodeStatus) string {
	var b strings.Builder
	for _, s := range ss {
		fmt.Fprintf(&b, " %s:%s", s.NodeID, s.Status)
	}
	return b.String()
}

// `rune start --wait --json` prints the same CompletionMessage as `rune run
// --json`, and exits with the same status, for every example.
func TestStartWaitMatchesRun(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "")
	// The scheduler fires the timers of delay and wait nodes. Loopback is
	// open as for rune run: retry_fallback calls 127.0.0.1:9 (closed).
	c.startWorker(append([]string{"--scheduler"}, allowLoopback...)...)
	files, err := filepath.Glob("../examples/*.json")
	if err != nil {
		t.Fatal(err)
	}
	var examples []string
	for _, f := range files {
		if strings.HasSuffix(f, ".input.json") || strings.HasSuffix(f, ".credentials.json") {
			continue
		}
		// An example with credentials sends to servers this test does not
		// run (the welcome series: notify_test.go runs it with its catchers).
		if _, err := os.Stat(strings.TrimSuffix(f, ".json") + ".credentials.json"); err == nil {
			continue
		}
		// issue 34: a workflow node's child is started by a server or by
		// `rune run --workflows`, not by `rune start` (children_test.go
		// in cmd/rune and server run those examples).
		if raw, err := os.ReadFile(f); err == nil && strings.Contains(string(raw), `"type": "workflow"`) {
			continue
		}
		examples = append(examples, f)
	}
	if len(examples) == 0 {
		t.Fatal("no examples found in ../examples")
	}
	for _, ex := range examples {
		name := strings.TrimSuffix(filepath.Base(ex), ".json")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			abs, err := filepath.Abs(ex)
			if err != nil {
				t.Fatal(err)
			}
			args := []string{abs, "--json"}
			if in := strings.TrimSuffix(abs, ".json") + ".input.json"; fileExists(in) {
				args = append(args, "--input", "@"+in)
			}
			runOut, runErr, runCode := runCLI(t, 60*time.Second, append([]string{"run"}, args...)...)
			startArgs := append(append([]string{"start"}, args...), "--wait")
			startOut, startErr, startCode := runCLI(t, 60*time.Second, append(startArgs, c.serverArgs()...)...)
			if runCode != startCode {
				t.Errorf("exit status: run %d, start --wait %d", runCode, startCode)
			}
			run, start := decodeCompletion(t, "run", runOut, runErr), decodeCompletion(t, "start", startOut, startErr)
			for _, k := range []string{"workflow_id", "status", "final_context", "failure_reason"} {
				if !reflect.DeepEqual(run[k], start[k]) {
					t.Errorf("%s differs:\n  run:   %s\n  start: %s", k, jsonOf(run[k]), jsonOf(start[k]))
				}
			}
			for _, m := range []map[string]any{run, start} {
				for _, k := range []string{"workflow_id", "status", "final_context", "failure_reason", "execution_id", "completed_at", "total_duration_ms"} {
					delete(m, k)
				}
			}
			if len(run) != 0 || len(start) != 0 {
				t.Errorf("fields not compared: run %v, start %v", run, start)
			}
			t.Logf("%s: exit status %d, status %s", name, runCode, jsonOf(decodeCompletion(t, "run", runOut, runErr)["status"]))
		})
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func decodeCompletion(t *testing.T, what, stdout, stderr string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(stdout), &m); err != nil {
		t.Fatalf("%s: stdout is not one JSON object: %v\nstdout:\n%s\nstderr:\n%s", what, err, stdout, stderr)
	}
	return m
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// benchThroughput is the throughput run of `rune bench --json`.
type benchThroughput struct {
	Executions     int     `json:"executions"`
	NodeExecutions int     `json:"node_executions"`
	Failed         int     `json:"failed_executions"`
	Statuses       int     `json:"status_messages"`
	NodesPerSecond float64 `json:"node_executions_per_second"`
	HopP50         int64   `json:"hop_p50_ns"`
}

// benchJSON runs `rune bench args… --json` and returns what it printed on
// stdout and stderr, failing the test unless it exits 0.
func benchJSON(t *testing.T, timeout time.Duration, args ...string) (out, errOut string) {
	t.Helper()
	out, errOut, code := runCLI(t, timeout, append(append([]string{"bench"}, args...), "--json")...)
	if code != 0 {
		t.Fatalf("rune bench %s: exit status %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
	}
	return out, errOut
}

// `rune bench --spawn-workers` measures the distributed runtime in one
// command and leaves nothing behind.
func TestBenchSpawnWorkers(t *testing.T) {
	amqpURL, redisURL := testinfra.AMQPURL(t), testinfra.RedisURL(t)
	out, errOut := benchJSON(t, 120*time.Second, "--amqp", amqpURL, "--redis", redisURL, "--spawn-workers", "1",
		"--executions", "300", "--inflight", "100", "--idle-executions", "5", "--raw-hops", "1000")
	var rep struct {
		Prefix     string          `json:"prefix"`
		Workers    int             `json:"spawned_workers"`
		Throughput benchThroughput `json:"throughput"`
		Idle       struct {
			Executions int   `json:"executions"`
			HopP50     int64 `json:"hop_p50_ns"`
		} `json:"idle"`
		Raw struct {
			Hops       int
			HopsPerSec float64
		} `json:"raw_ceiling"`
		Ratio float64 `json:"ratio_to_raw_ceiling"`
		Sizes struct {
			Execution int     `json:"execution_bytes"`
			Status    int     `json:"status_bytes"`
			PerNode   float64 `json:"statuses_per_node"`
		} `json:"message_sizes"`
		RawSame struct {
			Hops       int
			HopsPerSec float64
			Pattern    struct {
				Body       int `json:"body_bytes"`
				Statuses   int `json:"statuses"`
				StatusBody int `json:"status_bytes"`
				InFlight   int `json:"inflight"`
			} `json:"pattern"`
		} `json:"raw_ceiling_same_messages"`
		RatioSame float64 `json:"ratio_to_raw_ceiling_same_messages"`
		CPU       struct {
			Worker   int64 `json:"worker_ns"`
			RabbitMQ int64 `json:"rabbitmq_ns"`
			Bench    int64 `json:"bench_ns"`
		} `json:"cpu_per_node"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("rune bench --json: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	// CPU per node of every process the machine shows: the broker's when it
	// runs here (its /proc entries need root to be read).
	local := strings.Contains(amqpURL, "@127.0.0.1:") || strings.Contains(amqpURL, "@localhost:")
	if rep.CPU.Worker <= 0 || rep.CPU.Bench <= 0 || (local && os.Geteuid() == 0 && rep.CPU.RabbitMQ <= 0) {
		t.Errorf("CPU per node %+v, want the worker's, the bench's and (local, root) RabbitMQ's:\n%s", rep.CPU, out)
	}
	tp := rep.Throughput
	// Status messages (issue 11): one per hop, the trigger's included, and a
	// hop is at most one node (fused, often the whole chain). Statuses and
	// completions come on queues of their own, so the bench may stop
	// counting with the last executions' last statuses still on the way.
	allStatuses := 300 * (linearNodes + 1)
	if rep.Workers != 1 || tp.Executions != 300 || tp.Failed != 0 || tp.NodeExecutions != 300*linearNodes ||
		tp.Statuses > allStatuses || tp.Statuses < 2*300-100 || tp.NodesPerSecond <= 0 || tp.HopP50 <= 0 ||
		rep.Idle.Executions != 5 || rep.Idle.HopP50 <= 0 || rep.Raw.Hops != 1000 || rep.Raw.HopsPerSec <= 0 || rep.Ratio <= 0 {
		t.Errorf("unexpected report:\n%s", out)
	}
	// The second ceiling moves the workflow's own messages of an unfused
	// hop: a node's message carries the definition's reference and the
	// context (issue 11: at most 600 bytes), and a node sends one status
	// message.
	same := rep.RawSame
	if rep.Sizes.Execution < 100 || rep.Sizes.Execution > 600 || rep.Sizes.Status < 100 || rep.Sizes.PerNode != 1 || same.Hops != 1000 || same.HopsPerSec <= 0 ||
		same.Pattern.Body != rep.Sizes.Execution || same.Pattern.Statuses != 1 || same.Pattern.StatusBody != rep.Sizes.Status || same.Pattern.InFlight != 100 || rep.RatioSame <= 0 {
		t.Errorf("unexpected same-message ceiling:\n%s", out)
	}
	t.Logf("%.0f node executions/s, %.0f raw hops/s (ratio %.2f)", tp.NodesPerSecond, rep.Raw.HopsPerSec, rep.Ratio)
	if !strings.HasPrefix(rep.Prefix, "bench-") {
		t.Fatalf("prefix %q, want a made-up bench-… one", rep.Prefix)
	}
	c := &cluster{t: t, prefix: rep.Prefix, amqpURL: amqpURL}
	for _, q := range []string{"workflow.execution", "workflow.completion", "workflow.node.status"} {
		if queueExists(t, c, rep.Prefix+"."+q) {
			t.Errorf("queue %s.%s is left behind", rep.Prefix, q)
		}
	}
}

// `rune bench --chain all` (issue 11): the set chain fused, the set chain
// unfused and the http chain in one run, each on workers and a deployment
// of its own, every ratio over the one raw ceiling measured after the last.
func TestBenchAllChains(t *testing.T) {
	amqpURL, redisURL := testinfra.AMQPURL(t), testinfra.RedisURL(t)
	const execs = 60
	out, errOut := benchJSON(t, 180*time.Second, "--amqp", amqpURL, "--redis", redisURL, "--spawn-workers", "1",
		"--executions", strconv.Itoa(execs), "--inflight", "30", "--idle-executions", "3", "--raw-hops", "300", "--chain", "all",
		"--base", binary(t)) // this build as its own base: the plumbing, not a figure
	type run struct {
		Prefix     string          `json:"prefix"`
		Chain      string          `json:"chain"`
		NoFuse     bool            `json:"no_fuse"`
		Throughput benchThroughput `json:"throughput"`
		Idle       struct {
			Executions int `json:"executions"`
		} `json:"idle"`
		Raw struct {
			Hops int
		} `json:"raw_ceiling"`
		Ratio     float64 `json:"ratio_to_raw_ceiling"`
		RatioSame float64 `json:"ratio_to_raw_ceiling_same_messages"`
		CallP50   int64   `json:"http_call_other_process_p50_ns"`
		TimesBase float64 `json:"times_base"`
	}
	var rep struct {
		Base struct {
			NodesPerSecond float64 `json:"node_executions_per_second"`
		}
		Runs []run
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("rune bench --json: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	if rep.Base.NodesPerSecond <= 0 {
		t.Errorf("no node rate of the base:\n%s", out)
	}
	if len(rep.Runs) != 3 {
		t.Fatalf("%d runs, want 3:\n%s", len(rep.Runs), out)
	}
	prefixes := map[string]bool{}
	for i, want := range []struct {
		chain  string
		noFuse bool
	}{{"set", false}, {"set", true}, {"http", false}} {
		r := rep.Runs[i]
		tp := r.Throughput
		if r.Chain != want.chain || r.NoFuse != want.noFuse || tp.Executions != execs || tp.Failed != 0 ||
			tp.NodeExecutions != execs*linearNodes || tp.NodesPerSecond <= 0 || r.Idle.Executions != 3 ||
			r.Raw.Hops != 300 || r.Ratio <= 0 || r.RatioSame <= 0 || (want.chain == "http") != (r.CallP50 > 0) ||
			(want.chain == "set") != (r.TimesBase > 0) {
			t.Errorf("run %d, want chain %s, no_fuse %v: %+v", i+1, want.chain, want.noFuse, r)
		}
		if !strings.HasPrefix(r.Prefix, "bench-") || prefixes[r.Prefix] {
			t.Errorf("run %d: prefix %q, want a bench-… one of its own", i+1, r.Prefix)
		}
		prefixes[r.Prefix] = true
		c := &cluster{t: t, prefix: r.Prefix, amqpURL: amqpURL}
		if queueExists(t, c, r.Prefix+".workflow.execution") {
			t.Errorf("run %d: queue %s.workflow.execution is left behind", i+1, r.Prefix)
		}
	}
	// The unfused workers really ran every node as a hop of its own: a
	// status message each (the last executions' may still be on the way
	// when the bench stops counting), where the fused chain sends about two
	// an execution (the trigger's and its one hop's; a hop that reaches the
	// fusing's time bound on a loaded machine ends early and adds one).
	if fused, unfused := rep.Runs[0].Throughput.Statuses, rep.Runs[1].Throughput.Statuses; fused > unfused/2 || unfused < execs*linearNodes/2 {
		t.Errorf("status messages: fused %d, unfused %d; want at least %d unfused and at most half as many fused", fused, unfused, execs*linearNodes/2)
	}
}

// `rune bench --mode timers` with a spawned worker: the worker's scheduler
// fires part (a)'s waits, and part (b)'s backlog, in a timer store of its
// own, is claimed by the bench alone — every due timer once, none early.
func TestBenchTimersSpawnWorkers(t *testing.T) {
	amqpURL, redisURL := testinfra.AMQPURL(t), testinfra.RedisURL(t)
	out, errOut := benchJSON(t, 180*time.Second, "--mode", "timers", "--amqp", amqpURL, "--redis", redisURL,
		"--spawn-workers", "1", "--executions", "50", "--wait", "1s", "--start-rate", "100", "--pending", "2000", "--rate", "100")
	var rep struct {
		Lateness struct {
			Executions int     `json:"executions"`
			StartRate  int     `json:"start_rate"`
			Achieved   float64 `json:"achieved_start_rate"`
			Spread     int64   `json:"start_spread_ns"`
			Early      int     `json:"early"`
			Duplicates int     `json:"duplicates"`
			Failed     int     `json:"failed_executions"`
		} `json:"lateness"`
		Backlog struct {
			Pending   int   `json:"pending"`
			Fired     int   `json:"fired"`
			Early     int   `json:"early"`
			Duplicate int   `json:"duplicate"`
			After     int64 `json:"redis_used_memory_after"`
		} `json:"backlog"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("rune bench --json: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	l, b := rep.Lateness, rep.Backlog
	if l.Executions != 50 || l.Early != 0 || l.Duplicates != 0 || l.Failed != 0 {
		t.Errorf("part (a): %+v, want 50 executions, none early, duplicated or failed", l)
	}
	// 50 starts at 100/s: the last no earlier than 490 ms after the first.
	if l.StartRate != 100 || l.Spread < int64(490*time.Millisecond) || l.Achieved <= 0 {
		t.Errorf("part (a): start rate %d, spread %s, achieved %.1f/s; want 100, at least 490ms, measured", l.StartRate, time.Duration(l.Spread), l.Achieved)
	}
	if b.Pending != 2000 || b.Fired < 900 || b.Early != 0 || b.Duplicate != 0 || b.After <= 0 {
		t.Errorf("part (b): %+v, want 2000 pending, about 1000 fired (100/s for 10 s), none early or twice", b)
	}
}

// The duplicate check every end-to-end test makes is no formality: a
// completion published twice, with no fault to explain it, is caught; one
// a worker logged publishing again in the publish-to-record window is not.
func TestDuplicateCompletionCaught(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "")
	cs := c.collect()
	ids := linearIDs(c.prefix, 2)
	publish := func(id string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		comp := &message.Completion{WorkflowID: "dup", ExecutionID: id, Status: message.CompletionCompleted,
			FinalContext: map[string]any{}, CompletedAt: time.Unix(1_700_000_000, 0).UTC()}
		// As the engine publishes a completion: the execution id as message id.
		if err := c.master.Publish(ctx, broker.Message{Topic: broker.Completion, ID: id, Key: id, Body: comp}).Wait(ctx); err != nil {
			t.Fatalf("publish the completion of %s: %v", id, err)
		}
	}
	publish(ids[0])
	publish(ids[1])
	publish(ids[1]) // the same completion, published twice
	cs.waitDistinct(2, 30*time.Second)
	cs.drain(c)
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.dups != 1 || len(cs.mismatches) != 0 {
		t.Fatalf("%d duplicates (%v), %d mismatches: want the second publish counted as one identical duplicate", cs.dups, cs.dupExecs, len(cs.mismatches))
	}
	p := cs.duplicateProblem(nil)
	if !strings.Contains(p, "1 duplicate completion message") || !strings.Contains(p, ids[1]) {
		t.Fatalf("no fault injected: the duplicate check says %q, want it to name the duplicate of %s", p, ids[1])
	}
	worker := &proc{name: "worker"}
	fmt.Fprintf(&worker.stderr, "level=WARN msg=%q execution_id=%s\n", engine.RepublishLog, ids[1])
	if p := cs.duplicateProblem([]*proc{worker}); p != "" {
		t.Fatalf("a duplicate its worker logged publishing again in the window was refused: %s", p)
	}
}
