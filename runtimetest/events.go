package runtimetest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/message"
)

// The wait_for_event scenarios (issue 34). Each takes the runtime's engine,
// whose DeliverEvent is what POST /v1/events calls.

// eventWorkflow waits for order.paid keyed by the trigger's order id, with
// timeout, and takes its error edge to "remind" when it times out.
func eventWorkflow(id, timeout, before string) string {
	first := "paid"
	nodes := ""
	edges := ""
	if before != "" {
		first = "before"
		nodes = before + ","
		edges = `{"id":"e0","src":"before","dst":"paid"},`
	}
	return wf(id, nodes+fmt.Sprintf(`
		{"id":"paid","type":"wait_for_event","parameters":{"event":"order.paid","key":"{{ $trigger.order_id }}","timeout":%q},
		 "error":{"type":"branch","error_edge":"e_late"}},
		{"id":"thanks","type":"set","parameters":{"values":{"amount":"{{ $paid.data.amount }}","key":"{{ $paid.key }}"}}},
		{"id":"remind","type":"set","parameters":{"values":{"reminded":true}}}`, timeout),
		edges+fmt.Sprintf(`{"id":"e1","src":"start","dst":%q},{"id":"e2","src":"paid","dst":"thanks"},{"id":"e_late","src":"paid","dst":"remind"}`, first))
}

func deliver(t *testing.T, ctx context.Context, eng *engine.Engine, key string, data string) engine.EventSent {
	t.Helper()
	sent, err := eng.DeliverEvent(ctx, engine.EventSend{Name: "order.paid", Key: key, Data: json.RawMessage(data)})
	if err != nil {
		t.Fatalf("DeliverEvent(order.paid, %s): %v", key, err)
	}
	return sent
}

// EventsAmongWaiting: n executions wait for order.paid, ten of them on the
// key "hot" and each other on its own; the event of "hot" resumes exactly
// those ten (matched 10), and no other moves; then each other key's event
// resumes its own execution with its own data. Every execution completes
// once, through "thanks", none through "remind".
func EventsAmongWaiting(t *testing.T, rt Runtime, eng *engine.Engine, n int) {
	const hot = 10
	def := []byte(eventWorkflow("events_among", "1h", ""))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	keyOf := func(i int) string {
		if i < hot {
			return "hot"
		}
		return fmt.Sprintf("o-%d", i)
	}
	var waiting, resumed atomic.Int64
	allWaiting := make(chan struct{})
	type done struct {
		i int
		c *message.Completion
		r *result
		e error
	}
	results := make(chan done, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r := &result{t: t}
			var mu sync.Mutex
			c, err := rt.Run(ctx, def, map[string]any{"order_id": keyOf(i)}, func(s *message.NodeStatus) {
				mu.Lock()
				r.add(s)
				mu.Unlock()
				if s.NodeID == "paid" && s.Status == message.StatusWaiting && waiting.Add(1) == int64(n) {
					close(allWaiting)
				}
				if s.NodeID == "paid" && s.Status == message.StatusSuccess {
					resumed.Add(1)
				}
			})
			results <- done{i, c, r, err}
		})
	}
	select {
	case <-allWaiting:
	case <-ctx.Done():
		t.Fatalf("only %d of %d executions reached their wait", waiting.Load(), n)
	}
	if sent := deliver(t, ctx, eng, "hot", `{"amount":7}`); sent.Matched != hot {
		t.Fatalf("the event of the hot key matched %d, want %d", sent.Matched, hot)
	}
	for i := range hot {
		_ = i
		select {
		case d := <-results:
			if d.e != nil {
				t.Fatalf("run %d: %v", d.i, d.e)
			}
			if d.i >= hot {
				t.Fatalf("execution %d (key %s) completed after the hot key's event", d.i, keyOf(d.i))
			}
			d.r.c = d.c
			d.r.status(message.CompletionCompleted)
			d.r.equal("$thanks", `{"amount":7,"key":"hot"}`)
		case <-ctx.Done():
			t.Fatal("the hot key's executions did not complete")
		}
	}
	if got := resumed.Load(); got != hot {
		t.Fatalf("%d waits resumed after the hot key's event, want %d", got, hot)
	}
	for i := hot; i < n; i++ {
		if sent := deliver(t, ctx, eng, keyOf(i), fmt.Sprintf(`{"amount":%d}`, i)); sent.Matched != 1 {
			t.Fatalf("the event of key %s matched %d, want 1", keyOf(i), sent.Matched)
		}
	}
	wg.Wait()
	close(results)
	for d := range results {
		if d.e != nil {
			t.Fatalf("run %d: %v", d.i, d.e)
		}
		d.r.c = d.c
		d.r.status(message.CompletionCompleted)
		d.r.equal("$thanks", fmt.Sprintf(`{"amount":%d,"key":%q}`, d.i, keyOf(d.i)))
		d.r.absent("$remind")
		if got := d.r.count("paid", message.StatusSuccess); got != 1 {
			t.Fatalf("execution %d: %d success statuses of its wait, want 1", d.i, got)
		}
	}
}

// EventBeforeWait: the event comes after the execution started but while
// its branch is still in a wait before the wait_for_event node; it matches
// no one then (matched 0), and the branch, reaching the node, gets it at
// once from the retained events instead of waiting for its timeout.
func EventBeforeWait(t *testing.T, rt Runtime, eng *engine.Engine) {
	def := eventWorkflow("event_before", "10m", `{"id":"before","type":"wait","parameters":{"amount":2}}`)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	key := fmt.Sprintf("early-%d", time.Now().UnixNano())
	sentCh := make(chan engine.EventSent, 1)
	var once sync.Once
	r := &result{t: t}
	var mu sync.Mutex
	start := time.Now()
	c, err := rt.Run(ctx, []byte(def), map[string]any{"order_id": key}, func(s *message.NodeStatus) {
		mu.Lock()
		r.add(s)
		mu.Unlock()
		if s.NodeID == "before" && s.Status == message.StatusWaiting {
			once.Do(func() { sentCh <- deliver(t, ctx, eng, key, `{"amount":3}`) })
		}
	})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if sent := <-sentCh; sent.Matched != 0 {
		t.Fatalf("the early event matched %d, want 0 (no branch was waiting yet)", sent.Matched)
	}
	r.c = c
	r.status(message.CompletionCompleted)
	r.equal("$thanks", fmt.Sprintf(`{"amount":3,"key":%q}`, key))
	r.absent("$remind")
	if took := time.Since(start); took > 5*time.Minute {
		t.Fatalf("completed after %s: the branch waited for its timeout", took)
	}
}

// EventTimeout: no event comes; after its timeout the node fails with
// EVENT_TIMEOUT and its error edge leads to "remind". An event sent after
// the timeout resumes nothing.
func EventTimeout(t *testing.T, rt Runtime, eng *engine.Engine) {
	def := eventWorkflow("event_timeout", "1s", "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	key := fmt.Sprintf("late-%d", time.Now().UnixNano())
	r := &result{t: t}
	var mu sync.Mutex
	c, err := rt.Run(ctx, []byte(def), map[string]any{"order_id": key}, func(s *message.NodeStatus) {
		mu.Lock()
		r.add(s)
		mu.Unlock()
	})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	r.c = c
	r.status(message.CompletionCompleted)
	r.equal("$remind", `{"reminded":true}`)
	r.absent("$thanks")
	var failed *message.NodeStatus
	for _, s := range r.statuses {
		if s.NodeID == "paid" && s.Status == message.StatusFailed {
			failed = s
		}
	}
	if failed == nil || failed.Error == nil || failed.Error.Code != engine.CodeEventTimeout {
		t.Fatalf("the wait's failed status %+v, want code %s\n%s", failed, engine.CodeEventTimeout, r.dump())
	}
	if sent := deliver(t, ctx, eng, key, `{}`); sent.Matched != 0 {
		t.Fatalf("an event after the timeout matched %d, want 0", sent.Matched)
	}
}
