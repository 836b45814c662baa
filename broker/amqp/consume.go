package amqp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/rune-org/rune/broker"
)

const (
	// maxReason bounds the x-rune-reason header.
	maxReason = 4096
	// deadLetterTimeout bounds publishing one dead letter.
	deadLetterTimeout = 30 * time.Second
)

// Consume runs opts.Concurrency handlers (default 1) on the messages of
// topic, with opts.Prefetch (default 2 × Concurrency) unacked messages
// handed over by RabbitMQ at once, until ctx is done; then it stops taking
// messages, hands the prefetched ones back, waits for the running handlers
// (which see their ctx done) and returns nil. It returns ErrClosed when the
// broker closes first, and an error at once when RabbitMQ refuses the
// consumer for good (no read permission on the queue, queue missing).
//
// Outcomes: a handler's nil acks the message. An error wrapping
// broker.ErrReject publishes it to the dead-letter queue with the error as
// x-rune-reason and the topic as x-rune-topic, and acks it once that is
// confirmed; a body that does not decode is dead-lettered the same way
// without calling the handler. (A rejected dead letter is dropped, with a
// log.) Any other error returns the message to its queue after
// Config.RedeliveryPause; a handler returning while ctx is done returns it at
// once, for another consumer. When the connection or channel is lost, the
// consumer resumes on the next connection; RabbitMQ redelivers what was
// unacked (Redelivered set).
//
// With Config.ExecutionQueues n > 1, Consume(broker.Execution) reads all n
// execution queues, each with Prefetch/n unacked messages (at least
// Concurrency), with Concurrency handlers at once in all; it returns when all have stopped, and the first
// error stops the others.
func (b *Broker) Consume(ctx context.Context, topic broker.Topic, opts broker.ConsumeOptions, h broker.Handler) error {
	queues, err := b.n.queuesFor(topic)
	if err != nil {
		return err
	}
	if len(queues) == 1 {
		return b.consumeQueue(ctx, topic, queues[0], opts, h, nil)
	}
	// Every queue gets Concurrency goroutines (one execution's messages are
	// all in one queue, which must be able to feed every handler) and a
	// shared semaphore keeps the handlers running at once to Concurrency in
	// all. Prefetch is shared out, but a queue keeps at least Concurrency:
	// the whole Prefetch on each held twice as many messages back from
	// other workers and doubled the bench's hop p50 (docs/benchmarks.md).
	conc := max(opts.Concurrency, 1)
	if opts.Prefetch <= 0 {
		opts.Prefetch = 2 * conc
	}
	opts.Prefetch = max((opts.Prefetch+len(queues)-1)/len(queues), conc)
	sem := make(chan struct{}, conc)
	qctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(queues))
	var wg sync.WaitGroup
	for i, q := range queues {
		wg.Go(func() {
			if errs[i] = b.consumeQueue(qctx, topic, q, opts, h, sem); errs[i] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// consumeQueue is Consume on one queue of topic; sem, when not nil, is
// shared by the queues of one Consume and bounds their handlers in all.
func (b *Broker) consumeQueue(ctx context.Context, topic broker.Topic, queue string, opts broker.ConsumeOptions, h broker.Handler, sem chan struct{}) error {
	if !b.enter() {
		return ErrClosed
	}
	defer b.wg.Done()
	conc := max(opts.Concurrency, 1)
	prefetch := opts.Prefetch
	if prefetch <= 0 {
		prefetch = 2 * conc
	}
	// Handlers see ctx, and also the broker closing.
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-b.closing:
			cancel()
		case <-hctx.Done():
		}
	}()
	log := b.log.With("topic", topic, "queue", queue)
	c := &consumer{b: b, topic: topic, h: h, log: log, sem: sem}

	pause := b.cfg.ReconnectMin
	redeclared := false
	for hctx.Err() == nil {
		ch, deliveries, tag, err := b.subscribe(hctx, queue, prefetch)
		if err != nil {
			if hctx.Err() != nil || errors.Is(err, ErrClosed) {
				break
			}
			if isNotFound(err) && !redeclared {
				// Someone deleted the queue: declare the topology again, once.
				redeclared = true
				if rerr := b.redeclare(hctx); rerr != nil {
					log.Warn("amqp broker: cannot declare the topology again", "error", rerr)
				}
				continue
			}
			if isPermanent(err) {
				return fmt.Errorf("amqp broker: consume %s: %w", topic, err)
			}
			log.Warn("amqp broker: cannot consume, retrying", "error", err, "pause", pause)
			if !sleep(hctx.Done(), jitter(pause)) {
				break
			}
			pause = min(2*pause, b.cfg.ReconnectMax)
			continue
		}
		redeclared = false
		opened := time.Now()
		c.serve(hctx, ch, deliveries, tag, conc)
		_ = ch.Close() // what is still unacked goes back to the queue
		if hctx.Err() != nil {
			break
		}
		if time.Since(opened) > time.Minute {
			pause = b.cfg.ReconnectMin
		}
		log.Warn("amqp broker: consumer channel lost, resuming", "pause", pause)
		if !sleep(hctx.Done(), jitter(pause)) {
			break
		}
		pause = min(2*pause, b.cfg.ReconnectMax)
	}
	if ctx.Err() == nil && b.isClosed() {
		return ErrClosed
	}
	return nil
}

// subscribe opens a consuming channel on queue.
func (b *Broker) subscribe(ctx context.Context, queue string, prefetch int) (*amqp091.Channel, <-chan amqp091.Delivery, string, error) {
	ch, _, err := b.sub.channel(ctx)
	if err != nil {
		return nil, nil, "", err
	}
	if err := ch.Qos(prefetch, 0, false); err != nil {
		_ = ch.Close()
		return nil, nil, "", fmt.Errorf("set prefetch %d on queue %s: %w", prefetch, queue, err)
	}
	tag := b.cfg.Name + "." + randomHex()
	deliveries, err := ch.Consume(queue, tag, false, false, false, false, nil)
	if err != nil {
		_ = ch.Close()
		return nil, nil, "", fmt.Errorf("consume queue %s: %w", queue, err)
	}
	return ch, deliveries, tag, nil
}

// consumer runs one Consume call's handlers.
type consumer struct {
	b     *Broker
	topic broker.Topic
	h     broker.Handler
	log   *slog.Logger
	sem   chan struct{} // shared handler slots of a sharded Consume, or nil
}

// serve handles deliveries with conc goroutines until the channel is lost or
// ctx is done; then it cancels the subscription and waits for the running
// handlers.
func (c *consumer) serve(ctx context.Context, ch *amqp091.Channel, deliveries <-chan amqp091.Delivery, tag string, conc int) {
	// Cancelling makes RabbitMQ stop sending at once; what was prefetched
	// goes back when the caller closes the channel.
	cancelled := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(cancelled)
		_ = ch.Cancel(tag, false)
	})
	// Two RPCs at once on one channel confuse amqp091's replies: the
	// caller's Close must wait for a Cancel under way.
	defer func() {
		if !stop() {
			<-cancelled
		}
	}()
	// Every message, or message of a batch, takes a handler slot: of the
	// Consume's queues together (c.sem), or of this queue's own.
	slots := c.sem
	if slots == nil {
		slots = make(chan struct{}, conc)
	}
	take := func() bool {
		select {
		case slots <- struct{}{}:
			return true
		case <-ctx.Done():
			return false
		}
	}
	release := func() { <-slots }
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		d, ok := NextDelivery(ctx, deliveries)
		if !ok {
			return
		}
		if d.ContentType == contentTypeBatch && c.topic != broker.Timeout {
			if !c.startBatch(ctx, &d, take, release, &wg) {
				return
			}
			continue
		}
		if ctx.Err() != nil || !take() {
			_ = d.Nack(false, true)
			return
		}
		wg.Go(func() {
			defer release()
			c.handle(ctx, &d)
		})
	}
}

// NextDelivery receives the next delivery; ok is false once ctx is done or
// the channel is closed (ctx.Err() tells which). The consumers, the
// followers and the raw hop benchmark (internal/bench) read through it.
func NextDelivery(ctx context.Context, deliveries <-chan amqp091.Delivery) (d amqp091.Delivery, ok bool) {
	select {
	case <-ctx.Done():
		return d, false
	case d, ok = <-deliveries:
		return d, ok
	}
}

// handle decodes d, runs the handler and settles the outcome.
func (c *consumer) handle(ctx context.Context, d *amqp091.Delivery) {
	del := &broker.Delivery{
		Message:     broker.Message{Topic: c.topic, ID: d.MessageId, Key: d.CorrelationId},
		Redelivered: d.Redelivered || d.Headers[headerRedelivered] != nil,
	}
	del.Trace, _ = d.Headers[headerTraceparent].(string)
	s := &single{c: c, d: d}
	if c.topic == broker.DeadLetter {
		c.b.fillDeadLetter(del, d)
	} else {
		del.First = c.topic == broker.Execution && c.b.firstCopy(d, c.topic)
		if err := c.b.verify(d, c.topic); err != nil {
			c.reject(ctx, s, del, err)
			return
		}
		body, err := broker.Decode(c.topic, d.Body)
		if err != nil {
			c.reject(ctx, s, del, err)
			return
		}
		del.Body = body
		if del.ID == "" && del.Key == "" {
			del.ID, del.Key = broker.IDs(body) // published raw
		}
	}
	c.settle(ctx, s, del, c.h(ctx, del))
}

// settlement is what becomes of a consumed message: an AMQP delivery
// (single) or one message of a batch (inBatch).
type settlement interface {
	// ack takes the message away for good.
	ack()
	// requeue returns the message to its queue, to be delivered again with
	// Redelivered set.
	requeue()
	// deadLetter publishes the message to the dead-letter queue with
	// reason and waits for the confirm; the message is then acked.
	deadLetter(ctx context.Context, reason string) error
}

// settle acts on the handler's outcome err for the message del.
func (c *consumer) settle(ctx context.Context, s settlement, del *broker.Delivery, err error) {
	switch {
	case err == nil:
		s.ack()
	case errors.Is(err, broker.ErrReject):
		if c.topic == broker.DeadLetter {
			c.log.Warn("amqp broker: dead letter rejected again, dropping it",
				"id", del.ID, "key", del.Key, "reason", del.Reason, "error", err)
			s.ack()
			return
		}
		c.reject(ctx, s, del, err)
	case ctx.Err() != nil:
		// Shutting down: hand the message on at once.
		c.log.Debug("amqp broker: handler stopped by shutdown, returning message", "id", del.ID, "key", del.Key, "error", err)
		s.requeue()
	default:
		c.log.Warn("amqp broker: handler failed, returning message after a pause",
			"id", del.ID, "key", del.Key, "pause", c.b.cfg.RedeliveryPause, "error", err)
		// The pause holds this handler slot; the other slots go on.
		sleep(ctx.Done(), c.b.cfg.RedeliveryPause)
		s.requeue()
	}
}

// reject dead-letters the message del with cause as reason; when the dead
// letter cannot be published it returns the message to its queue after the
// pause.
func (c *consumer) reject(ctx context.Context, s settlement, del *broker.Delivery, cause error) {
	reason := cause.Error()
	c.log.Warn("amqp broker: message rejected to the dead-letter queue",
		"id", del.ID, "key", del.Key, "reason", reason)
	// Finish what the handler decided even if ctx ends meanwhile: a
	// dead letter half-published and then requeued would be duplicated.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deadLetterTimeout)
	defer cancel()
	if err := s.deadLetter(dctx, reason); err != nil {
		c.log.Error("amqp broker: cannot dead-letter message, returning it to its queue",
			"id", del.ID, "key", del.Key, "error", err)
		sleep(ctx.Done(), c.b.cfg.RedeliveryPause)
		s.requeue()
		return
	}
	s.ack()
}

// single is the settlement of an AMQP delivery.
type single struct {
	c *consumer
	d *amqp091.Delivery
}

func (s *single) ack() {
	if err := s.d.Ack(false); err != nil {
		// The channel is gone: RabbitMQ redelivers the message.
		s.c.log.Debug("amqp broker: ack failed, the message will be redelivered", "id", s.d.MessageId, "error", err)
	}
}

func (s *single) requeue() {
	if err := s.d.Nack(false, true); err != nil {
		s.c.log.Debug("amqp broker: nack failed, the message will be redelivered", "id", s.d.MessageId, "error", err)
	}
}

func (s *single) deadLetter(ctx context.Context, reason string) error {
	return s.c.b.deadLetter(ctx, s.c.topic, s.d, reason)
}

// deadLetter publishes a copy of d to the dead-letter exchange with reason
// and the topic it was consumed from, and waits for its confirm.
func (b *Broker) deadLetter(ctx context.Context, topic broker.Topic, d *amqp091.Delivery, reason string) error {
	headers := amqp091.Table{}
	for k, v := range d.Headers {
		if k != headerSeq && k != headerFirst && k != headerRedelivered {
			headers[k] = v
		}
	}
	return b.toDLX(ctx, topic, reason, amqp091.Publishing{
		Headers:       headers,
		ContentType:   d.ContentType,
		MessageId:     d.MessageId,
		CorrelationId: d.CorrelationId,
		Type:          d.Type,
		Timestamp:     d.Timestamp,
		Body:          d.Body,
	})
}

// toDLX publishes pub, persistent, to the dead-letter exchange with reason
// and topic (the one it was consumed from) in its headers, and waits for
// its confirm.
func (b *Broker) toDLX(ctx context.Context, topic broker.Topic, reason string, pub amqp091.Publishing) error {
	if len(reason) > maxReason {
		reason = strings.ToValidUTF8(reason[:maxReason], "")
	}
	pub.Headers[headerReason] = reason
	pub.Headers[headerTopic] = string(topic)
	pub.DeliveryMode = amqp091.Persistent
	o := outgoing{exchange: b.n.dlx, id: pub.MessageId, topic: broker.DeadLetter, pub: pub}
	return b.send(ctx, pub.CorrelationId, []outgoing{o}).Wait(ctx)
}

// fillDeadLetter sets the topic, reason and body of a dead letter.
func (b *Broker) fillDeadLetter(del *broker.Delivery, d *amqp091.Delivery) {
	del.Topic, del.Reason = b.deadLetterOrigin(d)
	fillBody(del, d.Body)
}

// deadLetterOrigin is the topic a dead letter was consumed from and why it
// was dead-lettered. Those we rejected carry x-rune-topic and
// x-rune-reason; those RabbitMQ dead-lettered itself (expired in
// workflow.execution) have only x-death.
func (b *Broker) deadLetterOrigin(d *amqp091.Delivery) (broker.Topic, string) {
	topic, _ := d.Headers[headerTopic].(string)
	reason, _ := d.Headers[headerReason].(string)
	if deaths, ok := d.Headers["x-death"].([]any); ok && len(deaths) > 0 {
		if death, ok := deaths[0].(amqp091.Table); ok {
			q, _ := death["queue"].(string)
			why, _ := death["reason"].(string)
			if topic == "" {
				topic = string(b.n.topicOfQueue(q))
			}
			if reason == "" {
				reason = fmt.Sprintf("%s in queue %s", why, q)
			}
		}
	}
	if topic == "" {
		topic = d.Type
	}
	return broker.Topic(topic), reason
}

// fillBody decodes a dead letter's body as a message of its topic, or
// keeps it as Raw.
func fillBody(del *broker.Delivery, raw []byte) {
	body, err := broker.Decode(del.Topic, raw)
	if err != nil {
		del.Raw = raw
		return
	}
	del.Body = body
	if del.ID == "" && del.Key == "" {
		del.ID, del.Key = broker.IDs(body)
	}
}

func randomHex() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
