// Package memory is the in-process broker of the embedded runtime (`rune run`)
// and of tests. It keeps every promise of broker.Broker except durability:
// messages live in memory and die with the process.
//
// Bodies travel as the pointers they were published with, never encoded, so a
// consumer receives the very value the publisher built (bodies are shared and
// never modified after publishing). Each topic is one FIFO queue behind a
// mutex and a condition variable; delayed messages and redeliveries wait in one
// timer heap served by one goroutine. Nothing runs per message but the handler.
package memory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/broker/internal/fanout"
)

// ErrClosed is returned by a Broker's methods after Close.
var ErrClosed = errors.New("memory broker: closed")

// Options configures a Broker. The zero value is ready to use.
type Options struct {
	// Logger receives dead-lettering and redelivery logs. Default slog.Default().
	Logger *slog.Logger
	// RedeliveryPause is how long a message whose handler failed (or returned
	// ctx.Err()) waits before it is delivered again, so that a failing handler
	// never spins in a hot loop. Default 50ms.
	RedeliveryPause time.Duration
	// FollowOnly lists topics (Status, Completion) whose messages go to
	// followers only and are not queued for Consume. The embedded runtime
	// has no master consuming them, and a queue nobody reads only grows.
	// Default none.
	FollowOnly []broker.Topic
}

// Broker is the in-process broker.Broker. It also implements
// broker.RawPublisher. It is safe for concurrent use.
type Broker struct {
	log   *slog.Logger
	pause time.Duration

	// One queue per topic, indexed by topicIndex.
	queues [numTopics]*queue
	// followOnly marks topics not queued for Consume (Options.FollowOnly).
	followOnly [numTopics]bool
	timers     *timerHeap

	hub *fanout.Hub

	// closed is the cheap check for publishers; closeCtx is what consumers,
	// followers and the timer goroutine watch.
	closed    atomic.Bool
	closeCtx  context.Context
	closeFn   context.CancelFunc
	closeOnce sync.Once
	timerDone chan struct{}
}

var (
	_ broker.Broker       = (*Broker)(nil)
	_ broker.RawPublisher = (*Broker)(nil)
)

const numTopics = 5

// topicIndex maps a topic to its queue; -1 for an unknown topic.
func topicIndex(t broker.Topic) int {
	switch t {
	case broker.Execution:
		return 0
	case broker.Status:
		return 1
	case broker.Completion:
		return 2
	case broker.Timeout:
		return 3
	case broker.DeadLetter:
		return 4
	}
	return -1
}

// New returns a running broker; Close stops it.
func New(opts Options) *Broker {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.RedeliveryPause <= 0 {
		opts.RedeliveryPause = 50 * time.Millisecond
	}
	b := &Broker{
		log:       opts.Logger,
		pause:     opts.RedeliveryPause,
		timers:    newTimerHeap(),
		timerDone: make(chan struct{}),
	}
	for i := range b.queues {
		b.queues[i] = newQueue()
	}
	for _, t := range opts.FollowOnly {
		if i := topicIndex(t); i >= 0 {
			b.followOnly[i] = true
		}
	}
	b.closeCtx, b.closeFn = context.WithCancel(context.Background())
	b.hub = fanout.New(b.closeCtx.Done())
	go func() {
		defer close(b.timerDone)
		b.timers.run(b.closeCtx.Done())
	}()
	return b
}

func (b *Broker) isClosed() bool { return b.closed.Load() }

// Publish validates every message (broker.Message.Validate) and, when all are
// valid, queues them; otherwise it queues none. Messages with a Delay become
// deliverable once it has passed. The result has already finished: memory is
// as durable as this broker gets.
func (b *Broker) Publish(ctx context.Context, msgs ...broker.Message) broker.Pending {
	if b.isClosed() {
		return broker.Done{Err: ErrClosed}
	}
	if err := ctx.Err(); err != nil {
		return broker.Done{Err: err}
	}
	for i := range msgs {
		if err := msgs[i].Validate(); err != nil {
			return broker.Done{Err: err}
		}
	}
	var now time.Time
	for i := range msgs {
		m := &msgs[i]
		b.hub.Notify(*m)
		if b.followOnly[topicIndex(m.Topic)] {
			continue
		}
		d := &broker.Delivery{Message: *m}
		d.Delay = 0
		q := b.queues[topicIndex(m.Topic)]
		if m.Delay > 0 {
			if now.IsZero() {
				now = time.Now()
			}
			b.timers.add(now.Add(m.Delay), d, q)
		} else {
			q.push(d)
		}
	}
	return broker.Done{}
}

// PublishRaw queues body as it is. It is decoded with broker.Decode when it is
// delivered; a body that does not decode goes to broker.DeadLetter with Raw
// and Reason set, and the consumer carries on with the next message. A body
// that decodes is delivered with ID and Key taken from it (message id and
// execution id). Followers are not notified of raw messages.
func (b *Broker) PublishRaw(ctx context.Context, topic broker.Topic, body []byte) error {
	if b.isClosed() {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	i := topicIndex(topic)
	if i < 0 || topic == broker.DeadLetter {
		return fmt.Errorf("memory broker: cannot publish raw to topic %q", topic)
	}
	d := &broker.Delivery{Message: broker.Message{Topic: topic}, Raw: append([]byte(nil), body...)}
	b.queues[i].push(d)
	return nil
}

// Consume runs opts.Concurrency handlers (default 1) on messages of topic
// until ctx is done, waits for the running handlers and returns nil. It
// returns ErrClosed when the broker is closed first; handlers then see their
// ctx done. opts.Prefetch is ignored: a message leaves its queue only when a
// handler is free to run it, so a stopping consumer holds nothing back.
//
// A handler's nil acks the message. An error wrapping broker.ErrReject moves
// it to broker.DeadLetter with the error text as Reason and the original
// Topic kept (a handler rejecting a dead letter drops it, with a log). Any
// other error, including ctx.Err(), delivers it again with Redelivered set
// after Options.RedeliveryPause, to whichever consumer of topic is free.
func (b *Broker) Consume(ctx context.Context, topic broker.Topic, opts broker.ConsumeOptions, h broker.Handler) error {
	i := topicIndex(topic)
	if i < 0 {
		return fmt.Errorf("memory broker: cannot consume unknown topic %q", topic)
	}
	if h == nil {
		return errors.New("memory broker: Consume with a nil handler")
	}
	if b.isClosed() {
		return ErrClosed
	}
	q := b.queues[i]
	n := max(opts.Concurrency, 1)

	// Handlers see ctx, and also the broker closing.
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopClose := context.AfterFunc(b.closeCtx, cancel)
	defer stopClose()

	// stopping is set before waking the waiters, and checked under q.mu
	// before waiting, so no consumer sleeps through its own cancellation.
	var stopping atomic.Bool
	stopWake := context.AfterFunc(hctx, func() {
		stopping.Store(true)
		q.wakeAll()
	})
	defer stopWake()

	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for {
				d, ok := q.pop(&stopping)
				if !ok {
					return
				}
				b.handle(hctx, q, topic, d, h)
			}
		})
	}
	wg.Wait()
	if ctx.Err() == nil && b.isClosed() {
		return ErrClosed
	}
	return nil
}

// handle runs h on d and settles the outcome.
func (b *Broker) handle(ctx context.Context, q *queue, topic broker.Topic, d *broker.Delivery, h broker.Handler) {
	if d.Body == nil && d.Raw != nil && topic != broker.DeadLetter {
		body, err := broker.Decode(d.Topic, d.Raw)
		if err != nil {
			b.deadLetter(d, err.Error())
			return
		}
		d.Body, d.Raw = body, nil
		d.ID, d.Key = broker.IDs(body)
	}
	err := h(ctx, d)
	switch {
	case err == nil:
	case errors.Is(err, broker.ErrReject):
		if topic == broker.DeadLetter {
			b.log.Warn("memory broker: dead letter rejected again, dropping it",
				"topic", d.Topic, "id", d.ID, "key", d.Key, "reason", d.Reason, "error", err)
			return
		}
		b.deadLetter(d, err.Error())
	default:
		if b.isClosed() {
			return // nothing will ever consume it
		}
		lvl := slog.LevelWarn
		if ctx.Err() != nil {
			lvl = slog.LevelDebug // a consumer shutting down hands its message on
		}
		b.log.Log(ctx, lvl, "memory broker: handler failed, delivering again",
			"topic", topic, "id", d.ID, "key", d.Key, "pause", b.pause, "error", err)
		// A fresh Delivery: the handler may still hold the old one.
		again := *d
		again.Redelivered = true
		b.timers.add(time.Now().Add(b.pause), &again, q)
	}
}

// deadLetter queues d on DeadLetter with reason; d.Topic stays the topic it
// was published on, so a dead-letter consumer knows what it holds.
func (b *Broker) deadLetter(d *broker.Delivery, reason string) {
	b.log.Warn("memory broker: message dead-lettered", "topic", d.Topic, "id", d.ID, "key", d.Key, "reason", reason)
	dl := *d
	dl.Redelivered, dl.First = false, false
	dl.Reason = reason
	b.queues[topicIndex(broker.DeadLetter)].push(&dl)
}

// Close stops the broker: consumers return ErrClosed once their handlers
// return (their ctx is cancelled), follower channels close, queued and delayed
// messages are dropped, and later calls fail with ErrClosed. Close is
// idempotent and always returns nil.
func (b *Broker) Close() error {
	b.closeOnce.Do(func() {
		b.closed.Store(true)
		b.closeFn()
		for _, q := range b.queues {
			q.close()
		}
		<-b.timerDone
	})
	return nil
}
