package memory_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/broker/memory"
	"github.com/rune-org/rune/message"
)

// BenchmarkPublishConsume measures the embedded runtime's message path; ns/op
// and allocs/op are per message.
//
//   - batch: one publisher sends batches of 100, a consumer with Concurrency 2 acks.
//   - chain: like the engine, each handler publishes one successor before
//     acking; 64 chains run at once on a consumer with Concurrency 2.
func BenchmarkPublishConsume(b *testing.B) {
	body := &message.NodeExecution{MessageID: "m", WorkflowID: "wf", ExecutionID: "e", CurrentNode: "n", Attempt: 1}

	b.Run("batch", func(b *testing.B) {
		br := memory.New(memory.Options{Logger: discard()})
		defer br.Close()
		ctx, cancel := context.WithCancel(context.Background())
		var n atomic.Int64
		done := make(chan struct{})
		total := int64(b.N)
		consumed := make(chan error, 1)
		go func() {
			consumed <- br.Consume(ctx, broker.Execution, broker.ConsumeOptions{Concurrency: 2}, func(context.Context, *broker.Delivery) error {
				if n.Add(1) == total {
					close(done)
				}
				return nil
			})
		}()
		b.ReportAllocs()
		b.ResetTimer()
		batch := make([]broker.Message, 100)
		for i := range batch {
			batch[i] = broker.Message{Topic: broker.Execution, ID: "m", Key: "e", Body: body}
		}
		for sent := 0; sent < b.N; sent += len(batch) {
			k := min(len(batch), b.N-sent)
			if err := br.Publish(ctx, batch[:k]...).Wait(ctx); err != nil {
				b.Fatal(err)
			}
		}
		<-done
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		cancel()
		<-consumed
	})

	b.Run("chain", func(b *testing.B) {
		br := memory.New(memory.Options{Logger: discard()})
		defer br.Close()
		ctx, cancel := context.WithCancel(context.Background())
		var n atomic.Int64
		done := make(chan struct{})
		total := int64(b.N)
		msg := broker.Message{Topic: broker.Execution, ID: "m", Key: "e", Body: body}
		consumed := make(chan error, 1)
		go func() {
			consumed <- br.Consume(ctx, broker.Execution, broker.ConsumeOptions{Concurrency: 2}, func(ctx context.Context, d *broker.Delivery) error {
				switch c := n.Add(1); {
				case c == total:
					close(done)
				case c < total:
					return br.Publish(ctx, msg).Wait(ctx)
				}
				return nil
			})
		}()
		b.ReportAllocs()
		b.ResetTimer()
		seed := make([]broker.Message, min(64, b.N))
		for i := range seed {
			seed[i] = msg
		}
		if err := br.Publish(ctx, seed...).Wait(ctx); err != nil {
			b.Fatal(err)
		}
		<-done
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		cancel()
		<-consumed
	})
}
