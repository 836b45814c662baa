package amqp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/rune-org/rune/broker"
)

// Batches of execution, status and completion messages (Config.MessageBatch).
//
// RabbitMQ's work for a message is mostly per message, not per byte:
// routing, enqueueing, indexing, delivering, acking and confirming it. While
// one batch of a publishing channel waits for its confirm, the messages
// published meanwhile on that channel (all but delayed ones and timeouts)
// queue up, and go out when the confirm comes: the statuses as one AMQP
// message, the execution messages of one queue as another, the completions
// as a third; statuses and completions are routed to every execution's key
// in them (BCC), so that each follower gets them and keeps its own
// execution's, and completions to the receipts queue too. A message
// published while nothing waits goes out at once, alone, so an idle system
// waits for nothing. A consumer hands each message of a batch to its own
// handler and settles the batch when all have been settled (consume.go).
// Everything a consumer sees of a message (id, key, trace, first copy)
// travels inside the batch's body, which the batch's signature covers.

const (
	// contentTypeBatch marks an AMQP message whose body is a batch.
	contentTypeBatch = "application/vnd.rune.batch"
	// batchVersion is the first byte of a batch's body.
	batchVersion = 1
	// maxBatchItems bounds the messages a batch may hold when decoded:
	// more is not a batch any Rune publishes.
	maxBatchItems = 4096
	// batchTopic is what a batch's signature signs in place of the topic,
	// so that a batch's signature cannot pass for a message's.
	batchTopic = "+batch"
	// headerRedelivered marks a message of a batch that its consumer
	// published again on its own because its handler failed: it is
	// delivered with Redelivered set, as RabbitMQ's redelivery would be.
	headerRedelivered = "x-rune-redelivered"
)

// batchItem is one message of a batch.
type batchItem struct {
	id, key, trace string
	first          bool
	body           []byte
	// priority is the AMQP priority of an execution message (issue 35),
	// not encoded: a batch holds messages of one priority, and goes with it.
	priority uint8
}

// encodeBatch writes items as a batch body: the version, the count, and for
// each message its id, key, trace, first-copy flag and body, strings and
// body each preceded by their length (uvarint).
func encodeBatch(items []batchItem) []byte {
	n := 1 + binary.MaxVarintLen64
	for i := range items {
		n += 4*binary.MaxVarintLen64 + 1 + len(items[i].id) + len(items[i].key) + len(items[i].trace) + len(items[i].body)
	}
	buf := make([]byte, 0, n)
	buf = append(buf, batchVersion)
	buf = binary.AppendUvarint(buf, uint64(len(items)))
	for i := range items {
		it := &items[i]
		for _, s := range []string{it.id, it.key, it.trace} {
			buf = binary.AppendUvarint(buf, uint64(len(s)))
			buf = append(buf, s...)
		}
		var flags byte
		if it.first {
			flags = 1
		}
		buf = append(buf, flags)
		buf = binary.AppendUvarint(buf, uint64(len(it.body)))
		buf = append(buf, it.body...)
	}
	return buf
}

// errBatch is the error of a body that is not a batch.
var errBatch = errors.New("malformed batch")

// decodeBatch reads a batch body. The items' bodies share buf.
func decodeBatch(buf []byte) ([]batchItem, error) {
	if len(buf) == 0 || buf[0] != batchVersion {
		return nil, fmt.Errorf("%w: unknown version", errBatch)
	}
	buf = buf[1:]
	count, n := binary.Uvarint(buf)
	if n <= 0 || count == 0 || count > maxBatchItems {
		return nil, fmt.Errorf("%w: count", errBatch)
	}
	buf = buf[n:]
	next := func(what string) ([]byte, error) {
		l, n := binary.Uvarint(buf)
		if n <= 0 || l > uint64(len(buf)-n) {
			return nil, fmt.Errorf("%w: %s", errBatch, what)
		}
		b := buf[n : n+int(l)]
		buf = buf[n+int(l):]
		return b, nil
	}
	items := make([]batchItem, count)
	for i := range items {
		var f [3][]byte
		for j, what := range []string{"id", "key", "trace"} {
			b, err := next(fmt.Sprintf("message %d: %s", i, what))
			if err != nil {
				return nil, err
			}
			f[j] = b
		}
		if len(buf) == 0 || buf[0] > 1 {
			return nil, fmt.Errorf("%w: message %d: flags", errBatch, i)
		}
		first := buf[0] == 1
		buf = buf[1:]
		body, err := next(fmt.Sprintf("message %d: body", i))
		if err != nil {
			return nil, err
		}
		items[i] = batchItem{id: string(f[0]), key: string(f[1]), trace: string(f[2]), first: first, body: body}
	}
	if len(buf) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last message", errBatch, len(buf))
	}
	return items, nil
}

// openBatch verifies (on topic Execution, when this broker verifies) and
// decodes the batch d. Its error wraps broker.ErrReject.
func (b *Broker) openBatch(d *amqp091.Delivery, topic broker.Topic) ([]batchItem, error) {
	if topic != broker.DeadLetter {
		if err := b.verify(d, topic+batchTopic); err != nil {
			return nil, err
		}
	}
	items, err := decodeBatch(d.Body)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", broker.ErrReject, err)
	}
	return items, nil
}

// startBatch hands each message of the batch d to a handler of its own, in
// a slot (take, release), and settles d once every one has been settled.
// It returns false when ctx ended first.
func (c *consumer) startBatch(ctx context.Context, d *amqp091.Delivery, take func() bool, release func(), wg *sync.WaitGroup) bool {
	items, err := c.b.openBatch(d, c.topic)
	if err != nil {
		if !take() {
			_ = d.Nack(false, true)
			return false
		}
		wg.Go(func() {
			defer release()
			if c.topic == broker.DeadLetter {
				c.handle(ctx, d) // a dead letter as it is, its body Raw
				return
			}
			c.reject(ctx, &single{c: c, d: d}, &broker.Delivery{Message: broker.Message{Topic: c.topic, ID: "(a batch)"}}, err)
		})
		return true
	}
	run := &batchRun{c: c, d: d, left: len(items)}
	var origin broker.Topic
	var reason string
	if c.topic == broker.DeadLetter {
		origin, reason = c.b.deadLetterOrigin(d)
	}
	for i := range items {
		if !take() {
			// Stopping: the messages not started go back on their own,
			// so that those already handled are not delivered again.
			for j := i; j < len(items); j++ {
				(&inBatch{run: run, item: &items[j]}).requeue()
			}
			return false
		}
		wg.Go(func() {
			defer release()
			it := &items[i]
			del := &broker.Delivery{
				Message:     broker.Message{Topic: c.topic, ID: it.id, Key: it.key, Trace: it.trace},
				Redelivered: d.Redelivered,
			}
			s := &inBatch{run: run, item: it}
			if c.topic == broker.DeadLetter {
				del.Topic, del.Reason = origin, reason
				fillBody(del, it.body)
			} else {
				del.First = it.first
				body, err := broker.Decode(c.topic, it.body)
				if err != nil {
					c.reject(ctx, s, del, err)
					return
				}
				del.Body = body
			}
			c.settle(ctx, s, del, c.h(ctx, del))
		})
	}
	return true
}

// batchRun is a batch being handled.
type batchRun struct {
	c  *consumer
	d  *amqp091.Delivery
	mu sync.Mutex
	// left is how many of its messages are not settled yet; back is set
	// when one could not be settled on its own: the whole batch goes back
	// to its queue.
	left int
	back bool
}

// settled records n messages settled (back: one of them could not be) and
// settles the batch after its last.
func (r *batchRun) settled(n int, back bool) {
	r.mu.Lock()
	r.left -= n
	r.back = r.back || back
	last, back := r.left == 0, r.back
	r.mu.Unlock()
	if !last {
		return
	}
	s := &single{c: r.c, d: r.d}
	if back {
		s.requeue()
	} else {
		s.ack()
	}
}

// inBatch is the settlement of one message of a batch. Its requeue (but a
// status's or completion's) and dead letter publish it on its own, so that
// the others of its batch are acked; when that fails the whole batch goes
// back to its queue (the others are then delivered again, as after a
// crash).
type inBatch struct {
	run  *batchRun
	item *batchItem
}

func (s *inBatch) ack() { s.run.settled(1, false) }

func (s *inBatch) requeue() {
	c := s.run.c
	if c.topic == broker.Status || c.topic == broker.Completion {
		// Published again, a status would go to the end of its queue,
		// behind later statuses of its execution, and a status or
		// completion to its followers again: the batch goes back to its
		// place instead, and its consumer takes the messages it handled
		// again as redeliveries.
		s.run.settled(1, true)
		return
	}
	// Publish it again even while shutting down: the batch is acked
	// unless this fails.
	ctx, cancel := context.WithTimeout(context.Background(), deadLetterTimeout)
	defer cancel()
	err := c.b.requeueItem(ctx, c.topic, s.run.d, s.item)
	if err != nil {
		c.log.Debug("amqp broker: cannot return a message of a batch on its own, returning the batch", "id", s.item.id, "error", err)
	}
	s.run.settled(1, err != nil)
}

func (s *inBatch) deadLetter(ctx context.Context, reason string) error {
	c := s.run.c
	return c.b.toDLX(ctx, c.topic, reason, c.b.plain(c.topic, s.item.again(), s.run.d.Timestamp))
}

// again is a copy of the message to publish again: never a first copy.
func (it *batchItem) again() *batchItem {
	cp := *it
	cp.first = false
	return &cp
}

// requeueItem publishes the message it of the batch d, consumed on topic,
// on its own to where the batch came from, marked redelivered, and waits
// for the confirm.
func (b *Broker) requeueItem(ctx context.Context, topic broker.Topic, d *amqp091.Delivery, it *batchItem) error {
	if topic == broker.DeadLetter {
		origin, reason := b.deadLetterOrigin(d)
		return b.toDLX(ctx, origin, reason, b.plain(origin, it.again(), d.Timestamp))
	}
	r, err := b.n.routeFor(&broker.Message{Topic: topic, ID: it.id, Key: it.key})
	if err != nil {
		return err
	}
	o := outgoing{exchange: r.exchange, key: r.key, id: it.id, topic: topic, pub: b.plain(topic, it.again(), d.Timestamp)}
	o.pub.Headers[headerRedelivered] = true
	return b.send(ctx, it.key, []outgoing{o}).Wait(ctx)
}
