package sqlite_test

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/broker/sqlite"
	"github.com/rune-org/rune/message"
)

// BenchmarkPublishConsume measures the durable embedded runtime's message
// path; ns/op and allocs/op are per message (published, consumed, acked).
//
//   - batch: one publisher sends batches of 100, a consumer with
//     Concurrency 2 acks.
//   - publishers: 64 goroutines publish one message at a time each and
//     wait for its commit; a consumer with Concurrency 64 acks.
//   - hops: like the engine on a chain, each execution handler publishes
//     a status and its successor before acking; a status consumer acks the
//     statuses; 1,000 chains run at once on an execution consumer with
//     Concurrency 256 (the worker's default on 2 cores). Both messages count.
func BenchmarkPublishConsume(b *testing.B) {
	body := &message.NodeExecution{MessageID: "m", WorkflowID: "wf", ExecutionID: "e", CurrentNode: "n", Attempt: 1,
		WorkflowDefinition: []byte(`{"id":"wf","nodes":[{"id":"n","type":"set"}]}`),
		AccumulatedContext: map[string]any{"$trigger": map[string]any{"i": 1.0}}}
	exec := broker.Message{Topic: broker.Execution, ID: "m", Key: "e", Body: body}
	st := broker.Message{Topic: broker.Status, Key: "e", Body: &message.NodeStatus{WorkflowID: "wf", ExecutionID: "e", NodeID: "n", Status: message.StatusSuccess, Attempt: 1}}

	// run consumes topic with concurrency n until total messages were
	// handled, and reports msgs/s.
	start := func(b *testing.B) (*sqlite.Broker, context.Context, func(total int64, done chan struct{}) func(context.Context, *broker.Delivery) error) {
		br := newBroker(b, openDB(b, filepath.Join(b.TempDir(), "bench.db")), sqlite.Options{})
		ctx, cancel := context.WithCancel(context.Background())
		b.Cleanup(func() { cancel(); br.Close() })
		var n atomic.Int64
		counter := func(total int64, done chan struct{}) func(context.Context, *broker.Delivery) error {
			return func(context.Context, *broker.Delivery) error {
				if n.Add(1) == total {
					close(done)
				}
				return nil
			}
		}
		return br, ctx, counter
	}
	report := func(b *testing.B) {
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	}

	b.Run("batch", func(b *testing.B) {
		br, ctx, counter := start(b)
		done := make(chan struct{})
		go br.Consume(ctx, broker.Execution, broker.ConsumeOptions{Concurrency: 2}, counter(int64(b.N), done))
		b.ReportAllocs()
		b.ResetTimer()
		batch := make([]broker.Message, 100)
		for i := range batch {
			batch[i] = exec
		}
		for sent := 0; sent < b.N; sent += len(batch) {
			if err := br.Publish(ctx, batch[:min(len(batch), b.N-sent)]...).Wait(ctx); err != nil {
				b.Fatal(err)
			}
		}
		<-done
		report(b)
	})

	b.Run("publishers", func(b *testing.B) {
		br, ctx, counter := start(b)
		done := make(chan struct{})
		go br.Consume(ctx, broker.Execution, broker.ConsumeOptions{Concurrency: 64}, counter(int64(b.N), done))
		b.ReportAllocs()
		b.ResetTimer()
		var next atomic.Int64
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() {
				for next.Add(1) <= int64(b.N) {
					if err := br.Publish(ctx, exec).Wait(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		<-done
		report(b)
	})

	b.Run("hops", func(b *testing.B) {
		br, ctx, counter := start(b)
		done := make(chan struct{})
		hopsTotal := int64(max(b.N/2, 1))
		seeds := min(1000, hopsTotal)
		var hops atomic.Int64
		go br.Consume(ctx, broker.Status, broker.ConsumeOptions{Concurrency: 4}, counter(hopsTotal, done))
		go br.Consume(ctx, broker.Execution, broker.ConsumeOptions{Concurrency: 256}, func(ctx context.Context, d *broker.Delivery) error {
			next := []broker.Message{st}
			if hops.Add(1)+seeds <= hopsTotal {
				next = append(next, exec)
			}
			return br.Publish(ctx, next...).Wait(ctx)
		})
		b.ReportAllocs()
		b.ResetTimer()
		seed := make([]broker.Message, seeds)
		for i := range seed {
			seed[i] = exec
		}
		if err := br.Publish(ctx, seed...).Wait(ctx); err != nil {
			b.Fatal(err)
		}
		<-done
		report(b)
	})
}
