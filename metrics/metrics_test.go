package metrics_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rune-org/rune/embedded"
	"github.com/rune-org/rune/expr"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/metrics"
	"github.com/rune-org/rune/metrics/metricstest"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/nodes"
	"github.com/rune-org/rune/workflow"
)

// flakyType fails its first attempt, retryably, and succeeds after.
type flakyType struct{}

func (flakyType) Check(*workflow.NodeCheck) {}
func (flakyType) Compile(*workflow.Node, *expr.Compiler) (node.Runner, error) {
	return flakyRunner{}, nil
}

type flakyRunner struct{}

func (flakyRunner) Run(_ context.Context, in *node.Input) (node.Result, error) {
	if in.Attempt == 1 {
		return node.Result{}, &node.Error{Code: "FLAKY", Message: "first attempt fails", Retryable: true}
	}
	return node.Result{Output: map[string]any{"attempt": in.Attempt}}, nil
}

// The counters after real runs on the embedded runtime match what ran: a
// split of three items with a set node each, an aggregator, a node retried
// once, a halted execution and a wait fired by the scheduler.
func TestMetricsEmbedded(t *testing.T) {
	t.Parallel()
	rec := metrics.New(metrics.Config{})
	reg := nodes.NewRegistry(nodes.Options{})
	reg.Register("flaky", flakyType{})
	rt, err := embedded.New(embedded.Options{Metrics: rec, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := func(def string, want string) {
		t.Helper()
		c, err := rt.Run(ctx, []byte(def), map[string]any{"xs": []any{1, 2, 3}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.Status != want {
			t.Fatalf("completion %s (%v), want %s", c.Status, c.FailureReason, want)
		}
	}
	run(`{"id": "fan", "nodes": [
	  {"id": "start", "type": "trigger", "trigger": true},
	  {"id": "each", "type": "split", "parameters": {"input_array": "{{ $trigger.xs }}"}},
	  {"id": "double", "type": "set", "parameters": {"values": {"v": "{{ $item * 2 }}"}}},
	  {"id": "all", "type": "aggregator"},
	  {"id": "shaky", "type": "flaky", "retry": {"max_attempts": 2, "initial_delay": "10ms"}},
	  {"id": "pause", "type": "delay", "parameters": {"duration": "PT0.1S"}}],
	 "edges": [{"id": "e1", "src": "start", "dst": "each"}, {"id": "e2", "src": "each", "dst": "double"},
	  {"id": "e3", "src": "double", "dst": "all"}, {"id": "e4", "src": "all", "dst": "shaky"},
	  {"id": "e5", "src": "shaky", "dst": "pause"}]}`, message.CompletionCompleted)
	run(`{"id": "stop", "nodes": [
	  {"id": "start", "type": "trigger", "trigger": true},
	  {"id": "bad", "type": "flaky", "retry": {"max_attempts": 1}}],
	 "edges": [{"id": "e1", "src": "start", "dst": "bad"}]}`, message.CompletionFailed)

	srv := httptest.NewServer(rec.Handler())
	defer srv.Close()
	// The timer's counters are bumped once its resume is published, which
	// can be after the execution completes: wait for them.
	got := metricstest.Wait(t, srv.URL, map[string]float64{
		`rune_node_executions_total{node_type="split",outcome="success",workflow="fan"}`:  1,
		`rune_node_executions_total{node_type="set",outcome="success",workflow="fan"}`:    3,
		`rune_node_executions_total{node_type="flaky",outcome="retrying",workflow="fan"}`: 1,
		`rune_node_executions_total{node_type="flaky",outcome="success",workflow="fan"}`:  1,
		`rune_node_executions_total{node_type="delay",outcome="success",workflow="fan"}`:  1,
		`rune_node_executions_total{node_type="flaky",outcome="failed",workflow="stop"}`:  1,
		`rune_node_retries_total{node_type="flaky",workflow="fan"}`:                       1,
		`rune_halts_total{workflow="stop"}`:                                               1,
		`rune_executions_completed_total{status="completed",workflow="fan"}`:              1,
		`rune_executions_completed_total{status="failed",workflow="stop"}`:                1,
		`rune_split_items_count{workflow="fan"}`:                                          1,
		`rune_split_items_sum{workflow="fan"}`:                                            3,
		`rune_node_duration_seconds_count{node_type="set"}`:                               3,
		`rune_timers_fired_total{result="resumed"}`:                                       1,
		`rune_timer_lateness_seconds_count`:                                               1,
		`rune_worker_messages_in_flight{topic="workflow.execution"}`:                      0,
		`rune_dead_letters_total{topic="workflow.execution"}`:                             0,
	})
	// Node runs total what ran: 1 split + 3 set + 2 flaky + 1 delay + 1 flaky.
	if n := metricstest.Sum(got, "rune_node_executions_total{"); n != 8 {
		t.Errorf("node runs total %v, want 8", n)
	}
	for series := range got {
		for _, bad := range []string{"exec_", "execution_id"} {
			if strings.Contains(series, bad) {
				t.Errorf("series %s has an execution id label", series)
			}
		}
	}
}

// A nil Recorder records nothing and does not panic: metrics off.
func TestNilRecorder(t *testing.T) {
	t.Parallel()
	var r *metrics.Recorder
	r.NodeRun("w", "set", "success", time.Millisecond)
	r.Halt("w")
	r.Completed("w", "completed")
	r.Split("w", 3)
	r.BarrierWait("w", "merge", time.Second)
	r.DeadLetter("t")
	r.Redelivery("t")
	r.InFlight("t", 1)
	r.WorkerLimits(1, 2)
	r.TimerFired("resumed", time.Second)
}

// Past MaxWorkflows distinct workflow ids, the label is "other": a
// deployment with many generated workflows does not explode the series.
func TestWorkflowLabelBounded(t *testing.T) {
	t.Parallel()
	rec := metrics.New(metrics.Config{MaxWorkflows: 2})
	for _, w := range []string{"a", "b", "c", "d", "a"} {
		rec.Halt(w)
	}
	srv := httptest.NewServer(rec.Handler())
	defer srv.Close()
	got := metricstest.Scrape(t, srv.URL)
	for series, w := range map[string]float64{`rune_halts_total{workflow="a"}`: 2, `rune_halts_total{workflow="b"}`: 1, `rune_halts_total{workflow="other"}`: 2} {
		if got[series] != w {
			t.Errorf("%s = %v, want %v", series, got[series], w)
		}
	}
	if _, ok := got[`rune_halts_total{workflow="c"}`]; ok {
		t.Error("workflow c has a series of its own past MaxWorkflows")
	}
}

// rune_barrier_wait_seconds after real fan-ins on the embedded runtime: one
// observation per aggregator or merge released, as long as the wait from
// the first branch's arrival to the last's (the merge's slow parent is a
// 0.3 s delay).
func TestBarrierWait(t *testing.T) {
	t.Parallel()
	rec := metrics.New(metrics.Config{})
	rt, err := embedded.New(embedded.Options{Metrics: rec})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, def := range []string{`{"id": "fanwait", "nodes": [
	  {"id": "start", "type": "trigger", "trigger": true},
	  {"id": "each", "type": "split", "parameters": {"input_array": "{{ $trigger.xs }}"}},
	  {"id": "double", "type": "set", "parameters": {"values": {"v": "{{ $item * 2 }}"}}},
	  {"id": "all", "type": "aggregator"}],
	 "edges": [{"id": "e1", "src": "start", "dst": "each"}, {"id": "e2", "src": "each", "dst": "double"},
	  {"id": "e3", "src": "double", "dst": "all"}]}`, `{"id": "mergewait", "nodes": [
	  {"id": "start", "type": "trigger", "trigger": true},
	  {"id": "fast", "type": "set", "parameters": {"values": {"a": 1}}},
	  {"id": "slow", "type": "delay", "parameters": {"duration": "PT0.3S"}},
	  {"id": "both", "type": "merge", "parameters": {"wait_mode": "wait_for_all"}}],
	 "edges": [{"id": "e1", "src": "start", "dst": "fast"}, {"id": "e2", "src": "start", "dst": "slow"},
	  {"id": "e3", "src": "fast", "dst": "both"}, {"id": "e4", "src": "slow", "dst": "both"}]}`} {
		c, err := rt.Run(ctx, []byte(def), map[string]any{"xs": []any{1, 2, 3}}, nil)
		if err != nil || c.Status != message.CompletionCompleted {
			t.Fatalf("run: %v %v", c, err)
		}
	}
	srv := httptest.NewServer(rec.Handler())
	defer srv.Close()
	got := metricstest.Scrape(t, srv.URL)
	for series, w := range map[string]float64{
		`rune_barrier_wait_seconds_count{node_type="aggregator",workflow="fanwait"}`: 1,
		`rune_barrier_wait_seconds_count{node_type="merge",workflow="mergewait"}`:    1,
	} {
		if got[series] != w {
			t.Errorf("%s = %v, want %v", series, got[series], w)
		}
	}
	if s := got[`rune_barrier_wait_seconds_sum{node_type="merge",workflow="mergewait"}`]; s < 0.25 || s > 30 {
		t.Errorf("merge waited %v s, want the slow parent's 0.3 s delay or a little more", s)
	}
}

// A worker's dead-letter and redelivery counters are there at 0 from its
// start, so that the first dead letter is an increase an alert sees.
func TestWorkerCountersStartAtZero(t *testing.T) {
	t.Parallel()
	rec := metrics.New(metrics.Config{})
	srv := httptest.NewServer(rec.Handler())
	defer srv.Close()
	rec.WorkerLimits(4, 8)
	got := metricstest.Scrape(t, srv.URL)
	for _, series := range []string{
		`rune_dead_letters_total{topic="workflow.execution"}`, `rune_dead_letters_total{topic="workflow.timeout"}`,
		`rune_worker_redeliveries_total{topic="workflow.execution"}`, `rune_worker_redeliveries_total{topic="workflow.timeout"}`,
	} {
		if v, ok := got[series]; !ok || v != 0 {
			t.Errorf("%s = %v (present %v), want 0 before any message", series, v, ok)
		}
	}
	rec.DeadLetter("workflow.execution")
	if got := metricstest.Scrape(t, srv.URL)[`rune_dead_letters_total{topic="workflow.execution"}`]; got != 1 {
		t.Errorf("after a dead letter: %v, want 1", got)
	}
}
