package amqp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/rune-org/rune/broker"
)

// DeadLetter is one message of the dead-letter queue (workflow.dlq). Its
// Reason may be RabbitMQ's own ("expired in queue workflow.execution"), and
// its At zero when unknown.
type DeadLetter = broker.DeadLettered

// DeadLetters returns up to limit messages of the dead-letter queue (all
// when limit ≤ 0), oldest first, and how many the queue held (a batch of
// execution messages that expired counts each of its messages when read,
// once when not). Nothing is
// taken away: the messages are fetched unacknowledged on a channel of
// their own and go back to their places in the queue when it closes.
// Another reader of the queue does not see them meanwhile.
func (b *Broker) DeadLetters(ctx context.Context, limit int) ([]DeadLetter, int, error) {
	ch, err := b.dlqChannel(ctx)
	if err != nil {
		return nil, 0, err
	}
	defer ch.Close() // returns every fetched message to the queue
	q, err := ch.QueueDeclarePassive(b.n.dlq, true, false, false, false, versioned(nil))
	if err != nil {
		return nil, 0, fmt.Errorf("amqp broker: dead-letter queue %s: %w", b.n.dlq, err)
	}
	var out []DeadLetter
	read := 0
	for limit <= 0 || len(out) < limit {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		d, ok, err := ch.Get(b.n.dlq, false)
		if err != nil {
			return nil, 0, fmt.Errorf("amqp broker: read dead-letter queue %s: %w", b.n.dlq, err)
		}
		if !ok {
			break
		}
		read++
		out = append(out, b.deadLettersOf(&d)...)
	}
	total := q.Messages - read + len(out)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, total, nil
}

// Replay publishes the dead letters whose ids are given to the topics they
// were consumed from, unchanged, and removes each from the dead-letter
// queue only once RabbitMQ has confirmed its publish: a failure or crash in
// between leaves it in the queue (and at worst publishes it twice, which
// consumers recognise by its id). A message held several times in the queue
// is published once and every copy removed. fix, when not nil, may change a
// message before it is published (e.g. give it a corrected workflow
// definition); its error stops the replay. Replay returns the ids
// replayed; ids not found are an error that names them. Only execution
// and timeout messages can be replayed.
func (b *Broker) Replay(ctx context.Context, ids []string, fix func(broker.Message) (broker.Message, error)) ([]string, error) {
	if len(ids) == 0 {
		return nil, errors.New("amqp broker: replay: no message ids given")
	}
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	ch, err := b.dlqChannel(ctx)
	if err != nil {
		return nil, err
	}
	defer ch.Close() // what was not replayed goes back to the queue
	// Fetch everything first: the ids may be anywhere in the queue.
	var matches []amqp091.Delivery
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		d, ok, err := ch.Get(b.n.dlq, false)
		if err != nil {
			return nil, fmt.Errorf("amqp broker: read dead-letter queue %s: %w", b.n.dlq, err)
		}
		if !ok {
			break
		}
		if want[d.MessageId] || slices.ContainsFunc(b.deadLettersOf(&d), func(dl DeadLetter) bool { return want[dl.ID] }) {
			matches = append(matches, d)
		}
	}
	published := map[string]bool{}
	var done []string
	for i := range matches {
		d := &matches[i]
		dls := b.deadLettersOf(d)
		for _, dl := range dls {
			switch {
			case want[dl.ID] || len(dls) == 1:
				if published[dl.ID] {
					continue
				}
				if err := b.republish(ctx, dl, fix); err != nil {
					return done, err
				}
				published[dl.ID] = true
				done = append(done, dl.ID)
			default:
				// Another message of the same batch: it stays a dead
				// letter, now on its own.
				it := &batchItem{id: dl.ID, key: dl.Key, body: dl.Body}
				if err := b.toDLX(ctx, dl.Topic, dl.Reason, b.plain(dl.Topic, it, dl.At)); err != nil {
					return done, fmt.Errorf("amqp broker: keep message %s of a batch in %s: %w (the batch stays there)", dl.ID, b.n.dlq, err)
				}
			}
		}
		if err := d.Ack(false); err != nil {
			return done, fmt.Errorf("amqp broker: remove replayed message %s from %s: %w (it stays there and may be replayed again)", dls[0].ID, b.n.dlq, err)
		}
	}
	var missing []string
	for id := range want {
		if !published[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return done, fmt.Errorf("amqp broker: not in the dead-letter queue %s: %s", b.n.dlq, strings.Join(missing, ", "))
	}
	return done, nil
}

// republish publishes a dead letter's original to its topic and waits for
// the confirm.
func (b *Broker) republish(ctx context.Context, dl DeadLetter, fix func(broker.Message) (broker.Message, error)) error {
	if dl.Topic != broker.Execution && dl.Topic != broker.Timeout {
		return fmt.Errorf("amqp broker: message %s came from topic %q: only %s and %s messages can be replayed", dl.ID, dl.Topic, broker.Execution, broker.Timeout)
	}
	body, err := broker.Decode(dl.Topic, dl.Body)
	if err != nil {
		return fmt.Errorf("amqp broker: message %s cannot be replayed: its body does not decode as a %s message: %w", dl.ID, dl.Topic, err)
	}
	m := broker.Message{Topic: dl.Topic, ID: dl.ID, Key: dl.Key, Body: body}
	if fix != nil {
		if m, err = fix(m); err != nil {
			return fmt.Errorf("message %s: %w", dl.ID, err)
		}
	}
	if err := b.Publish(ctx, m).Wait(ctx); err != nil {
		return fmt.Errorf("amqp broker: replay message %s to %s: %w", dl.ID, dl.Topic, err)
	}
	return nil
}

// PurgeDeadLetters deletes every message of the dead-letter queue and
// returns how many there were.
func (b *Broker) PurgeDeadLetters(ctx context.Context) (int, error) {
	ch, err := b.dlqChannel(ctx)
	if err != nil {
		return 0, err
	}
	defer ch.Close()
	n, err := ch.QueuePurge(b.n.dlq, false)
	if err != nil {
		return 0, fmt.Errorf("amqp broker: purge dead-letter queue %s: %w", b.n.dlq, err)
	}
	return n, nil
}

// dlqChannel opens a channel of its own for reading the dead-letter queue.
func (b *Broker) dlqChannel(ctx context.Context) (*amqp091.Channel, error) {
	if b.isClosed() {
		return nil, ErrClosed
	}
	ch, _, err := b.sub.channel(ctx)
	return ch, err
}

// deadLettersOf reads the operator's view of a dead-letter delivery: one
// dead letter, or each message of a batch.
func (b *Broker) deadLettersOf(d *amqp091.Delivery) []DeadLetter {
	topic, reason := b.deadLetterOrigin(d)
	if d.ContentType == contentTypeBatch {
		if items, err := decodeBatch(d.Body); err == nil {
			dls := make([]DeadLetter, len(items))
			for i, it := range items {
				dls[i] = DeadLetter{ID: it.id, Key: it.key, Topic: topic, Reason: reason, At: d.Timestamp, Body: it.body}
			}
			return dls
		}
	}
	del := broker.Delivery{Message: broker.Message{ID: d.MessageId, Key: d.CorrelationId, Topic: topic}, Reason: reason}
	fillBody(&del, d.Body)
	return []DeadLetter{{ID: del.ID, Key: del.Key, Topic: del.Topic, Reason: del.Reason, At: d.Timestamp, Body: d.Body}}
}
