package bench

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/rune-org/rune/broker/amqp"
)

// RawConfig is where RawHopBenchmark runs.
type RawConfig struct {
	// URL is RabbitMQ's (of a cluster, comma-separated: the first node).
	URL string
	// Prefix starts the names of its queue and exchange.
	Prefix string
	// Name is in its connections' names.
	Name string
	// PublishChannels is how many confirm-mode channels it publishes on,
	// as amqp.Config.PublishChannels. Default 1.
	PublishChannels int
}

// HopPattern is the work of one hop in RawHopBenchmark.
type HopPattern struct {
	// Body is the size in bytes of the persistent message. Default (and
	// minimum) 8: a timestamp.
	Body int `json:"body_bytes"`
	// Statuses is how many transient messages each hop also publishes
	// (confirmed, waited for with the persistent one) through a topic
	// exchange to a non-durable queue that a consumer drains: Rune's status
	// messages. Default 0.
	Statuses int `json:"statuses"`
	// StatusBody is the size in bytes of each. Default 8.
	StatusBody int `json:"status_bytes,omitempty"`
	// InFlight is how many message chains circulate, so how many messages
	// the queue holds: RabbitMQ works harder for a deeper queue. Default
	// (and minimum) the concurrency: fewer would leave handlers idle.
	InFlight int `json:"inflight,omitempty"`
}

func (p HopPattern) withDefaults() HopPattern {
	p.Body = max(p.Body, 8)
	if p.Statuses > 0 {
		p.StatusBody = max(p.StatusBody, 8)
	}
	return p
}

func (p HopPattern) String() string {
	p = p.withDefaults()
	s := fmt.Sprintf("consume + confirmed persistent publish of %d bytes", p.Body)
	if p.Statuses > 0 {
		s += fmt.Sprintf(" + %d confirmed transient publishes of %d bytes through a topic exchange, consumed", p.Statuses, p.StatusBody)
	}
	s += " + ack per hop"
	if p.InFlight > 0 {
		s += fmt.Sprintf(", %d in flight", p.InFlight)
	}
	return s
}

// HopResult is what RawHopBenchmark measured.
type HopResult struct {
	Pattern HopPattern `json:"pattern"`
	// Hops is how many messages were consumed (each one consume + one
	// confirmed persistent publish of its successor, + one ack).
	Hops int
	// Concurrency is the number of handlers; InFlight the number of message
	// chains circulating (one per handler).
	Concurrency int
	InFlight    int
	Elapsed     time.Duration
	HopsPerSec  float64
	// Latency of one hop: from a handler receiving a message to the next
	// handler receiving its successor (publish, confirm, ack, routing and
	// delivery included).
	P50, P90, P99, Max time.Duration
}

func (r HopResult) String() string {
	return fmt.Sprintf("%d hops in %v: %.0f hops/s, latency p50 %v p90 %v p99 %v max %v (concurrency %d, in flight %d)",
		r.Hops, r.Elapsed.Round(time.Millisecond), r.HopsPerSec, r.P50, r.P90, r.P99, r.Max, r.Concurrency, r.InFlight)
}

// RawHopBenchmark measures RabbitMQ's raw ceiling for Rune's work pattern
// with the bare client, without Rune's encoding or engine: concurrency
// handlers consume from a queue with the arguments of workflow.execution
// (durable, TTL, max-priority 10, queue version 2; prefetch 2 ×
// concurrency), and for each message publish its successor persistent
// (pattern.Body bytes) and pattern.Statuses transient messages with
// publisher confirms, wait for the confirms and ack. concurrency chains
// circulate until hops messages have been consumed. `rune bench` compares
// the engine's node rate with this figure.
//
// Its queues are <cfg.Prefix>workflow.bench.<random> and its exchange,
// deleted at the end; ctx bounds the whole run.
func RawHopBenchmark(ctx context.Context, cfg RawConfig, hops, concurrency int, pattern HopPattern) (HopResult, error) {
	cfg.PublishChannels = max(cfg.PublishChannels, 1)
	pattern = pattern.withDefaults()
	if hops <= 0 || concurrency <= 0 {
		return HopResult{}, fmt.Errorf("raw hop benchmark: hops (%d) and concurrency (%d) must be positive", hops, concurrency)
	}
	dial := func(name string) (*amqp091.Connection, error) {
		props := amqp091.NewConnectionProperties()
		props.SetClientConnectionName(cfg.Name + " bench " + name)
		url := strings.TrimSpace(strings.Split(cfg.URL, ",")[0]) // a cluster: a benchmark measures one node
		conn, err := amqp091.DialConfig(url, amqp091.Config{
			Heartbeat:  10 * time.Second,
			Properties: props,
			Dial:       amqp091.DefaultDial(10 * time.Second),
		})
		if err != nil {
			return nil, fmt.Errorf("raw hop benchmark: connect: %w", err)
		}
		return conn, nil
	}
	pubConn, err := dial("publish")
	if err != nil {
		return HopResult{}, err
	}
	defer pubConn.Close()
	subConn, err := dial("consume")
	if err != nil {
		return HopResult{}, err
	}
	defer subConn.Close()

	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	queue := cfg.Prefix + "workflow.bench." + hex.EncodeToString(rnd[:])
	execArgs, statusArgs, statusRKPrefix := amqp.QueueArgs()
	admin, err := pubConn.Channel()
	if err != nil {
		return HopResult{}, fmt.Errorf("raw hop benchmark: open channel: %w", err)
	}
	if _, err := admin.QueueDeclare(queue, true, false, false, false, execArgs); err != nil {
		return HopResult{}, fmt.Errorf("raw hop benchmark: declare queue %s: %w", queue, err)
	}
	statusX, statusQ := queue+".events", queue+".status"
	defer func() {
		if ch, err := pubConn.Channel(); err == nil {
			_, _ = ch.QueueDelete(queue, false, false, false)
			_, _ = ch.QueueDelete(statusQ, false, false, false)
			_ = ch.ExchangeDelete(statusX, false, false)
			_ = ch.Close()
		}
	}()
	if pattern.Statuses > 0 {
		// As workflow.events and workflow.node.status, drained as the
		// bench drains the real one.
		err := admin.ExchangeDeclare(statusX, amqp091.ExchangeTopic, false, true, false, false, nil)
		if err == nil {
			_, err = admin.QueueDeclare(statusQ, false, false, false, false, statusArgs)
		}
		if err == nil {
			err = admin.QueueBind(statusQ, statusRKPrefix+"#", statusX, false, nil)
		}
		var drain *amqp091.Channel
		if err == nil {
			drain, err = subConn.Channel()
		}
		var statuses <-chan amqp091.Delivery
		if err == nil {
			statuses, err = drain.Consume(statusQ, "", true, false, false, false, nil)
		}
		if err != nil {
			return HopResult{}, fmt.Errorf("raw hop benchmark: declare status queue: %w", err)
		}
		go func() {
			for range statuses {
			}
		}()
	}

	pubs := make([]*amqp091.Channel, cfg.PublishChannels)
	for i := range pubs {
		if pubs[i], err = pubConn.Channel(); err == nil {
			err = pubs[i].Confirm(false)
		}
		if err != nil {
			return HopResult{}, fmt.Errorf("raw hop benchmark: open confirm channel: %w", err)
		}
	}
	statusBody := make([]byte, pattern.StatusBody)
	send := func(ctx context.Context, ch *amqp091.Channel, exchange, key string, mode uint8, body []byte) (*amqp091.DeferredConfirmation, error) {
		return ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, true, false, amqp091.Publishing{
			ContentType:  "application/json",
			DeliveryMode: mode,
			Body:         body,
		})
	}
	publish := func(ctx context.Context, ch *amqp091.Channel, ts int64) error {
		body := make([]byte, pattern.Body)
		binary.BigEndian.PutUint64(body, uint64(ts))
		dcs := make([]*amqp091.DeferredConfirmation, 0, 1+pattern.Statuses)
		for range pattern.Statuses {
			dc, err := send(ctx, ch, statusX, statusRKPrefix+"bench", amqp091.Transient, statusBody)
			if err != nil {
				return err
			}
			dcs = append(dcs, dc)
		}
		dc, err := send(ctx, ch, "", queue, amqp091.Persistent, body)
		if err != nil {
			return err
		}
		for _, dc := range append(dcs, dc) {
			ok, err := dc.WaitContext(ctx)
			if err != nil {
				return err
			}
			if !ok {
				return errors.New("nacked")
			}
		}
		return nil
	}

	// By default one chain per handler: more only queue behind handlers
	// that are waiting for confirms (but make the queue deeper).
	inflight := min(max(concurrency, pattern.InFlight), hops)
	sub, err := subConn.Channel()
	if err == nil {
		err = sub.Qos(2*concurrency, 0, false)
	}
	var deliveries <-chan amqp091.Delivery
	if err == nil {
		deliveries, err = sub.Consume(queue, "", false, false, false, false, nil)
	}
	if err != nil {
		return HopResult{}, fmt.Errorf("raw hop benchmark: consume %s: %w", queue, err)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		issued    atomic.Int64 // messages published (seeds included)
		consumed  atomic.Int64
		nlat      atomic.Int64 // latencies recorded
		latencies = make([]int64, hops)
		errOnce   sync.Once
		runErr    error
		done      = make(chan struct{})
	)
	fail := func(err error) {
		errOnce.Do(func() { runErr = err; cancel() })
	}
	start := time.Now()
	issued.Store(int64(inflight))
	for i := range inflight {
		if err := publish(ctx, pubs[i%len(pubs)], 0); err != nil {
			return HopResult{}, fmt.Errorf("raw hop benchmark: seed: %w", err)
		}
	}
	var wg sync.WaitGroup
	for w := range concurrency {
		wg.Go(func() {
			ch := pubs[w%len(pubs)]
			for {
				d, ok := amqp.NextDelivery(ctx, deliveries)
				if !ok {
					if ctx.Err() == nil {
						fail(errors.New("consumer channel closed"))
					}
					return
				}
				now := time.Now().UnixNano()
				if ts := int64(binary.BigEndian.Uint64(d.Body)); ts != 0 {
					latencies[nlat.Add(1)-1] = now - ts
				}
				if issued.Add(1) <= int64(hops) {
					if err := publish(ctx, ch, now); err != nil {
						fail(fmt.Errorf("raw hop benchmark: publish: %w", err))
						return
					}
				}
				if err := d.Ack(false); err != nil {
					fail(fmt.Errorf("raw hop benchmark: ack: %w", err))
					return
				}
				if consumed.Add(1) == int64(hops) {
					close(done)
				}
			}
		})
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
	elapsed := time.Since(start)
	cancel()
	wg.Wait()
	if runErr != nil {
		return HopResult{}, runErr
	}
	if err := ctx.Err(); err != nil && consumed.Load() < int64(hops) {
		return HopResult{}, fmt.Errorf("raw hop benchmark: %d of %d hops: %w", consumed.Load(), hops, err)
	}
	r := hopResult(hops, concurrency, inflight, elapsed, latencies)
	r.Pattern = pattern
	return r, nil
}

func hopResult(hops, concurrency, inflight int, elapsed time.Duration, lat []int64) HopResult {
	var l []int64
	for _, v := range lat {
		if v > 0 {
			l = append(l, v)
		}
	}
	slices.Sort(l)
	pct := func(p float64) time.Duration {
		if len(l) == 0 {
			return 0
		}
		return time.Duration(l[min(len(l)-1, int(p*float64(len(l))))])
	}
	r := HopResult{
		Hops: hops, Concurrency: concurrency, InFlight: inflight, Elapsed: elapsed,
		HopsPerSec: float64(hops) / elapsed.Seconds(),
		P50:        pct(0.50), P90: pct(0.90), P99: pct(0.99),
	}
	if len(l) > 0 {
		r.Max = time.Duration(l[len(l)-1])
	}
	return r
}
