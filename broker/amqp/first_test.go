package amqp

import (
	"context"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/broker/sign"
)

// TestFirstCopy: broker.Message.First travels to the consumer on an
// execution message published without delay, never on a delayed one (a
// delay queue may dead-letter twice). With signing, the mark is a signature
// of its own message: copied onto another message it is ignored (that
// message is handled, not as a first copy), and the message's own signature
// is the one a Rune without first copies checks.
func TestFirstCopy(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Signing = keyring(t, "k1:0123456789abcdef0123456789abcdef")
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

	// The mark of m-first put on another message: ignored.
	forged := execMessage("m-forged", "exec-1")
	body, err := broker.Encode(forged)
	if err != nil {
		t.Fatal(err)
	}
	pub := amqp091.Publishing{ContentType: contentType, DeliveryMode: amqp091.Persistent, MessageId: forged.ID, CorrelationId: forged.Key, Type: string(forged.Topic), Body: body}
	b.signInto(&pub, forged.Topic, forged.ID, forged.Key)
	firstBody, err := broker.Encode(first)
	if err != nil {
		t.Fatal(err)
	}
	pub.Headers[headerFirst] = b.firstMark(first.Topic, first.ID, first.Key, firstBody)
	r, err := b.n.routeFor(&forged)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rawChannel(t).PublishWithContext(ctx, r.exchange, r.key, true, false, pub); err != nil {
		t.Fatal(err)
	}
	if d := next(t, got, "forged"); d.ID != "m-forged" || d.First {
		t.Fatalf("delivered %s with First %v, want m-forged without", d.ID, d.First)
	}

	// The mark is not the message's signature, which stays what a Rune
	// without first copies checks: nothing above was dead-lettered.
	mark := b.firstMark(first.Topic, first.ID, first.Key, firstBody)
	if err := b.cfg.Signing.Verify(sign.Signed{Topic: string(first.Topic), ID: first.ID, Key: first.Key, Body: firstBody}, "k1", mark); err == nil {
		t.Fatal("the first-copy mark verifies as the message's own signature; want them distinct")
	}
	select {
	case d := <-dead:
		t.Fatalf("dead-lettered %s: %s", d.ID, d.Reason)
	default:
	}
}
