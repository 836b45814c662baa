package engine_test

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	coordmem "github.com/rune-org/rune/coord/memory"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/nodes"
	"github.com/rune-org/rune/workflow"
)

// clock is a settable Config.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

func flowHarness(t *testing.T, def string, withLimiter bool) (*harness, *clock) {
	c := &clock{t: time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)}
	h := newHarnessWith(t, def, func(cfg *engine.Config) {
		cfg.Now = c.now
		if withLimiter {
			cfg.Limiter = coordmem.NewLimiter()
		}
	})
	return h, c
}

const rateDef = `{"id":"rl","nodes":[
	{"id":"start","type":"trigger","trigger":true},
	{"id":"each","type":"split","parameters":{"input_array":"{{ $trigger.xs }}"}},
	{"id":"send","type":"set","parameters":{"values":{"x":"{{ $item }}"}},"rate_limit":{"key":"{{ $trigger.account }}","limit":1,"per":"1h"}},
	{"id":"agg","type":"aggregator"}],
	"edges":[{"id":"e1","src":"start","dst":"each"},{"id":"e2","src":"each","dst":"send"},{"id":"e3","src":"send","dst":"agg"}]}`

// A run over the rate limit is deferred to its slot (waiting, reason
// RATE_LIMITED, a timer), a redelivery before then keeps that slot, and
// when the timer fires the run comes back and runs.
func TestRateLimitDefersToTheSlot(t *testing.T) {
	h, c := flowHarness(t, rateDef, true)
	t0 := c.now()
	h.start(map[string]any{"xs": []any{1, 2}, "account": "acme"})
	h.step(0) // split
	second := h.queue[1]
	h.step(0) // first item: runs now
	h.step(0) // second item: deferred an hour
	var waiting *message.NodeStatus
	for _, s := range h.status {
		if s.NodeID == "send" && s.Status == message.StatusWaiting {
			waiting = s
		}
	}
	if waiting == nil || waiting.Reason != message.ReasonRateLimited || waiting.ResumeAt == nil || !waiting.ResumeAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("statuses %v; waiting %+v: want send waiting until %v, reason RATE_LIMITED", h.statuses(), waiting, t0.Add(time.Hour))
	}
	if h.ran("send") && countStatus(h.status, "send", message.StatusRunning) != 1 {
		t.Fatalf("send ran %d times before its slot", countStatus(h.status, "send", message.StatusRunning))
	}
	// A redelivery of the deferred run keeps its slot.
	h.queue = append(h.queue, second)
	h.step(len(h.queue) - 1)
	if n := countStatus(h.status, "send", message.StatusWaiting); n != 2 {
		t.Fatalf("the redelivery reported %d waiting statuses in all, want 2", n)
	}
	c.set(t0.Add(time.Hour))
	if fired := h.fireTimers(t0.Add(time.Hour)); len(fired) != 1 {
		t.Fatalf("%d timers fired, want the deferred run's one", len(fired))
	}
	if len(h.queue) != 1 || h.queue[0].Msg.MessageID != second.Msg.MessageID {
		t.Fatalf("after the timer: queue %v, want the deferred message again", h.queue)
	}
	h.drain()
	if got := h.completion().Status; got != message.CompletionCompleted {
		t.Fatalf("completion %s", got)
	}
	if n := countStatus(h.status, "send", message.StatusSuccess); n != 2 {
		t.Fatalf("send succeeded %d times, want 2", n)
	}
}

func valueJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func countStatus(ss []*message.NodeStatus, node, st string) int {
	n := 0
	for _, s := range ss {
		if s.NodeID == node && s.Status == st {
			n++
		}
	}
	return n
}

// A throttled run does not run: it succeeds with the THROTTLED output.
func TestThrottleSkips(t *testing.T) {
	h, _ := flowHarness(t, `{"id":"th","nodes":[
		{"id":"start","type":"trigger","trigger":true},
		{"id":"each","type":"split","parameters":{"input_array":"{{ $trigger.xs }}"}},
		{"id":"send","type":"test","throttle":{"key":"user-1","limit":1,"per":"24h"}},
		{"id":"agg","type":"aggregator"}],
		"edges":[{"id":"e1","src":"start","dst":"each"},{"id":"e2","src":"each","dst":"send"},{"id":"e3","src":"send","dst":"agg"}]}`, true)
	h.start(map[string]any{"xs": []any{1, 2}})
	h.drain()
	c := h.completion()
	if countStatus(h.status, "send", message.StatusRunning) != 1 {
		t.Fatalf("send ran %d times, want once", countStatus(h.status, "send", message.StatusRunning))
	}
	items := c.FinalContext["$agg"].(map[string]any)["items"].([]any)
	got := []string{valueJSON(items[0]), valueJSON(items[1])}
	want := `{"reason":"THROTTLED","sent":false}`
	if !(got[0] == want) == !(got[1] == want) {
		t.Fatalf("items %v: want one run and one %s", got, want)
	}
}

// A key that is not a string fails the node, naming the field; a runtime
// without a limiter fails it too.
func TestFlowControlFailures(t *testing.T) {
	h, _ := flowHarness(t, `{"id":"bad","nodes":[
		{"id":"start","type":"trigger","trigger":true},
		{"id":"send","type":"set","parameters":{"values":{"v":1}},"rate_limit":{"key":"{{ $trigger }}","limit":1,"per":"1s"}}],
		"edges":[{"id":"e1","src":"start","dst":"send"}]}`, true)
	h.start(map[string]any{"a": 1})
	h.drain()
	if f := h.completion().FailureReason; f == nil || f.Code != "INVALID_PARAMETER" || !strings.Contains(f.Message, "rate_limit.key: want a string") {
		t.Fatalf("failure %+v, want INVALID_PARAMETER naming rate_limit.key", f)
	}
	h, _ = flowHarness(t, `{"id":"nolimiter","nodes":[
		{"id":"start","type":"trigger","trigger":true},
		{"id":"send","type":"set","parameters":{"values":{"v":1}},"rate_limit":{"key":"k","limit":1,"per":"1s"}}],
		"edges":[{"id":"e1","src":"start","dst":"send"}]}`, false)
	h.start(map[string]any{})
	h.drain()
	if f := h.completion().FailureReason; f == nil || f.Code != "UNSUPPORTED_NODE" {
		t.Fatalf("failure %+v, want UNSUPPORTED_NODE without a limiter", f)
	}
}

// A throttle on a node that routes, and a key that does not compile, are
// refused at compile time, naming the field.
func TestFlowControlCompileProblems(t *testing.T) {
	co := coordmem.New(coordmem.Options{})
	defer co.Close()
	eng, err := engine.New(engine.Config{Registry: nodes.NewRegistry(nodes.Options{}), Coord: co})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ node, path string }{
		{`{"id":"send","type":"conditional","parameters":{"expression":"{{ true }}"},"throttle":{"key":"k","limit":1,"per":"1s"}}`, "nodes[1].throttle"},
		{`{"id":"send","type":"set","parameters":{"values":{"v":1}},"rate_limit":{"key":"{{ ( }}","limit":1,"per":"1s"}}`, "nodes[1].rate_limit.key"},
	} {
		_, err := eng.Compile([]byte(`{"id":"c","nodes":[{"id":"start","type":"trigger","trigger":true},` + tc.node + `],"edges":[{"id":"e1","src":"start","dst":"send"}]}`))
		var ps workflow.Problems
		if !errors.As(err, &ps) || len(ps) != 1 || ps[0].Path != tc.path {
			t.Errorf("%s: error %v, want one problem at %s", tc.node, err, tc.path)
		}
	}
}
