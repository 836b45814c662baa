package amqp

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/message"
)

// rejectAll dead-letters every execution message until t ends, with a
// reason naming the message.
func rejectAll(t *testing.T, b *Broker) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- b.Consume(ctx, broker.Execution, broker.ConsumeOptions{}, func(ctx context.Context, d *broker.Delivery) error {
			return fmt.Errorf("poison %s: %w", d.ID, broker.ErrReject)
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// waitDeadLetters waits until the dead-letter queue holds n messages and
// returns them.
func waitDeadLetters(t *testing.T, b *Broker, n int) []DeadLetter {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		dls, total, err := b.DeadLetters(ctx, 0)
		if err != nil {
			t.Fatalf("DeadLetters: %v", err)
		}
		if len(dls) == n && total == n {
			return dls
		}
		select {
		case <-ctx.Done():
			t.Fatalf("dead-letter queue holds %d (listed %d), want %d", total, len(dls), n)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Listing the dead-letter queue shows each message's reason, topic and
// original body, and takes nothing away: a second listing sees the same.
func TestDeadLettersListKeepsMessages(t *testing.T) {
	t.Parallel()
	b := open(t, testConfig(t))
	rejectAll(t, b)
	m1, m2 := execMessage("dl-1", "exec-a"), execMessage("dl-2", "exec-b")
	mustPublish(t, b, m1, m2)
	dls := waitDeadLetters(t, b, 2)
	for i, m := range []broker.Message{m1, m2} {
		d := dls[i]
		want, _ := broker.Encode(m)
		if d.ID != m.ID || d.Key != m.Key || d.Topic != broker.Execution || string(d.Body) != string(want) {
			t.Errorf("dead letter %d = id %q key %q topic %q body %s, want %q %q %q %s", i, d.ID, d.Key, d.Topic, d.Body, m.ID, m.Key, broker.Execution, want)
		}
		if !strings.Contains(d.Reason, "poison "+m.ID) {
			t.Errorf("dead letter %s reason %q, want the consumer's error", d.ID, d.Reason)
		}
	}
	ctx := context.Background()
	again, total, err := b.DeadLetters(ctx, 1)
	if err != nil || len(again) != 1 || total != 2 || again[0].ID != "dl-1" {
		t.Fatalf("second listing (limit 1) = %d messages of %d, first %v, err %v; want dl-1 of 2", len(again), total, again, err)
	}
}

// Replay publishes the original to its topic and removes it from the
// dead-letter queue; the others stay; an unknown id is an error naming it.
func TestDeadLettersReplay(t *testing.T) {
	t.Parallel()
	b := open(t, testConfig(t))
	ctx, cancelReject := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- b.Consume(ctx, broker.Execution, broker.ConsumeOptions{}, func(ctx context.Context, d *broker.Delivery) error {
			return fmt.Errorf("poison: %w", broker.ErrReject)
		})
	}()
	m1, m2 := execMessage("rp-1", "exec-a"), execMessage("rp-2", "exec-b")
	mustPublish(t, b, m1, m2)
	waitDeadLetters(t, b, 2)
	cancelReject()
	<-done

	got := consumeAll(t, b, broker.Execution, broker.ConsumeOptions{})
	rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ids, err := b.Replay(rctx, []string{"rp-2"}, func(m broker.Message) (broker.Message, error) {
		e := *m.Body.(*message.NodeExecution)
		e.AccumulatedContext = map[string]any{"$fixed": true}
		m.Body = &e
		return m, nil
	})
	if err != nil || len(ids) != 1 || ids[0] != "rp-2" {
		t.Fatalf("Replay(rp-2) = %v, %v; want [rp-2]", ids, err)
	}
	d := next(t, got, "replayed message")
	e, ok := d.Body.(*message.NodeExecution)
	if d.ID != "rp-2" || d.Key != "exec-b" || !ok || e.AccumulatedContext["$fixed"] != true {
		t.Fatalf("replayed delivery id %q key %q body %#v, want rp-2 on exec-b with the fixed context", d.ID, d.Key, d.Body)
	}
	left := waitDeadLetters(t, b, 1)
	if left[0].ID != "rp-1" {
		t.Errorf("left in the dead-letter queue: %s, want rp-1", left[0].ID)
	}
	if _, err := b.Replay(rctx, []string{"rp-2", "nope"}, nil); err == nil || !strings.Contains(err.Error(), "nope") || !strings.Contains(err.Error(), "rp-2") {
		t.Errorf("Replay of ids no longer there: %v, want an error naming rp-2 and nope", err)
	}
	waitDeadLetters(t, b, 1) // a failed replay takes nothing away

	n, err := b.PurgeDeadLetters(rctx)
	if err != nil || n != 1 {
		t.Fatalf("PurgeDeadLetters = %d, %v; want 1", n, err)
	}
	waitDeadLetters(t, b, 0)
}
