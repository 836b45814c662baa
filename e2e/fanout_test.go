package e2e

import (
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/internal/bench"
	"github.com/rune-org/rune/internal/testinfra"
	"github.com/rune-org/rune/message"
)

// Two workers share a 10,000-item fan-out; one is killed with kill -9
// midway. The other finishes: the aggregate is right, and the execution
// completes exactly once. With shards=16 the aggregator's values live in
// shard keys written before each arrival is counted (coord/redis
// BarrierOptions.Shards), so a kill can fall between the two.
func TestFanoutSurvivesKill(t *testing.T) {
	for _, shards := range []string{"", "16"} {
		t.Run("shards="+shards, func(t *testing.T) {
			redisURL := ""
			if shards != "" {
				u, err := url.Parse(testinfra.RedisURL(t))
				if err != nil {
					t.Fatal(err)
				}
				q := u.Query()
				q.Set("shards", shards)
				u.RawQuery = q.Encode()
				redisURL = u.String()
			}
			fanoutSurvivesKill(t, newClusterOn(t, "", redisURL), shards != "")
		})
	}
}

func fanoutSurvivesKill(t *testing.T, c *cluster, sharded bool) {
	const items = 10000
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
	if p := cs.duplicateProblem(workers); p != "" {
		t.Fatal(p)
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
	// The sharded run went through the shards: the aggregator's 16 value
	// keys are still there, kept Retain after the completion.
	if shardKeys, err := c.redis.Keys(t.Context(), c.prefix+":{"+id+"/*").Result(); err != nil || sharded != (len(shardKeys) == 16) {
		t.Fatalf("%d shard keys of the aggregator (%v), want 16 with shards=16 and none without", len(shardKeys), err)
	}
	t.Logf("1 execution, %d items, completed once (%d duplicate completion messages, identical)", items, cs.dups)
}
