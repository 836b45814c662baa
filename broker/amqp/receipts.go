package amqp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/rune-org/rune/broker"
)

// receiptsBusyPause is how long CompletionRouted waits before trying again
// while another process reads the receipts queue.
const receiptsBusyPause = 50 * time.Millisecond

// CompletionRouted reports whether RabbitMQ routed a completion with key
// (its execution id) within the last receiptTTL, whether or not its
// publisher got the confirm: every completion is routed, in the same step,
// to workflow.completion and (by its BCC header) to
// workflow.completion.receipts, so a completion whose confirm was lost
// with its connection is known to be out when its copy is in the receipts
// queue. The engine asks before it publishes a completion again
// (engine.Config.CompletionRouted).
//
// On quorum queues (Config.QueueType "quorum", a RabbitMQ cluster) no
// completion has a receipt and it reports false at once: see receipted.
//
// It reads the queue as an exclusive consumer (RabbitMQ refuses a second
// one, so two readers never split the queue between them: a refused reader
// waits and tries again until ctx is done) and acknowledges nothing: closing
// its channel puts every receipt back. A receipt counts only with a valid
// signature when this broker verifies. A missing queue (a scheduler-only
// deployment before any worker declared it, or a RabbitMQ restart since)
// means false.
func (b *Broker) CompletionRouted(ctx context.Context, key string) (bool, error) {
	if !b.receipted() {
		return false, nil
	}
	for {
		found, busy, err := b.scanReceipts(ctx, key)
		if !busy {
			return found, err
		}
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("amqp broker: read %s: another reader holds it: %w", b.n.receipts, ctx.Err())
		case <-time.After(jitter(receiptsBusyPause)):
		}
	}
}

// receipted reports whether completions get receipts, that is whether a
// receipt proves that workflow.completion took its completion. It does when
// both queues live on one RabbitMQ node, which takes or loses them
// together. With quorum queues it does not: workflow.completion is a Raft
// group whose leader may be on another node than the receipts queue, and a
// node lost mid-publish can leave the receipt and lose the completion (the
// confirm lost with it). The cluster test saw 7 of 300 executions never
// complete that way, their completions taken for published. So a
// redelivered completer on quorum queues publishes the completion again,
// identical, rather than risk losing it.
func (b *Broker) receipted() bool { return !b.n.quorum }

// scanReceipts is one attempt of CompletionRouted; busy says another
// exclusive reader held the queue.
func (b *Broker) scanReceipts(ctx context.Context, key string) (found, busy bool, err error) {
	if b.isClosed() {
		return false, false, ErrClosed
	}
	ch, _, err := b.sub.channel(ctx)
	if err != nil {
		return false, false, err
	}
	defer ch.Close() // puts back every receipt read
	q, err := ch.QueueDeclarePassive(b.n.receipts, false, false, false, false, nil)
	if isNotFound(err) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("amqp broker: inspect %s: %w", b.n.receipts, err)
	}
	if q.Consumers > 0 {
		// Another reader holds some of them (unacknowledged, so not
		// counted in Messages).
		return false, true, nil
	}
	if q.Messages == 0 {
		return false, false, nil
	}
	if err := ch.Qos(min(q.Messages, 1000), 0, false); err != nil {
		return false, false, fmt.Errorf("amqp broker: read %s: %w", b.n.receipts, err)
	}
	ds, err := ch.ConsumeWithContext(ctx, b.n.receipts, "", false, true, false, false, nil)
	var ae *amqp091.Error
	if errors.As(err, &ae) && ae.Code == amqp091.AccessRefused && strings.Contains(ae.Reason, "exclusive") {
		return false, true, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("amqp broker: read %s: %w", b.n.receipts, err)
	}
	// The receipts there when it looked: a completion published since is
	// not the one asked about (its publisher is alive and will record it).
	// All of them, in order: a void after a receipt cancels it.
	idle := time.NewTimer(time.Second)
	defer idle.Stop()
	for range q.Messages {
		select {
		case d, ok := <-ds:
			if !ok {
				return false, false, fmt.Errorf("amqp broker: read %s: channel closed", b.n.receipts)
			}
			switch {
			case voidFor(b, &d, key):
				found = false
			case receiptFor(b, &d, key):
				found = true
			}
			idle.Reset(time.Second)
		case <-idle.C:
			// Some expired meanwhile.
			return found, false, nil
		case <-ctx.Done():
			return false, false, ctx.Err()
		}
	}
	return found, false, nil
}

// headerVoid marks a void: the receipt of the completion of its
// CorrelationId before it is not one. RabbitMQ routes a completion to
// workflow.completion and the receipts queue in one step, and nacks it when
// either refuses it: a quorum workflow.completion electing a leader after a
// node was lost did, while the receipts queue took its copy. That receipt
// would make the completion's next publisher believe it out and publish
// none. So a nacked completion's publisher voids its receipts first.
const headerVoid = "x-rune-void"

// voidFor reports whether d is a void of key's receipts, signed when this
// broker verifies.
func voidFor(b *Broker, d *amqp091.Delivery, key string) bool {
	v, _ := d.Headers[headerVoid].(bool)
	return v && d.CorrelationId == key && b.verify(d, broker.Completion) == nil
}

// voidReceipts publishes a void for each of keys to the receipts queue, on
// a channel of its own (the publisher's next batch waits for the nacked
// one), and waits up to 10 s for RabbitMQ to take them.
func (b *Broker) voidReceipts(keys []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := func() error {
		ch, _, err := b.pub.channel(ctx)
		if err != nil {
			return err
		}
		defer ch.Close()
		if err := ch.Confirm(false); err != nil {
			return err
		}
		var dcs []*amqp091.DeferredConfirmation
		for _, key := range keys {
			pub := amqp091.Publishing{Headers: amqp091.Table{headerVoid: true}, MessageId: "void:" + key, CorrelationId: key, Type: "void"}
			b.signInto(&pub, broker.Completion, pub.MessageId, key)
			dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, b.n.eventsX, receiptKey, false, false, pub)
			if err != nil {
				return err
			}
			dcs = append(dcs, dc)
		}
		for _, dc := range dcs {
			if ok, err := dc.WaitContext(ctx); err != nil || !ok {
				return fmt.Errorf("not confirmed (%v)", err)
			}
		}
		return nil
	}()
	if err != nil {
		b.log.Warn("amqp broker: could not void the receipts of nacked completions: a redelivered completer may take them for published", "executions", keys, "error", err)
	}
}

// receiptFor reports whether the receipt d is of a completion of key: d
// itself, or one of the completions of a batch, with a valid signature when
// this broker verifies.
func receiptFor(b *Broker, d *amqp091.Delivery, key string) bool {
	if d.ContentType != contentTypeBatch {
		return d.CorrelationId == key && b.verify(d, broker.Completion) == nil
	}
	items, err := b.openBatch(d, broker.Completion)
	return err == nil && slices.ContainsFunc(items, func(it batchItem) bool { return it.key == key })
}
