package amqp

import (
	"context"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/broker/sign"
)

// TestFirstCopy: broker.Message.First travels to the consumer on an
// execution message published without delay, never on a delayed one (a
// delay queue may dead-letter twice), and it is signed: the header added to
// a signed copy that lacked it dead-letters that copy.
func TestFirstCopy(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	keys, err := sign.Parse("k1:0123456789abcdef0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Signing = keys
	b := open(t, cfg)
	got := consumeAll(t, b, broker.Execution, broker.ConsumeOptions{})
	dead := consumeAll(t, b, broker.DeadLetter, broker.ConsumeOptions{})

	first := execMessage("m-first", "exec-1")
	first.First = true
	plain := execMessage("m-plain", "exec-1")
	delayed := execMessage("m-delayed", "exec-1")
	delayed.First, delayed.Delay = true, 50*time.Millisecond
	mustPublish(t, b, first, plain)
	mustPublish(t, b, delayed)
	want := map[string]bool{"m-first": true, "m-plain": false, "m-delayed": false}
	for range want {
		d := next(t, got, "execution")
		if d.First != want[d.ID] {
			t.Errorf("%s delivered with First %v, want %v", d.ID, d.First, want[d.ID])
		}
		if d.Redelivered {
			t.Errorf("%s delivered as a redelivery", d.ID)
		}
	}

	// A signed copy of a message that was not a first copy, the header
	// added: its signature no longer holds.
	forged := execMessage("m-forged", "exec-1")
	body, err := broker.Encode(forged)
	if err != nil {
		t.Fatal(err)
	}
	pub := amqp091.Publishing{ContentType: contentType, DeliveryMode: amqp091.Persistent, MessageId: forged.ID, CorrelationId: forged.Key, Type: string(forged.Topic), Body: body}
	b.signInto(&pub, forged.Topic, forged.ID, forged.Key)
	pub.Headers[headerFirst] = true
	r, err := b.n.routeFor(&forged)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rawChannel(t).PublishWithContext(ctx, r.exchange, r.key, true, false, pub); err != nil {
		t.Fatal(err)
	}
	d := next(t, dead, "dead letter")
	if d.ID != "m-forged" || !strings.Contains(d.Reason, "signature") || d.First {
		t.Fatalf("dead letter %s (First %v), reason %q; want m-forged, a signature reason, not First", d.ID, d.First, d.Reason)
	}
	select {
	case d := <-got:
		t.Fatalf("forged first copy %s was handled", d.ID)
	default:
	}
}
