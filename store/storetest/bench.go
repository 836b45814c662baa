package storetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/store"
)

// BenchAppendHistory measures statuses persisted per second through
// AppendHistory in batches of batch, as the server's consumer writes them:
// a running and a success status for each node, the nodes of 20 executions
// interleaved, some on split branches. It reports "statuses/s".
func BenchAppendHistory(b *testing.B, s store.Store, batch int) {
	ctx := context.Background()
	const executions = 20
	wf := fmt.Sprintf("bench_%d", time.Now().UnixNano())
	if _, err := s.CreateWorkflow(ctx, store.WorkflowInput{ID: wf, Definition: definition}); err != nil {
		b.Fatal(err)
	}
	var ids []string
	for i := range executions {
		id := fmt.Sprintf("%s_x%d", wf, i)
		if _, _, err := s.CreateExecution(ctx, store.ExecutionInput{ID: id, WorkflowID: wf}); err != nil {
			b.Fatal(err)
		}
		ids = append(ids, id)
	}
	if _, err := s.ClaimExecutions(ctx, store.Claim{Owner: "bench", Lease: time.Hour, Limit: executions}); err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	event := func(k int) store.HistoryEvent {
		exec := ids[k%executions]
		step := k / executions // this execution's step: node step/2, running then success
		status := message.StatusRunning
		if step%2 == 1 {
			status = message.StatusSuccess
		}
		node := fmt.Sprintf("n%d", step/2%50)
		var lineage []message.Frame
		if item := step / 100; item > 0 {
			lineage = []message.Frame{{SplitNodeID: "split", BranchID: fmt.Sprint(item), ItemIndex: item, TotalItems: 1 << 20}}
		}
		st := &message.NodeStatus{WorkflowID: wf, ExecutionID: exec, NodeID: node, Status: status, Attempt: 1,
			ExecutedAt: now, DurationMS: 3, LineageStack: lineage, Output: map[string]any{"ok": true, "n": k}}
		return store.HistoryEvent{ExecutionID: exec, DedupeKey: fmt.Sprintf("%d", k), Status: st, ReceivedAt: now}
	}
	events := make([]store.HistoryEvent, batch)
	b.ResetTimer()
	start := time.Now()
	for i := 0; b.Loop(); i++ {
		for j := range events {
			events[j] = event(i*batch + j)
		}
		out, err := s.AppendHistory(ctx, events)
		if err != nil {
			b.Fatal(err)
		}
		if len(out) != batch {
			b.Fatalf("recorded %d of %d", len(out), batch)
		}
	}
	b.ReportMetric(float64(b.N*batch)/time.Since(start).Seconds(), "statuses/s")
}

// BenchCreateExecution measures executions enqueued per second by
// concurrent callers (as the API's trigger handler does), half of them with
// an idempotency key. It reports "executions/s".
func BenchCreateExecution(b *testing.B, s store.Store) {
	ctx := context.Background()
	wf := fmt.Sprintf("bench_%d", time.Now().UnixNano())
	if _, err := s.CreateWorkflow(ctx, store.WorkflowInput{ID: wf, Definition: definition}); err != nil {
		b.Fatal(err)
	}
	// Open the pool's connections before timing.
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() { _, _ = s.GetWorkflow(ctx, wf, 0) })
	}
	wg.Wait()
	var n atomic.Int64
	b.SetParallelism(16) // 16 callers per CPU
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			in := store.ExecutionInput{ID: fmt.Sprintf("%s_x%d", wf, i), WorkflowID: wf, Input: []byte(`{"user_id":"u1"}`), Trigger: "api"}
			if i%2 == 0 {
				in.IdempotencyKey = fmt.Sprintf("k%d", i)
			}
			if _, _, err := s.CreateExecution(ctx, in); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(n.Load())/time.Since(start).Seconds(), "executions/s")
}
