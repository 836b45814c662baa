package e2e

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/rune-org/rune/bench"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/message"
)

// Two workers share a 10,000-item fan-out; one is killed with kill -9
// midway. The other finishes: the aggregate is right, and the execution
// completes exactly once.
func TestFanoutSurvivesKill(t *testing.T) {
	const items = 10000
	c := newCluster(t, "")
	workers := []*proc{c.startWorker(), c.startWorker()}
	waitFor(t, 30*time.Second, "both workers consuming", func() bool {
		return inspectQueue(t, c, c.prefix+".workflow.execution").Consumers == 2
	})
	wf := c.compile(bench.FanoutWorkflow())
	cs := c.collect()
	input := make([]any, items)
	for i := range input {
		input[i] = map[string]any{"n": i}
	}
	id := engine.NewExecutionID(time.Now())
	events, err := c.master.Follow(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	var gathered atomic.Int64
	go func() {
		for ev := range events {
			if s, ok := ev.Body.(*message.NodeStatus); ok && s.NodeID == "gather" && s.Status == message.StatusWaiting {
				if n, ok := s.Details["processed"].(float64); ok && int64(n) > gathered.Load() {
					gathered.Store(int64(n))
				}
			}
		}
	}()
	c.startAll(wf, []string{id}, func(int) any { return map[string]any{"items": input} })
	// Kill once a part of the items has been gathered: the rest is queued
	// or in the killed worker's hands.
	waitFor(t, 120*time.Second, "2,000 items gathered", func() bool { return gathered.Load() >= 2000 })
	if cs.distinct() != 0 || gathered.Load() >= items {
		t.Fatal("the fan-out completed before the kill: it tested nothing")
	}
	t.Logf("killing worker 1 with %d of %d items gathered", gathered.Load(), items)
	if err := workers[0].cmd.Process.Kill(); err != nil {
		t.Fatalf("kill -9 worker 1: %v", err)
	}
	cs.waitDistinct(1, 180*time.Second)
	workers[1].terminate(t, 60*time.Second)
	cs.drain(c)
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if len(cs.mismatches) > 0 {
		t.Fatalf("completions differ: %v", cs.mismatches)
	}
	comp := cs.first[id]
	if comp == nil || comp.Status != "completed" {
		t.Fatalf("completion %+v, want completed", comp)
	}
	agg, _ := comp.FinalContext["$gather"].(map[string]any)
	got, _ := agg["items"].([]any)
	if len(got) != items || agg["succeeded"] != float64(items) || agg["failed"] != 0.0 || agg["skipped"] != 0.0 {
		t.Fatalf("aggregate: %d items, succeeded %v, failed %v, skipped %v", len(got), agg["succeeded"], agg["failed"], agg["skipped"])
	}
	for i, v := range got {
		if v != float64(2*i) {
			t.Fatalf("items[%d] = %v, want %d", i, v, 2*i)
		}
	}
	t.Logf("1 execution, %d items, completed once (%d duplicate completion messages, identical)", items, cs.dups)
}
