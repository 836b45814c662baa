package amqp

import (
	"context"
	"fmt"
	"strings"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/rune-org/rune/broker"
)

// followPrefetch is how many followed messages RabbitMQ hands over unacked.
const followPrefetch = 256

// Follow returns the Status and Completion messages with Key key published
// after Follow returns, in publish order, until ctx is done or the broker
// closes; then the channel closes. It binds a queue of its own
// (workflow.follow.<random>) to workflow.events for the key, so following
// takes nothing from the status and completion queues.
//
// Messages are acked only once handed to the channel: a follower that does
// not drain it leaves them in RabbitMQ, not in memory. Redeliveries of
// messages already handed over (their ack lost with a connection) are
// dropped by message id. The queue outlives a
// lost connection by Config.FollowExpiry, so a follower that reconnects in
// time loses nothing; it is deleted when ctx is done.
func (b *Broker) Follow(ctx context.Context, key string) (<-chan broker.Message, error) {
	if b.isClosed() {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if key == "" || len(complRKPrefix)+len(key) > routingKeyMax {
		return nil, fmt.Errorf("amqp broker: follow: key %q must be 1 to %d bytes", key, routingKeyMax-len(complRKPrefix))
	}
	if !b.enter() {
		return nil, ErrClosed
	}
	f := &follower{b: b, key: key, queue: b.n.followPrefix + randomHex(), out: make(chan broker.Message, 64)}
	ch, deliveries, err := f.open(ctx)
	if err != nil {
		b.wg.Done()
		return nil, fmt.Errorf("amqp broker: follow %q: %w", key, err)
	}
	go func() {
		defer b.wg.Done()
		f.run(ctx, ch, deliveries)
	}()
	return f.out, nil
}

type follower struct {
	b     *Broker
	key   string
	queue string
	out   chan broker.Message
	seen  recent
}

// recent remembers the last ids handed over, to drop redeliveries.
type recent struct {
	ids  map[string]bool
	ring []string
	next int
}

const recentSize = 1024

func (r *recent) has(id string) bool { return id != "" && r.ids[id] }

func (r *recent) add(id string) {
	if id == "" || r.ids[id] {
		return
	}
	if r.ids == nil {
		r.ids = make(map[string]bool, recentSize)
		r.ring = make([]string, recentSize)
	}
	delete(r.ids, r.ring[r.next])
	r.ring[r.next] = id
	r.ids[id] = true
	r.next = (r.next + 1) % recentSize
}

// open declares and binds the follower's queue (again, after a reconnect)
// and consumes it.
func (f *follower) open(ctx context.Context) (*amqp091.Channel, <-chan amqp091.Delivery, error) {
	b := f.b
	ch, _, err := b.sub.channel(ctx)
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) (*amqp091.Channel, <-chan amqp091.Delivery, error) {
		_ = ch.Close()
		return nil, nil, err
	}
	args := amqp091.Table{"x-expires": b.cfg.FollowExpiry.Milliseconds()}
	if _, err := ch.QueueDeclare(f.queue, false, false, false, false, args); err != nil {
		return fail(fmt.Errorf("declare queue %s: %w", f.queue, err))
	}
	for _, rk := range []string{statusRKPrefix + f.key, complRKPrefix + f.key} {
		if err := ch.QueueBind(f.queue, rk, b.n.eventsX, false, nil); err != nil {
			return fail(fmt.Errorf("bind queue %s to exchange %s with key %q: %w", f.queue, b.n.eventsX, rk, err))
		}
	}
	if err := ch.Qos(followPrefetch, 0, false); err != nil {
		return fail(fmt.Errorf("set prefetch on queue %s: %w", f.queue, err))
	}
	deliveries, err := ch.Consume(f.queue, "", false, true, false, false, nil)
	if err != nil {
		return fail(fmt.Errorf("consume queue %s: %w", f.queue, err))
	}
	return ch, deliveries, nil
}

// run moves deliveries to out, reopening after a lost connection, until ctx
// is done or the broker closes.
func (f *follower) run(ctx context.Context, ch *amqp091.Channel, deliveries <-chan amqp091.Delivery) {
	b := f.b
	defer close(f.out)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-b.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	log := b.log.With("follow", f.key, "queue", f.queue)
	pause := b.cfg.ReconnectMin
	for {
		if ch != nil && f.pump(ctx, deliveries) {
			// ctx is done: the queue goes with the follower.
			if _, err := ch.QueueDelete(f.queue, false, false, false); err != nil {
				log.Debug("amqp broker: cannot delete follower queue; it expires", "error", err)
			}
			_ = ch.Close()
			return
		}
		if ch != nil {
			_ = ch.Close()
			log.Warn("amqp broker: follower channel lost, resuming")
		}
		if !sleep(ctx.Done(), jitter(pause)) {
			return
		}
		var err error
		if ch, deliveries, err = f.open(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Warn("amqp broker: cannot resume following", "error", err, "pause", pause)
			pause = min(2*pause, b.cfg.ReconnectMax)
			continue
		}
		pause = b.cfg.ReconnectMin
	}
}

// pump hands deliveries to out until ctx is done (true) or the channel is
// lost (false).
func (f *follower) pump(ctx context.Context, deliveries <-chan amqp091.Delivery) bool {
	for {
		d, ok := NextDelivery(ctx, deliveries)
		if !ok {
			return ctx.Err() != nil
		}
		msgs, err := f.decode(&d)
		if err != nil {
			f.b.log.Warn("amqp broker: follower skips a message it cannot decode", "follow", f.key, "routing_key", d.RoutingKey, "error", err)
			_ = d.Ack(false)
			continue
		}
		for _, m := range msgs {
			if m.Key != f.key || (d.Redelivered && f.seen.has(m.ID)) {
				// A key with a topic wildcard word ("*", "#") binds more
				// than itself, a batch holds other executions' statuses,
				// and a redelivery whose ack was lost with the connection
				// was handed over already.
				continue
			}
			// A batch of statuses is handed over one status at a time; it
			// is acked (and remembered) once all are.
			for _, one := range broker.Unbatch(m) {
				select {
				case f.out <- one:
				case <-ctx.Done():
					return true
				}
			}
			f.seen.add(m.ID)
		}
		_ = d.Ack(false)
	}
}

// decode reads the messages of d: one, or those of a batch of statuses or
// completions.
func (f *follower) decode(d *amqp091.Delivery) ([]broker.Message, error) {
	var topic broker.Topic
	switch {
	case strings.HasPrefix(d.RoutingKey, statusRKPrefix):
		topic = broker.Status
	case strings.HasPrefix(d.RoutingKey, complRKPrefix):
		topic = broker.Completion
	default:
		return nil, fmt.Errorf("unexpected routing key %q", d.RoutingKey)
	}
	if d.ContentType == contentTypeBatch {
		items, err := f.b.openBatch(d, topic)
		if err != nil {
			return nil, err
		}
		var msgs []broker.Message
		for _, it := range items {
			if it.key != f.key {
				continue
			}
			body, err := broker.Decode(topic, it.body)
			if err != nil {
				return nil, fmt.Errorf("message %s of a batch: %w", it.id, err)
			}
			msgs = append(msgs, broker.Message{Topic: topic, ID: it.id, Key: it.key, Body: body})
		}
		return msgs, nil
	}
	if err := f.b.verify(d, topic); err != nil {
		return nil, err
	}
	body, err := broker.Decode(topic, d.Body)
	if err != nil {
		return nil, err
	}
	m := broker.Message{Topic: topic, ID: d.MessageId, Key: d.CorrelationId, Body: body}
	if m.Key == "" {
		_, m.Key = broker.IDs(body)
	}
	return []broker.Message{m}, nil
}
