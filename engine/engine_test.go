package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	coordmem "github.com/rune-org/rune/coord/memory"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/expr"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/nodes"
	"github.com/rune-org/rune/workflow"
)

// testType is a node type whose behaviour the tests set through parameters:
// "fail_until" (fail attempts below it), "retryable", "code", "defer_until"
// (node.Defer until that RFC 3339 time).
type testType struct{}

func (testType) Check(*workflow.NodeCheck) {}
func (testType) Compile(n *workflow.Node, _ *expr.Compiler) (node.Runner, error) {
	return testRunner{params: n.Parameters}, nil
}

type testRunner struct{ params map[string]any }

func (r testRunner) Run(_ context.Context, in *node.Input) (node.Result, error) {
	if u, ok := r.params["defer_until"].(string); ok { // node.Defer until then
		if until, _ := time.Parse(time.RFC3339, u); in.Now.Before(until) {
			return node.Result{}, &node.Defer{Until: until, Reason: "QUIET_HOURS"}
		}
	}
	if r.params["nan"] == true {
		return node.Result{Output: map[string]any{"x": math.NaN()}}, nil
	}
	failUntil, _ := r.params["fail_until"].(float64)
	if failUntil < 0 || float64(in.Attempt) < failUntil {
		retryable, _ := r.params["retryable"].(bool)
		code, _ := r.params["code"].(string)
		return node.Result{}, &node.Error{Code: code, Message: fmt.Sprintf("attempt %d failed", in.Attempt), Retryable: retryable}
	}
	return node.Result{Output: map[string]any{"attempt": in.Attempt}}, nil
}

// harness drives an engine by hand: messages are handled in the order the
// test picks, delays are recorded, not waited for.
type harness struct {
	t      *testing.T
	eng    *engine.Engine
	wf     *engine.Workflow
	queue  []engine.Delayed
	status []*message.NodeStatus
	done   []*message.Completion
	timers *coordmem.Timers
}

func newHarness(t *testing.T, def string) *harness {
	t.Helper()
	return newHarnessWith(t, def, nil)
}

// newHarnessWith is newHarness with tweak applied to the engine's Config.
func newHarnessWith(t *testing.T, def string, tweak func(*engine.Config)) *harness {
	t.Helper()
	reg := nodes.NewRegistry(nodes.Options{})
	reg.Register("test", testType{})
	co := coordmem.New(coordmem.Options{})
	t.Cleanup(func() { co.Close() })
	timers := coordmem.NewTimers()
	// Unfused: these tests step through one node per message; fused hops
	// have tests of their own (fuse_test.go).
	cfg := engine.Config{Registry: reg, Coord: co, Timers: timers, Barriers: coordmem.NewBarriers(), NoFuse: true}
	if tweak != nil {
		tweak(&cfg)
	}
	eng, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	wf, err := eng.Compile([]byte(def))
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return &harness{t: t, eng: eng, wf: wf, timers: timers}
}

func (h *harness) absorb(f *engine.Effects) {
	h.status = append(h.status, f.Statuses...)
	h.queue = append(h.queue, f.Next...)
	if f.Completion != nil {
		h.done = append(h.done, f.Completion)
	}
}

func (h *harness) start(input any) {
	h.t.Helper()
	var f engine.Effects
	if err := h.eng.Start(context.Background(), h.wf, "exec_test", input, &f); err != nil {
		h.t.Fatalf("start: %v", err)
	}
	h.absorb(&f)
}

// step handles the queued message at index i.
func (h *harness) step(i int) engine.Delayed {
	h.t.Helper()
	d := h.queue[i]
	h.queue = append(h.queue[:i:i], h.queue[i+1:]...)
	var f engine.Effects
	if err := h.eng.Handle(context.Background(), engine.Delivery{}, d.Msg, &f); err != nil {
		h.t.Fatalf("handle %s: %v", d.Msg.CurrentNode, err)
	}
	h.absorb(&f)
	return d
}

// drain handles messages first in, first out until none is left.
func (h *harness) drain() {
	h.t.Helper()
	for n := 0; len(h.queue) > 0; n++ {
		if n > 10000 {
			h.t.Fatal("drain: too many messages")
		}
		h.step(0)
	}
}

func (h *harness) completion() *message.Completion {
	h.t.Helper()
	if len(h.done) != 1 {
		h.t.Fatalf("got %d completions, want exactly 1", len(h.done))
	}
	return h.done[0]
}

// statuses returns "node:status" for every status, in order.
func (h *harness) statuses() []string { return statusNames(h.status) }

// statusNames returns "node:status" for every status in ss, in order.
func statusNames(ss []*message.NodeStatus) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.NodeID+":"+s.Status)
	}
	return out
}

func (h *harness) ran(nodeID string) bool {
	for _, s := range h.status {
		if s.NodeID == nodeID && s.Status == message.StatusRunning {
			return true
		}
	}
	return false
}

func TestLinearContextAccumulates(t *testing.T) {
	h := newHarness(t, `{"id":"lin","nodes":[
		{"id":"start","type":"trigger","trigger":true},
		{"id":"a","type":"set","parameters":{"values":{"n":"{{ $trigger.n + 1 }}"}}},
		{"id":"b","type":"set","parameters":{"values":{"n":"{{ $a.n * 10 }}","from_trigger":"{{ $trigger.n }}"}}}],
		"edges":[{"id":"e1","src":"start","dst":"a"},{"id":"e2","src":"a","dst":"b"}]}`)
	h.start(map[string]any{"n": 1.0})
	h.drain()
	c := h.completion()
	if c.Status != message.CompletionCompleted {
		t.Fatalf("status %s, want completed", c.Status)
	}
	b, _ := c.FinalContext["$b"].(map[string]any)
	if num(b["n"]) != 20 || num(b["from_trigger"]) != 1 {
		t.Fatalf("$b = %v, want n=20 from_trigger=1", c.FinalContext["$b"])
	}
	for _, k := range []string{"$trigger", "$a", "$b"} {
		if _, ok := c.FinalContext[k]; !ok {
			t.Errorf("final context lacks %s: %v", k, c.FinalContext)
		}
	}
	want := "start:success a:running a:success b:running b:success"
	if got := strings.Join(h.statuses(), " "); got != want {
		t.Fatalf("statuses\n got %s\nwant %s", got, want)
	}
}

func num(v any) float64 {
	switch n := v.(type) {
	case float64:
		return n
	case int:
		return float64(n)
	case int64:
		return float64(n)
	}
	return -1
}

func TestConditionalFollowsOnlyChosenEdge(t *testing.T) {
	def := `{"id":"cond","nodes":[
		{"id":"start","type":"trigger","trigger":true},
		{"id":"check","type":"conditional","parameters":{"expression":"$trigger.vip","true_edge_id":"e_yes","false_edge_id":"e_no"}},
		{"id":"yes","type":"set","parameters":{"values":{"v":1}}},
		{"id":"no","type":"set","parameters":{"values":{"v":0}}}],
		"edges":[{"id":"e1","src":"start","dst":"check"},{"id":"e_yes","src":"check","dst":"yes"},{"id":"e_no","src":"check","dst":"no"}]}`
	for _, vip := range []bool{true, false} {
		h := newHarness(t, def)
		h.start(map[string]any{"vip": vip})
		h.drain()
		c := h.completion()
		taken, skipped := "yes", "no"
		if !vip {
			taken, skipped = "no", "yes"
		}
		if !h.ran(taken) || h.ran(skipped) {
			t.Fatalf("vip=%v: statuses %v; want only %q to run", vip, h.statuses(), taken)
		}
		if _, ok := c.FinalContext["$"+skipped]; ok {
			t.Fatalf("vip=%v: final context holds the untaken side $%s", vip, skipped)
		}
	}
}

func TestSwitchFollowsFirstMatchingCaseElseDefault(t *testing.T) {
	def := `{"id":"sw","nodes":[
		{"id":"start","type":"trigger","trigger":true},
		{"id":"route","type":"switch","parameters":{"cases":[
			{"expression":"$trigger.n > 10","edge":"e_big"},
			{"expression":"$trigger.n > 5","edge":"e_mid"}],"default_edge":"e_small"}},
		{"id":"big","type":"set","parameters":{"values":{"v":1}}},
		{"id":"mid","type":"set","parameters":{"values":{"v":1}}},
		{"id":"small","type":"set","parameters":{"values":{"v":1}}}],
		"edges":[{"id":"e1","src":"start","dst":"route"},{"id":"e_big","src":"route","dst":"big"},
		{"id":"e_mid","src":"route","dst":"mid"},{"id":"e_small","src":"route","dst":"small"}]}`
	for n, want := range map[float64]string{20: "big", 7: "mid", 1: "small"} {
		h := newHarness(t, def)
		h.start(map[string]any{"n": n})
		h.drain()
		h.completion()
		for _, id := range []string{"big", "mid", "small"} {
			if h.ran(id) != (id == want) {
				t.Fatalf("n=%v: statuses %v; want only %q", n, h.statuses(), want)
			}
		}
	}
}

const retryDef = `{"id":"retry","nodes":[
	{"id":"start","type":"trigger","trigger":true},
	{"id":"flaky","type":"test","parameters":{"fail_until":%d,"retryable":%v,"code":"BOOM"},
	 "retry":{"max_attempts":%d,"initial_delay":"2s","multiplier":3}},
	{"id":"after","type":"set","parameters":{"values":{"attempt":"{{ $flaky.attempt }}"}}}],
	"edges":[{"id":"e1","src":"start","dst":"flaky"},{"id":"e2","src":"flaky","dst":"after"}]}`

func TestRetriesCountAndSpacing(t *testing.T) {
	// Fails attempts 1-3, succeeds on 4: three retries, 2 s, 6 s, 18 s apart.
	h := newHarness(t, fmt.Sprintf(retryDef, 4, true, 4))
	h.start(map[string]any{})
	var delays []time.Duration
	for len(h.queue) > 0 {
		d := h.step(0)
		if d.Msg.CurrentNode == "flaky" && d.Msg.Attempt > 1 {
			delays = append(delays, d.Delay)
		}
	}
	want := []time.Duration{2 * time.Second, 6 * time.Second, 18 * time.Second}
	if fmt.Sprint(delays) != fmt.Sprint(want) {
		t.Fatalf("retry delays %v, want %v", delays, want)
	}
	var retrying int
	for _, s := range h.status {
		if s.Status == message.StatusRetrying {
			retrying++
			if s.NextAttemptAt == nil || s.Error == nil || s.Error.Code != "BOOM" {
				t.Fatalf("retrying status lacks next_attempt_at or error: %+v", s)
			}
			if got := s.NextAttemptAt.Sub(s.ExecutedAt); got < want[retrying-1] {
				t.Fatalf("retrying status %d: next attempt %s after the failure, want %s", retrying, got, want[retrying-1])
			}
		}
	}
	if retrying != 3 {
		t.Fatalf("%d retrying statuses, want 3", retrying)
	}
	c := h.completion()
	if c.Status != message.CompletionCompleted || num(c.FinalContext["$after"].(map[string]any)["attempt"]) != 4 {
		t.Fatalf("completion %s with $after=%v; want completed after attempt 4", c.Status, c.FinalContext["$after"])
	}
}

func TestRetriesExhaustedThenHalt(t *testing.T) {
	h := newHarness(t, fmt.Sprintf(retryDef, -1, true, 3))
	h.start(map[string]any{})
	h.drain()
	var attempts int
	for _, s := range h.status {
		if s.NodeID == "flaky" && s.Status == message.StatusRunning {
			attempts++
		}
	}
	if attempts != 3 {
		t.Fatalf("%d attempts, want max_attempts=3", attempts)
	}
	c := h.completion()
	if c.Status != message.CompletionFailed || c.FailureReason == nil || c.FailureReason.NodeID != "flaky" || c.FailureReason.Code != "BOOM" {
		t.Fatalf("completion %+v, want failed by flaky with BOOM", c)
	}
	if h.ran("after") {
		t.Fatal("the successor of a halted node ran")
	}
}

func TestNonRetryableErrorIsNotRetried(t *testing.T) {
	h := newHarness(t, fmt.Sprintf(retryDef, -1, false, 4))
	h.start(map[string]any{})
	h.drain()
	for _, s := range h.status {
		if s.Status == message.StatusRetrying {
			t.Fatalf("a non-retryable error was retried: %v", h.statuses())
		}
	}
	if c := h.completion(); c.Status != message.CompletionFailed {
		t.Fatalf("status %s, want failed", c.Status)
	}
}

func TestErrorStrategies(t *testing.T) {
	def := `{"id":"strat","nodes":[
		{"id":"start","type":"trigger","trigger":true},
		{"id":"bad","type":"test","parameters":{"fail_until":-1,"code":"BAD"},"retry":{"max_attempts":1},"error":%s},
		{"id":"next","type":"set","parameters":{"values":{"saw":"{{ $error.code }}"}}},
		{"id":"handler","type":"set","parameters":{"values":{"failed_node":"{{ $error.node_id }}","message":"{{ $error.message }}"}}}],
		"edges":[{"id":"e1","src":"start","dst":"bad"},{"id":"e_next","src":"bad","dst":"next"},{"id":"e_err","src":"bad","dst":"handler"}]}`

	t.Run("branch follows only the error edge, with $error", func(t *testing.T) {
		h := newHarness(t, fmt.Sprintf(def, `{"type":"branch","error_edge":"e_err"}`))
		h.start(nil)
		h.drain()
		c := h.completion()
		if c.Status != message.CompletionCompleted || h.ran("next") || !h.ran("handler") {
			t.Fatalf("status %s, statuses %v; want completed through handler only", c.Status, h.statuses())
		}
		got := c.FinalContext["$handler"].(map[string]any)
		if got["failed_node"] != "bad" || !strings.Contains(fmt.Sprint(got["message"]), "attempt 1 failed") {
			t.Fatalf("$handler = %v, want $error naming the node and its message", got)
		}
		e := c.FinalContext["$error"].(map[string]any)
		if e["code"] != "BAD" || e["node_id"] != "bad" {
			t.Fatalf("$error = %v", e)
		}
	})
	t.Run("ignore follows the normal edges, never the error edge", func(t *testing.T) {
		h := newHarness(t, fmt.Sprintf(def, `{"type":"ignore"}`))
		h.start(nil)
		h.drain()
		c := h.completion()
		if c.Status != message.CompletionCompleted || !h.ran("next") || !h.ran("handler") {
			// With ignore, error_edge is not set, so both outgoing edges are normal edges.
			t.Fatalf("status %s, statuses %v", c.Status, h.statuses())
		}
		if c.FinalContext["$next"].(map[string]any)["saw"] != "BAD" {
			t.Fatalf("$next = %v, want $error visible after ignore", c.FinalContext["$next"])
		}
	})
	t.Run("a success never follows the error edge", func(t *testing.T) {
		ok := strings.Replace(fmt.Sprintf(def, `{"type":"branch","error_edge":"e_err"}`), `"fail_until":-1`, `"fail_until":0`, 1)
		h := newHarness(t, ok)
		h.start(nil)
		h.drain()
		h.completion()
		if h.ran("handler") {
			t.Fatalf("success followed the error edge: %v", h.statuses())
		}
	})
}

const fanDef = `{"id":"fan","nodes":[
	{"id":"start","type":"trigger","trigger":true},
	{"id":"a","type":"set","parameters":{"values":{"v":"a"}}},
	{"id":"b","type":"set","parameters":{"values":{"v":"b"}}},
	{"id":"c","type":"set","parameters":{"values":{"v":"c"}}},
	{"id":"b1","type":"set","parameters":{"values":{"v":"b1"}}},
	{"id":"b2","type":"set","parameters":{"values":{"v":"b2"}}}],
	"edges":[{"id":"e1","src":"start","dst":"a"},{"id":"e2","src":"start","dst":"b"},{"id":"e3","src":"start","dst":"c"},
	{"id":"e4","src":"b","dst":"b1"},{"id":"e5","src":"b","dst":"b2"}]}`

func TestFanShapedGraphCompletesOnceWhenLastBranchEnds(t *testing.T) {
	// Handle messages last-in first-out and first-in first-out: either way the
	// completion comes exactly once, with the final message.
	for _, lifo := range []bool{false, true} {
		h := newHarness(t, fanDef)
		h.start(nil)
		for len(h.queue) > 0 {
			if len(h.done) > 0 {
				t.Fatalf("lifo=%v: completion sent with %d messages still live", lifo, len(h.queue))
			}
			i := 0
			if lifo {
				i = len(h.queue) - 1
			}
			h.step(i)
		}
		c := h.completion()
		for _, k := range []string{"$a", "$b", "$c", "$b1", "$b2"} {
			if _, ok := c.FinalContext[k]; !ok {
				t.Fatalf("lifo=%v: final context lacks %s (the union of every branch): %v", lifo, k, c.FinalContext)
			}
		}
	}
}

func TestHaltStopsParallelBranchAtItsNextNode(t *testing.T) {
	h := newHarness(t, `{"id":"halt","nodes":[
		{"id":"start","type":"trigger","trigger":true},
		{"id":"bad","type":"test","parameters":{"fail_until":-1,"code":"BAD"},"retry":{"max_attempts":1}},
		{"id":"slow","type":"set","parameters":{"values":{"v":1}}},
		{"id":"after_slow","type":"set","parameters":{"values":{"v":2}}}],
		"edges":[{"id":"e1","src":"start","dst":"bad"},{"id":"e2","src":"start","dst":"slow"},{"id":"e3","src":"slow","dst":"after_slow"}]}`)
	h.start(nil)
	// Run "slow" first: its successor is then in flight when "bad" halts.
	for i, d := range h.queue {
		if d.Msg.CurrentNode == "slow" {
			h.step(i)
			break
		}
	}
	for i, d := range h.queue {
		if d.Msg.CurrentNode == "bad" {
			h.step(i)
			break
		}
	}
	if len(h.done) != 0 {
		t.Fatal("completion sent while a branch was still live")
	}
	h.drain()
	c := h.completion()
	if c.Status != message.CompletionFailed || c.FailureReason.NodeID != "bad" {
		t.Fatalf("completion %s by %v, want failed by bad", c.Status, c.FailureReason)
	}
	if h.ran("after_slow") {
		t.Fatalf("after_slow ran after the halt: %v", h.statuses())
	}
	if !strings.Contains(strings.Join(h.statuses(), " "), "after_slow:skipped") {
		t.Fatalf("want after_slow reported skipped: %v", h.statuses())
	}
}

func TestRedeliveryReplaysWithoutRerunning(t *testing.T) {
	h := newHarness(t, fmt.Sprintf(retryDef, 0, false, 1))
	h.start(nil)
	first := h.queue[0]
	h.step(0) // runs flaky
	succ := len(h.queue)
	// The same message again, as after a crash between finish and ack.
	h.queue = append(h.queue, first)
	h.step(len(h.queue) - 1)
	if len(h.queue) != 2*succ {
		t.Fatalf("replay published %d successors, want the same %d again", len(h.queue)-succ, succ)
	}
	if h.queue[0].Msg.MessageID != h.queue[1].Msg.MessageID {
		t.Fatal("replayed successor has a different message id; duplicates would not be recognised")
	}
	runs := 0
	for _, s := range h.status {
		if s.NodeID == "flaky" && s.Status == message.StatusRunning {
			runs++
		}
	}
	if runs != 1 {
		t.Fatalf("flaky ran %d times, want once (the redelivery replays)", runs)
	}
	h.drain()
	// The duplicate of the last message republishes the completion (its
	// first publish may have been lost); it is the same completion, with the
	// same id, so consumers recognise it.
	if len(h.done) != 2 || h.done[0].ExecutionID != h.done[1].ExecutionID || h.done[0].Status != h.done[1].Status {
		t.Fatalf("completions %+v, want the same completion twice", h.done)
	}
}

// A pure node runs without asking the coordinator first; its redelivery
// after it finished publishes the first run's effects again (the same
// successor, the same success status, times included) and no second running
// status.
func TestRedeliveredPureNodeReplaysTheFirstRun(t *testing.T) {
	h := newHarness(t, `{"id":"pure","nodes":[
		{"id":"start","type":"trigger","trigger":true},
		{"id":"a","type":"set","parameters":{"values":{"v":"{{ $trigger.x + 1 }}"}}},
		{"id":"b","type":"set","parameters":{"values":{"w":"{{ $a.v * 2 }}"}}}],
		"edges":[{"id":"e1","src":"start","dst":"a"},{"id":"e2","src":"a","dst":"b"}]}`)
	h.start(map[string]any{"x": 1})
	first := h.queue[0]
	h.step(0)
	if got := strings.Join(h.statuses(), " "); got != "start:success a:running a:success" {
		t.Fatalf("statuses %q, want the trigger's success, then a running and a success", got)
	}
	succ := h.queue[0]
	firstSuccess := *h.status[2]
	h.status = nil
	h.queue = append(h.queue, first) // a crash between Finish and ack
	h.step(1)
	if got := strings.Join(h.statuses(), " "); got != "a:success" {
		t.Fatalf("statuses of the redelivery %q, want only a's success again", got)
	}
	if again := *h.status[0]; !again.ExecutedAt.Equal(firstSuccess.ExecutedAt) || again.DurationMS != firstSuccess.DurationMS {
		t.Fatalf("replayed success at %v (%d ms), want the first run's %v (%d ms)", again.ExecutedAt, again.DurationMS, firstSuccess.ExecutedAt, firstSuccess.DurationMS)
	}
	if len(h.queue) != 2 || h.queue[1].Msg.MessageID != succ.Msg.MessageID {
		t.Fatalf("replay published %d messages, want b's message again with id %s", len(h.queue)-1, succ.Msg.MessageID)
	}
	h.drain()
	if c := h.done[0]; c.Status != message.CompletionCompleted || fmt.Sprint(c.FinalContext["$b"]) != "map[w:4]" {
		t.Fatalf("completion %s with context %v, want completed with $b.w = 4", c.Status, c.FinalContext)
	}
}

func TestMissingPathIsANodeErrorNamingThePath(t *testing.T) {
	h := newHarness(t, `{"id":"miss","nodes":[
		{"id":"start","type":"trigger","trigger":true},
		{"id":"a","type":"set","parameters":{"values":{"v":"{{ $trigger.customer.email }}"}}}],
		"edges":[{"id":"e1","src":"start","dst":"a"}]}`)
	h.start(map[string]any{"customer": map[string]any{}})
	h.drain()
	c := h.completion()
	if c.Status != message.CompletionFailed || !strings.Contains(c.FailureReason.Message, "email") {
		t.Fatalf("completion %s, reason %+v; want failed naming the missing path", c.Status, c.FailureReason)
	}
}

func TestTriggerWithoutSuccessorsCompletesAtOnce(t *testing.T) {
	h := newHarness(t, `{"id":"lone","nodes":[{"id":"start","type":"trigger","trigger":true}],"edges":[]}`)
	h.start(map[string]any{"x": 1.0})
	if len(h.queue) != 0 {
		t.Fatalf("%d messages for a lone trigger", len(h.queue))
	}
	c := h.completion()
	if c.Status != message.CompletionCompleted || c.FinalContext["$trigger"] == nil {
		t.Fatalf("completion %+v", c)
	}
}

func TestInvalidMessagesAreRejected(t *testing.T) {
	h := newHarness(t, fanDef)
	h.start(nil)
	good := *h.queue[0].Msg
	cases := map[string]func(m *message.NodeExecution){
		"unknown node": func(m *message.NodeExecution) { m.CurrentNode = "nope" },
		"the trigger":  func(m *message.NodeExecution) { m.CurrentNode = "start" },
		"bad definition": func(m *message.NodeExecution) {
			m.WorkflowDefinition = json.RawMessage(`{"id":"x","nodes":[],"edges":[]}`)
		},
		"no execution":                     func(m *message.NodeExecution) { m.ExecutionID = "" },
		"workflow_id not the definition's": func(m *message.NodeExecution) { m.WorkflowID = "another_workflow" },
		// Issue 12: these were acked and dropped with a warning.
		"unknown execution": func(m *message.NodeExecution) { m.ExecutionID = "exec_never_started" },
	}
	for name, mutate := range cases {
		m := good
		mutate(&m)
		err := h.eng.Handle(context.Background(), engine.Delivery{}, &m, &engine.Effects{})
		if err == nil || !strings.Contains(err.Error(), "invalid") {
			t.Errorf("%s: Handle = %v, want an ErrInvalid", name, err)
		}
	}
}

func TestOutputThatIsNotJSONFailsTheNode(t *testing.T) {
	h := newHarness(t, `{"id":"nan","nodes":[
		{"id":"start","type":"trigger","trigger":true},
		{"id":"a","type":"test","parameters":{"nan":true}}],
		"edges":[{"id":"e1","src":"start","dst":"a"}]}`)
	h.start(nil)
	h.drain()
	c := h.completion()
	if c.Status != message.CompletionFailed || c.FailureReason.Code != "OUTPUT_NOT_JSON" || !strings.Contains(c.FailureReason.Message, ".x") {
		t.Fatalf("completion %s, reason %+v; want failed with OUTPUT_NOT_JSON naming .x", c.Status, c.FailureReason)
	}
}

func TestNodeMapAndExecutionNames(t *testing.T) {
	h := newHarness(t, `{"id":"names","nodes":[
		{"id":"start","type":"trigger","trigger":true},
		{"id":"a","type":"set","parameters":{"values":{"v":7}}},
		{"id":"b","type":"set","parameters":{"values":{"via_node":"{{ $node.a.v }}","exec":"{{ $execution.id }}","attempt":"{{ $execution.attempt }}"}}}],
		"edges":[{"id":"e1","src":"start","dst":"a"},{"id":"e2","src":"a","dst":"b"}]}`)
	h.start(nil)
	h.drain()
	b := h.completion().FinalContext["$b"].(map[string]any)
	if num(b["via_node"]) != 7 || b["exec"] != "exec_test" || num(b["attempt"]) != 1 {
		t.Fatalf("$b = %v", b)
	}
}

func TestIgnoreOnAFailedConditionalFollowsNoSide(t *testing.T) {
	h := newHarness(t, `{"id":"ign","nodes":[
		{"id":"start","type":"trigger","trigger":true},
		{"id":"check","type":"conditional","parameters":{"expression":"$trigger.nope > 1","true_edge_id":"e_yes","false_edge_id":"e_no"},"error":{"type":"ignore"}},
		{"id":"yes","type":"set","parameters":{"values":{"v":1}}},
		{"id":"no","type":"set","parameters":{"values":{"v":0}}},
		{"id":"always","type":"set","parameters":{"values":{"code":"{{ $error.code }}"}}}],
		"edges":[{"id":"e1","src":"start","dst":"check"},{"id":"e_yes","src":"check","dst":"yes"},{"id":"e_no","src":"check","dst":"no"},{"id":"e_always","src":"check","dst":"always"}]}`)
	h.start(map[string]any{})
	h.drain()
	c := h.completion()
	if h.ran("yes") || h.ran("no") || !h.ran("always") || c.Status != message.CompletionCompleted {
		t.Fatalf("statuses %v, completion %s; want neither side, the plain edge followed", h.statuses(), c.Status)
	}
}

// Input that breaks the input policy never becomes a message, whoever
// decoded it (the CLI, an API).
func TestStartRefusesInputBreakingThePolicy(t *testing.T) {
	h := newHarness(t, fanDef)
	var deep any = map[string]any{}
	for range 10_000 {
		deep = map[string]any{"a": deep}
	}
	for name, input := range map[string]any{
		"10,000 deep":   deep,
		"invalid UTF-8": map[string]any{"name": "Zo\xeb"},
	} {
		var f engine.Effects
		err := h.eng.Start(context.Background(), h.wf, "exec_bad_"+strings.ReplaceAll(name, " ", "_"), input, &f)
		if !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), "input") {
			t.Errorf("%s: Start = %v, want ErrInvalid naming the input", name, err)
		}
		if len(f.Statuses)+len(f.Next) > 0 || f.Completion != nil {
			t.Errorf("%s: Start reported effects: %+v", name, f)
		}
	}
}
