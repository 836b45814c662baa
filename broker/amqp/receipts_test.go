package amqp

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/message"
)

func completionMessage(exec string) broker.Message {
	return broker.Message{Topic: broker.Completion, ID: exec, Key: exec, Body: &message.Completion{
		WorkflowID: "wf", ExecutionID: exec, Status: message.CompletionCompleted,
		FinalContext: map[string]any{}, CompletedAt: time.Now().UTC()}}
}

// A completion RabbitMQ routed is known to CompletionRouted (its receipt),
// to any number of callers at once, and stays so (nothing is taken from
// the receipts queue); one never published is not. Consumers of
// workflow.completion get it once, without the BCC header.
func TestCompletionRouted(t *testing.T) {
	t.Parallel()
	b := open(t, testConfig(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 50 {
		mustPublish(t, b, completionMessage(fmt.Sprintf("exec-%02d", i)))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 8 {
		wg.Go(func() {
			for _, c := range []struct {
				key  string
				want bool
			}{{fmt.Sprintf("exec-%02d", 49-i), true}, {"exec-never", false}} {
				got, err := b.CompletionRouted(ctx, c.key)
				if err != nil || got != c.want {
					errs <- fmt.Errorf("CompletionRouted(%s) = %v, %v; want %v", c.key, got, err, c.want)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	ch := rawChannel(t)
	q, err := ch.QueueDeclarePassive(b.n.receipts, false, false, false, false, nil)
	if err != nil || q.Messages != 50 {
		t.Fatalf("receipts queue after the reads: %d messages, %v; want all 50 back", q.Messages, err)
	}
	d := next(t, consumeAll(t, b, broker.Completion, broker.ConsumeOptions{}), "a completion")
	if d.Key != "exec-00" {
		t.Fatalf("first completion %q, want exec-00", d.Key)
	}
	raw, ok, err := ch.Get(b.n.completion, true)
	if err != nil || !ok {
		t.Fatalf("get a completion: %v %v", ok, err)
	}
	if _, has := raw.Headers["BCC"]; has {
		t.Fatalf("a consumer sees the BCC header: %v", raw.Headers)
	}
}
