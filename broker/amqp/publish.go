package amqp

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/rune-org/rune/broker"
)

// outgoing is one message ready for the wire.
type outgoing struct {
	exchange, key string
	pub           amqp091.Publishing
	id            string       // for errors
	topic         broker.Topic // for errors
	// item, instead of pub, is a message that the publisher sends in a
	// batch (Config.MessageBatch).
	item *batchItem
}

// plain is the persistent AMQP message of one message of topic, signed
// when this broker signs.
func (b *Broker) plain(topic broker.Topic, it *batchItem, now time.Time) amqp091.Publishing {
	pub := amqp091.Publishing{
		Headers:       amqp091.Table{},
		ContentType:   contentType,
		DeliveryMode:  amqp091.Persistent,
		MessageId:     it.id,
		CorrelationId: it.key,
		Type:          string(topic),
		Timestamp:     now,
		Body:          it.body,
		Priority:      it.priority,
	}
	if it.trace != "" {
		pub.Headers[headerTraceparent] = it.trace
	}
	if it.first {
		pub.Headers[headerFirst] = b.firstMark(topic, it.id, it.key, it.body)
	}
	switch topic {
	case broker.Status:
		pub.DeliveryMode = amqp091.Transient // the status queue is not durable anyway (RFC 001 §8.2)
	case broker.Completion:
		if b.receipted() {
			pub.Headers["BCC"] = []any{receiptKey} // receipts.go
		}
	}
	b.signInto(&pub, topic, it.id, it.key)
	return pub
}

// batch is the AMQP message of items of topic, signed as a whole, published
// with routing key key: execution messages of one route, or statuses or
// completions, which also go to the routing keys of the other executions in
// them (BCC), and completions to the receipts queue.
func (b *Broker) batch(topic broker.Topic, key string, items []batchItem, now time.Time) amqp091.Publishing {
	pub := amqp091.Publishing{
		Headers:      amqp091.Table{},
		ContentType:  contentTypeBatch,
		DeliveryMode: amqp091.Persistent,
		Type:         string(topic),
		Timestamp:    now,
		Body:         encodeBatch(items),
	}
	pub.Priority = items[0].priority // a batch's items share it (flush)
	prefix := statusRKPrefix
	var bcc []any
	switch topic {
	case broker.Status:
		pub.DeliveryMode = amqp091.Transient
	case broker.Completion:
		prefix = complRKPrefix
		if b.receipted() {
			bcc = []any{receiptKey}
		}
	default:
		b.signInto(&pub, topic+batchTopic, "", "")
		return pub
	}
	seen := map[string]bool{key: true}
	for i := range items {
		if rk := prefix + items[i].key; !seen[rk] {
			seen[rk] = true
			bcc = append(bcc, rk)
		}
	}
	if len(bcc) > 0 {
		pub.Headers["BCC"] = bcc
	}
	b.signInto(&pub, topic+batchTopic, "", "")
	return pub
}

// Publish validates and encodes msgs (broker.Encode) and, when all are valid,
// publishes them in order on one confirm-mode channel, chosen by the first
// message's Key and Lane so that messages of one branch of one execution
// keep their order. It
// returns once they are written; the Pending waits for all their confirms at
// once. Publish blocks only while the publishing connection is down (until
// it is back, ctx is done or the broker closes) and, for a Delay, while the
// delay queue is declared (once per queue per delayLease).
//
// Wait fails when RabbitMQ nacks a message, returns it as unroutable (no
// queue is bound, e.g. a master published before any worker declared
// workflow.execution), or when the channel or connection is lost before the
// confirm arrived: the message may or may not have been queued, and the
// caller publishes it again (ids let consumers recognise duplicates).
func (b *Broker) Publish(ctx context.Context, msgs ...broker.Message) broker.Pending {
	if b.isClosed() {
		return broker.Done{Err: ErrClosed}
	}
	if len(msgs) == 0 {
		return broker.Done{}
	}
	out := make([]outgoing, len(msgs))
	now := time.Now()
	for i := range msgs {
		m := &msgs[i]
		body, err := broker.Encode(*m)
		if err != nil {
			return broker.Done{Err: err}
		}
		r, err := b.n.routeFor(m)
		if err != nil {
			return broker.Done{Err: err}
		}
		if r.delayQueue != nil {
			if err := b.ensureDelay(ctx, r.delayQueue); err != nil {
				return broker.Done{Err: fmt.Errorf("amqp broker: publish message %q on %s with delay %v: %w", m.ID, m.Topic, m.Delay, err)}
			}
		}
		it := batchItem{id: m.ID, key: m.Key, trace: m.Trace, first: m.First && m.Topic == broker.Execution && m.Delay == 0, body: body,
			priority: b.n.priority(m)}
		out[i] = outgoing{exchange: r.exchange, key: r.key, id: m.ID, topic: m.Topic}
		if b.cfg.MessageBatch > 1 && m.Topic != broker.Timeout && m.Delay == 0 {
			out[i].item = &it // the publisher batches it (batch.go)
			continue
		}
		out[i].pub = b.plain(m.Topic, &it, now)
	}
	return b.send(ctx, msgs[0].Key+"\x00"+msgs[0].Lane, out)
}

// PublishRaw publishes body as it is on topic, without id or key, and waits
// for its confirm. Consumers decode it when it is delivered; one that does not
// decode is dead-lettered. Tests use it to deliver malformed messages.
func (b *Broker) PublishRaw(ctx context.Context, topic broker.Topic, body []byte) error {
	if b.isClosed() {
		return ErrClosed
	}
	var r route
	var err error
	switch topic {
	case broker.Execution, broker.Status, broker.Completion, broker.Timeout:
		r, err = b.n.routeFor(&broker.Message{Topic: topic, Key: b.n.rawKey(topic, body)})
	default:
		err = fmt.Errorf("amqp broker: cannot publish raw to topic %q", topic)
	}
	if err != nil {
		return err
	}
	// At the default priority, as any message that names none: a raw
	// message must not wait behind every published one.
	o := outgoing{exchange: r.exchange, key: r.key, topic: topic, pub: amqp091.Publishing{
		ContentType:  contentType,
		DeliveryMode: amqp091.Persistent,
		Type:         string(topic),
		Timestamp:    time.Now(),
		Priority:     b.n.priority(&broker.Message{Topic: topic}),
		Body:         body,
	}}
	b.signInto(&o.pub, topic, "", "")
	return b.send(ctx, "", []outgoing{o}).Wait(ctx)
}

// send publishes out on the publisher that key hashes to.
func (b *Broker) send(ctx context.Context, key string, out []outgoing) broker.Pending {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	p := b.pubs[int(h.Sum32()%uint32(len(b.pubs)))]
	return p.publish(ctx, out)
}

// pending is the broker.Pending of one Publish call.
type pending struct {
	mu   sync.Mutex
	left int
	err  error
	done chan struct{}
}

func newPending(n int) *pending {
	return &pending{left: n, done: make(chan struct{})}
}

// finish settles one message; the first error is the call's error.
func (p *pending) finish(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil && p.err == nil {
		p.err = err
	}
	p.left--
	if p.left == 0 {
		close(p.done)
	}
}

// Wait blocks until every message of the publish is confirmed, or returns
// the first error; it returns ctx.Err() when ctx is done first.
func (p *pending) Wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		select {
		case <-p.done:
			return p.err
		default:
			return ctx.Err()
		}
	}
}

// waiter is a published message waiting for its confirm: one of a
// Publish call's (p), or a batch of the publisher's queue (batch, each
// message's Publish call).
type waiter struct {
	p     *pending
	batch []*pending
	id    string
	topic broker.Topic
	// keys are the execution ids of the completions in the message, whose
	// receipts a nack voids (receipts.go).
	keys []string
}

// queued is a message waiting for the publisher's next batch.
type queued struct {
	topic         broker.Topic
	exchange, key string
	item          *batchItem
	p             *pending
}

// publisher is one confirm-mode channel on the publishing connection, kept
// open by run.
type publisher struct {
	b   *Broker
	idx int

	mu sync.Mutex // serialises publishing, so sequence numbers match
	ch *amqp091.Channel
	up chan struct{} // closed while ch is usable
	// queue holds the messages published while a batch waits for its
	// confirm (unconfirmed counts the messages of the last flush not yet
	// confirmed): they go out when its last confirm comes (kick).
	queue       []queued
	unconfirmed atomic.Int32
	kick        chan struct{}

	wmu     sync.Mutex
	waiting map[uint64]waiter // by delivery tag
}

func newPublisher(b *Broker, idx int) *publisher {
	return &publisher{b: b, idx: idx, up: make(chan struct{}), waiting: make(map[uint64]waiter), kick: make(chan struct{}, 1)}
}

func (p *publisher) publish(ctx context.Context, out []outgoing) broker.Pending {
	pend := newPending(len(out))
	p.mu.Lock()
	for p.ch == nil {
		up := p.up
		p.mu.Unlock()
		select {
		case <-up:
		case <-ctx.Done():
			return broker.Done{Err: fmt.Errorf("amqp broker: publish: waiting for the connection: %w", ctx.Err())}
		case <-p.b.closing:
			return broker.Done{Err: ErrClosed}
		}
		p.mu.Lock()
	}
	ch := p.ch
	queuedHere := false
	for i := range out {
		o := &out[i]
		if o.item != nil {
			p.queue = append(p.queue, queued{topic: o.topic, exchange: o.exchange, key: o.key, item: o.item, p: pend})
			queuedHere = true
			continue
		}
		if queuedHere {
			// A message of this call waits for a batch: this one must not overtake it.
			p.flush(ch)
			queuedHere = false
		}
		w := waiter{p: pend, id: o.id, topic: o.topic}
		if o.topic == broker.Completion {
			w.keys = []string{o.pub.CorrelationId}
		}
		if err := p.write(ctx, ch, o, w); err != nil {
			for range out[i+1:] {
				pend.finish(err)
			}
			break
		}
	}
	if len(p.queue) > 0 && p.unconfirmed.Load() == 0 {
		p.flush(ch)
	}
	p.mu.Unlock()
	return pend
}

// write publishes o on ch, p.mu held, with w waiting for its confirm; on
// failure w is settled with the error, which write returns.
func (p *publisher) write(ctx context.Context, ch *amqp091.Channel, o *outgoing, w waiter) error {
	seq := ch.GetNextPublishSeqNo()
	if o.pub.Headers == nil {
		o.pub.Headers = amqp091.Table{}
	}
	// The sequence number identifies a returned message (ids may repeat).
	o.pub.Headers[headerSeq] = int64(seq)
	p.wmu.Lock()
	p.waiting[seq] = w
	p.wmu.Unlock()
	err := ch.PublishWithContext(ctx, o.exchange, o.key, true, false, o.pub)
	if err == nil {
		p.b.count(o.topic, max(len(w.batch), 1))
		return nil
	}
	err = fmt.Errorf("amqp broker: publish message %q on %s to exchange %s: %w", o.id, o.topic, o.exchange, err)
	p.wmu.Lock()
	if w, ok := p.waiting[seq]; ok {
		delete(p.waiting, seq)
		p.complete(w, err)
	}
	p.wmu.Unlock()
	return err
}

// flush publishes the queue, p.mu held, in batches of up to
// Config.MessageBatch messages: statuses, then execution messages by queue,
// then completions; a message alone goes as itself.
func (p *publisher) flush(ch *amqp091.Channel) {
	// Statuses first: a status never follows an execution message of the
	// same flush (it is published by the handling of an execution message
	// already delivered), while a successor follows its parent's statuses.
	// Completions last: an execution's completion follows its statuses.
	q := make([]queued, 0, len(p.queue))
	for _, topic := range []broker.Topic{broker.Status, broker.Execution, broker.Completion} {
		for _, m := range p.queue {
			if m.topic == topic {
				q = append(q, m)
			}
		}
	}
	p.queue = nil
	now := time.Now()
	for len(q) > 0 {
		var batch, rest []queued
		for _, m := range q {
			// One batch is one AMQP message, with one priority (issue 35).
			same := m.topic == q[0].topic && m.exchange == q[0].exchange &&
				(m.topic != broker.Execution || m.key == q[0].key && m.item.priority == q[0].item.priority)
			if same && len(batch) < p.b.cfg.MessageBatch {
				batch = append(batch, m)
			} else {
				rest = append(rest, m)
			}
		}
		q = rest
		o := outgoing{exchange: batch[0].exchange, key: batch[0].key, id: batch[0].item.id, topic: batch[0].topic}
		w := waiter{batch: make([]*pending, len(batch)), id: o.id, topic: o.topic}
		items := make([]batchItem, len(batch))
		for i, m := range batch {
			w.batch[i], items[i] = m.p, *m.item
			if o.topic == broker.Completion {
				w.keys = append(w.keys, m.item.key)
			}
		}
		if len(batch) == 1 {
			o.pub = p.b.plain(o.topic, batch[0].item, now)
		} else {
			o.pub = p.b.batch(o.topic, o.key, items, now)
			o.id = fmt.Sprintf("%s (a batch of %d)", o.id, len(batch))
			w.id = o.id
		}
		p.unconfirmed.Add(1)
		// The messages' own Publish calls may be cancelled; the batch is not theirs alone.
		_ = p.write(context.Background(), ch, &o, w)
	}
}

// complete settles w with err (nil: confirmed) and kicks the
// next batch when w was the last of the publisher's batches.
func (p *publisher) complete(w waiter, err error) {
	if w.batch == nil {
		w.p.finish(err)
		return
	}
	for _, pend := range w.batch {
		pend.finish(err)
	}
	if p.unconfirmed.Add(-1) == 0 {
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
}

// flushOnKick publishes the queue when the last batch is confirmed, until
// stop closes.
func (p *publisher) flushOnKick(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-p.kick:
		}
		p.mu.Lock()
		if p.ch != nil && len(p.queue) > 0 && p.unconfirmed.Load() == 0 {
			p.flush(p.ch)
		}
		p.mu.Unlock()
	}
}

// run keeps a confirm-mode channel open and settles confirms and returns,
// until the broker closes.
func (p *publisher) run() {
	b := p.b
	ctx, cancel := contextFrom(b.pubStop)
	defer cancel()
	stop := make(chan struct{})
	defer close(stop)
	go p.flushOnKick(stop)
	pause := b.cfg.ReconnectMin
	for {
		ch, _, err := b.pub.channel(ctx)
		if err == nil {
			if err = ch.Confirm(false); err != nil {
				_ = ch.Close()
				err = fmt.Errorf("amqp broker: put publish channel in confirm mode: %w", err)
			}
		}
		if err != nil {
			if b.isClosed() {
				return
			}
			b.log.Warn("amqp broker: cannot open publish channel", "publisher", p.idx, "error", err)
			if !sleep(b.pubStop, jitter(pause)) {
				return
			}
			pause = min(2*pause, b.cfg.ReconnectMax)
			continue
		}
		opened := time.Now()
		cause := p.serve(ch)
		p.mu.Lock()
		p.ch = nil
		p.up = make(chan struct{})
		q := p.queue
		p.queue = nil
		p.mu.Unlock()
		p.failAll(cause, q)
		if b.isClosed() {
			return
		}
		if isNotFound(cause) {
			// An exchange was deleted behind our back: declare it again.
			if err := b.redeclare(ctx); err != nil {
				b.log.Warn("amqp broker: cannot declare the topology again", "error", err)
			}
		}
		b.log.Warn("amqp broker: publish channel lost, reopening", "publisher", p.idx, "error", cause)
		// A channel that dies at once (while its connection lives) must not
		// be reopened in a hot loop.
		if time.Since(opened) > time.Minute {
			pause = b.cfg.ReconnectMin
		}
		if !sleep(b.pubStop, jitter(pause)) {
			return
		}
		pause = min(2*pause, b.cfg.ReconnectMax)
	}
}

// serve makes ch the publisher's channel and settles its confirms and
// returns until it closes; it returns why.
func (p *publisher) serve(ch *amqp091.Channel) error {
	// Confirms arrive resequenced; the buffer keeps RabbitMQ's reader from
	// waiting on us. Returns are unbuffered on purpose: RabbitMQ sends a
	// return before the confirm of the same message, and amqp091 delivers
	// both from one goroutine, so with an unbuffered return channel this
	// loop always sees a message's return before its confirm.
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 4096))
	returns := ch.NotifyReturn(make(chan amqp091.Return))
	closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	p.mu.Lock()
	p.ch = ch
	close(p.up)
	p.mu.Unlock()

	returned := make(map[uint64]error)
	for {
		select {
		case <-p.b.pubStop:
			_ = ch.Close()
			return ErrClosed
		case r, ok := <-returns:
			if !ok {
				returns = nil
				continue
			}
			seq, _ := r.Headers[headerSeq].(int64)
			returned[uint64(seq)] = fmt.Errorf("amqp broker: message %q returned by RabbitMQ from exchange %s with routing key %q: %d %s (no queue accepts it: is the topology declared?)",
				r.MessageId, r.Exchange, r.RoutingKey, r.ReplyCode, r.ReplyText)
			p.b.forgetDelay(r.RoutingKey)
		case c, ok := <-confirms:
			if !ok {
				confirms = nil
				continue
			}
			p.settle(c, returned)
			if !c.Ack {
				// A nack is RabbitMQ failing to take the message. After a
				// RabbitMQ node is lost, a channel opened while its quorum
				// queues were electing new leaders can nack every later
				// message to them (seen on 3.10: a worker's scheduler nacked
				// for minutes, while new channels published at once): start
				// a new channel rather than keep this one.
				_ = ch.Close()
			}
		case err := <-closed:
			// Confirms already received are real: settle them before
			// failing the rest.
			if confirms != nil {
				for c := range confirms {
					p.settle(c, returned)
				}
			}
			if err == nil {
				return errors.New("channel closed")
			}
			return err
		}
	}
}

func (p *publisher) settle(c amqp091.Confirmation, returned map[uint64]error) {
	p.wmu.Lock()
	w, ok := p.waiting[c.DeliveryTag]
	delete(p.waiting, c.DeliveryTag)
	p.wmu.Unlock()
	err := returned[c.DeliveryTag]
	delete(returned, c.DeliveryTag)
	if !ok {
		return
	}
	if err == nil && !c.Ack {
		err = fmt.Errorf("amqp broker: message %q on %s nacked by RabbitMQ", w.id, w.topic)
		if len(w.keys) > 0 && p.b.receipted() {
			// The receipts queue may have taken the completion that
			// workflow.completion refused: void those receipts before the
			// caller, told of the failure, publishes it again.
			go func() {
				p.b.voidReceipts(w.keys)
				p.complete(w, err)
			}()
			return
		}
	}
	p.complete(w, err)
}

// failAll fails every message still waiting for a confirm (it may or may
// not have been queued) and the messages q that were waiting for a batch.
func (p *publisher) failAll(cause error, q []queued) {
	lost := func(id string, topic broker.Topic) error {
		if errors.Is(cause, ErrClosed) {
			return ErrClosed
		}
		return fmt.Errorf("amqp broker: confirm of message %q on %s lost: %w", id, topic, cause)
	}
	p.wmu.Lock()
	defer p.wmu.Unlock()
	for seq, w := range p.waiting {
		p.complete(w, lost(w.id, w.topic))
		delete(p.waiting, seq)
	}
	for _, m := range q {
		m.p.finish(lost(m.item.id, m.topic))
	}
}

// forgetDelay makes the next publish redeclare delay queue name (a return
// from it means someone deleted it).
func (b *Broker) forgetDelay(name string) {
	b.delayMu.Lock()
	delete(b.delays, name)
	b.delayMu.Unlock()
}

// Published is what a broker published on one topic.
type Published struct {
	// Messages counts the messages, each message of a batch included.
	Messages int64
	// AMQP counts the RabbitMQ messages they went in: fewer than Messages
	// when messages shared batches (Config.MessageBatch).
	AMQP int64
}

// Published returns what this broker has published since it started, by
// topic (a dead letter's topic is broker.DeadLetter).
func (b *Broker) Published() map[broker.Topic]Published {
	b.pubCount.Lock()
	defer b.pubCount.Unlock()
	return maps.Clone(b.published)
}

// count records one RabbitMQ message of topic carrying n messages.
func (b *Broker) count(topic broker.Topic, n int) {
	b.pubCount.Lock()
	c := b.published[topic]
	c.Messages += int64(n)
	c.AMQP++
	b.published[topic] = c
	b.pubCount.Unlock()
}
