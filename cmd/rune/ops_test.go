package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rune-org/rune/broker/amqp"
	"github.com/rune-org/rune/distributed"
	"github.com/rune-org/rune/internal/testinfra"
	"github.com/rune-org/rune/metrics/metricstest"
)

// jsonLines decodes the JSON log lines written so far.
func jsonLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line is not JSON (--log-format json): %q", sc.Text())
		}
		out = append(out, m)
	}
	return out
}

// serveCommand runs a long-running rune command until the test ends (or
// stop is called) and returns the address of its metrics server, read from
// its JSON log.
func serveCommand(t *testing.T, args ...string) (addr string, logs *testinfra.Buffer, stop func() int) {
	t.Helper()
	return serveCommandEnv(t, func(string) string { return "" }, args...)
}

// serveCommandEnv is serveCommand with the environment getenv.
func serveCommandEnv(t *testing.T, getenv func(string) string, args ...string) (addr string, logs *testinfra.Buffer, stop func() int) {
	t.Helper()
	logs = &testinfra.Buffer{}
	env := &cliEnv{stdout: io.Discard, stderr: logs, getenv: getenv}
	ctx, cancel := context.WithCancel(context.Background())
	code := make(chan int, 1)
	go func() { code <- runMain(ctx, env, args) }()
	var once sync.Once
	exit := -1
	stop = func() int {
		once.Do(func() { cancel(); exit = <-code })
		return exit
	}
	t.Cleanup(func() { stop() })
	for deadline := time.Now().Add(60 * time.Second); addr == ""; {
		for _, l := range jsonLines(t, logs.String()) {
			if l["msg"] == "metrics and health checks listening" {
				addr, _ = l["addr"].(string)
			}
		}
		select {
		case c := <-code:
			t.Fatalf("rune %s exited %d before serving metrics:\n%s", args[0], c, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("rune %s never served metrics:\n%s", args[0], logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return addr, logs, stop
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A distributed run: `rune worker --scheduler --metrics-addr` answers its
// health checks, and after `rune start --wait` its /metrics counts what
// ran (a split of three items, a delay fired by the scheduler) and samples
// Rune's queues and the timer store. On SIGTERM (ctx done) it exits 0.
func TestWorkerMetricsDistributed(t *testing.T) {
	t.Parallel()
	amqpURL, redisURL, prefix := testinfra.AMQPURL(t), testinfra.RedisURL(t), testinfra.Name(t)
	t.Cleanup(func() { cleanupPrefix(t, amqpURL, redisURL, prefix) })
	addr, logs, stop := serveCommand(t, "worker", "--scheduler", "--amqp", amqpURL, "--redis", redisURL, "--prefix", prefix,
		"--metrics-addr", "127.0.0.1:0", "--log-format", "json", "--concurrency", "4")
	if code, body := get(t, addr+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d %q, want 200", code, body)
	}
	// The start-up line gives the limits in force, the default prefetch
	// resolved (it said 0 for "default").
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var started map[string]any
		for _, l := range jsonLines(t, logs.String()) {
			if l["msg"] == "worker started" {
				started = l
			}
		}
		if started != nil {
			if started["concurrency"] != 4.0 || started["prefetch"] != 8.0 {
				t.Errorf("worker started with concurrency %v, prefetch %v; want 4 and 8", started["concurrency"], started["prefetch"])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no \"worker started\" line:\n%s", logs.String())
		}
	}
	if code, body := get(t, addr+"/readyz"); code != http.StatusOK || !strings.Contains(body, "rabbitmq: ok") || !strings.Contains(body, "redis: ok") {
		t.Errorf("/readyz: %d %q, want 200 with rabbitmq and redis ok", code, body)
	}

	wf := filepath.Join(t.TempDir(), "wf.json")
	if err := os.WriteFile(wf, []byte(`{"id": "metered", "nodes": [
	  {"id": "start", "type": "trigger", "trigger": true},
	  {"id": "each", "type": "split", "parameters": {"input_array": "{{ $trigger.xs }}"}},
	  {"id": "double", "type": "set", "parameters": {"values": {"v": "{{ $item * 2 }}"}}},
	  {"id": "all", "type": "aggregator"},
	  {"id": "pause", "type": "delay", "parameters": {"duration": "PT0.2S"}},
	  {"id": "say", "type": "log", "parameters": {"message": "total {{ len($all.items) }}"}}],
	 "edges": [{"id": "e1", "src": "start", "dst": "each"}, {"id": "e2", "src": "each", "dst": "double"},
	  {"id": "e3", "src": "double", "dst": "all"}, {"id": "e4", "src": "all", "dst": "pause"}, {"id": "e5", "src": "pause", "dst": "say"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, nil, "start", wf, "--input", `{"xs": [1, 2, 3]}`, "--wait", "--quiet",
		"--amqp", amqpURL, "--redis", redisURL, "--prefix", prefix)
	if code != exitOK {
		t.Fatalf("rune start --wait: exit %d\n%s\n%s", code, out, errOut)
	}
	got := metricstest.Wait(t, addr+"/metrics", map[string]float64{
		`rune_node_executions_total{node_type="split",outcome="success",workflow="metered"}`: 1,
		`rune_node_executions_total{node_type="set",outcome="success",workflow="metered"}`:   3,
		`rune_node_executions_total{node_type="delay",outcome="success",workflow="metered"}`: 1,
		`rune_node_executions_total{node_type="log",outcome="success",workflow="metered"}`:   1,
		`rune_executions_completed_total{status="completed",workflow="metered"}`:             1,
		`rune_split_items_sum{workflow="metered"}`:                                           3,
		`rune_timers_fired_total{result="resumed"}`:                                          1,
		`rune_timer_lateness_seconds_count`:                                                  1,
		`rune_worker_messages_in_flight{topic="workflow.execution"}`:                         0,
		`rune_worker_concurrency`:                                                            4,
		`rune_worker_prefetch`:                                                               8,
	})
	if n := metricstest.Sum(got, "rune_node_executions_total{"); n != 6 {
		t.Errorf("node runs total %v, want 6 (1 split, 3 set, 1 delay, 1 log)", n)
	}
	// What the worker published, and in how many RabbitMQ messages
	// (sampled): some, and never more RabbitMQ messages than messages.
	metricstest.Until(t, func() map[string]float64 { return metricstest.Scrape(t, addr+"/metrics") }, func(m map[string]float64) []string {
		var bad []string
		for _, topic := range []string{"workflow.execution", "workflow.node.status"} {
			msgs, sent := m[`rune_broker_published_total{topic="`+topic+`"}`], m[`rune_broker_amqp_messages_total{topic="`+topic+`"}`]
			if msgs < 1 || sent < 1 || sent > msgs {
				bad = append(bad, fmt.Sprintf("%s: %v messages published in %v RabbitMQ messages", topic, msgs, sent))
			}
		}
		return bad
	})
	// Sampled in the background: present once a sample has succeeded.
	metricstest.WaitPresent(t, addr+"/metrics", `rune_queue_messages{queue="workflow.execution"}`, `rune_queue_messages{queue="workflow.dlq"}`, `rune_timers{state="waiting"}`, `rune_timers_overdue_seconds`, `go_goroutines`)
	if c := stop(); c != exitOK {
		t.Errorf("worker exit status %d after ctx done, want 0\n%s", c, logs.String())
	}
	for _, l := range jsonLines(t, logs.String()) {
		if l["level"] == "ERROR" {
			t.Errorf("worker logged an error: %v", l)
		}
	}
}

// The scheduler serves the same health checks and its timer metrics.
func TestSchedulerHealth(t *testing.T) {
	t.Parallel()
	amqpURL, redisURL, prefix := testinfra.AMQPURL(t), testinfra.RedisURL(t), testinfra.Name(t)
	t.Cleanup(func() { cleanupPrefix(t, amqpURL, redisURL, prefix) })
	addr, _, stop := serveCommand(t, "scheduler", "--amqp", amqpURL, "--redis", redisURL, "--prefix", prefix,
		"--metrics-addr", "127.0.0.1:0", "--log-format", "json", "--log-level", "debug")
	if code, body := get(t, addr+"/readyz"); code != http.StatusOK || !strings.Contains(body, "redis: ok") {
		t.Errorf("/readyz: %d %q, want 200", code, body)
	}
	// The timer gauges appear with the scheduler's first sample, which may
	// come after /readyz answers.
	metricstest.WaitPresent(t, addr+"/metrics", `rune_timers{state="waiting"}`, `rune_timers{state="claimed"}`, `rune_timers_overdue_seconds`)
	if c := stop(); c != exitOK {
		t.Errorf("scheduler exit status %d, want 0", c)
	}
}

// Bad log flags exit 2 naming the flag.
func TestLogFlagsUsage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ flag, value string }{{"--log-format", "xml"}, {"--log-level", "loud"}} {
		code, _, errOut := runCLI(t, nil, "worker", "--amqp", "amqp://x", "--redis", "redis://x", c.flag, c.value)
		if code != exitInvalid || !strings.Contains(errOut, c.flag) {
			t.Errorf("rune worker %s %s: exit %d, %q; want 2 naming the flag", c.flag, c.value, code, errOut)
		}
	}
}

// cleanupPrefix deletes the queues, exchanges and Redis keys of prefix.
func cleanupPrefix(t *testing.T, amqpURL, redisURL, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rt, err := distributed.Connect(ctx, distributed.Config{AMQPURL: amqpURL, RedisURL: redisURL, Prefix: prefix, Role: amqp.RoleAdmin, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Logf("clean-up of %s: %v", prefix, err)
		return
	}
	defer rt.Close()
	if err := rt.DeleteTopology(ctx, prefix); err != nil {
		t.Logf("clean-up of %s: %v", prefix, err)
	}
}
