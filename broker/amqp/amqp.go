// Package amqp is the RabbitMQ broker.Broker of the distributed runtime
// (RFC 001 §7.1, §8, §9; RFC 005 §5), built on github.com/rabbitmq/amqp091-go.
//
// Guarantees: every publish uses publisher confirms, pipelined (Pending.Wait
// waits for all confirms of one call at once) and mandatory, so a message no
// queue accepts is an error, not a silent loss. Consumers ack manually after
// their handler returns; dead letters keep their reason in the x-rune-reason
// header. A lost connection or channel is re-established with backoff, the
// topology re-declared and consuming resumed; publishes whose confirms were
// lost fail (the caller retries) and unacked deliveries are redelivered by
// RabbitMQ. See topology.go for the queues and exchanges.
package amqp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/rune-org/rune/broker"
)

// ErrClosed is returned by a Broker's methods after Close.
var ErrClosed = errors.New("amqp broker: closed")

// Broker is the RabbitMQ broker.Broker; it also implements
// broker.RawPublisher. It is safe for concurrent use.
type Broker struct {
	cfg         Config
	log         *slog.Logger
	n           names
	urls        []string // the nodes of Config.URL
	redacted    []string // urls without passwords, for logs and errors
	redactedURL string   // all of them

	pub  *link // publishing connection
	sub  *link // consuming and following connection
	pubs []*publisher

	// delays remembers, per publishing connection, when each delay queue was
	// last declared (see delayQueue.args for why it is redeclared).
	delayMu  sync.Mutex
	delayGen uint64
	delays   map[string]time.Time
	declared map[string]bool // every delay queue ever declared, for tests' clean-up

	declareMu  sync.Mutex
	declarer   *declarer // for declaring delay queues
	declareGen uint64

	closing chan struct{} // closed first by Close: everything stops
	// pubStop is closed by Close once consumers and followers stopped:
	// publishers last until then, so that a consumer stopping can still
	// return the messages of a batch on their own (batch.go).
	pubStop chan struct{}
	pubWG   sync.WaitGroup
	// published counts what this broker published (Published).
	pubCount  sync.Mutex
	published map[broker.Topic]Published
	linkStop  chan struct{} // closed by Close once all else stopped: connections close
	closeOnce sync.Once
	closeMu   sync.Mutex
	closed    bool
	wg        sync.WaitGroup // consumers and followers
}

var (
	_ broker.Broker       = (*Broker)(nil)
	_ broker.RawPublisher = (*Broker)(nil)
)

// New connects to RabbitMQ (one attempt, bounded by ctx and
// Config.DialTimeout), declares the topology of cfg.Role and returns a
// running broker. From then on the broker reconnects by itself; Close stops it.
func New(ctx context.Context, cfg Config) (*Broker, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	urls, _ := splitURLs(cfg.URL) // withDefaults checked them
	redacted := make([]string, len(urls))
	for i, raw := range urls {
		redacted[i] = raw
		if u, err := url.Parse(raw); err == nil {
			redacted[i] = u.Redacted()
		}
	}
	b := &Broker{
		cfg:         cfg,
		log:         cfg.Logger,
		n:           newNames(cfg.Prefix).sharded(cfg.ExecutionQueues, cfg.QueueType == QueueQuorum),
		urls:        urls,
		redacted:    redacted,
		redactedURL: strings.Join(redacted, ","),
		delays:      make(map[string]time.Time),
		declared:    make(map[string]bool),
		closing:     make(chan struct{}),
		pubStop:     make(chan struct{}),
		published:   make(map[broker.Topic]Published),
		linkStop:    make(chan struct{}),
	}
	b.pub = newLink(b, "publish")
	b.sub = newLink(b, "consume")
	if err := b.pub.connect(ctx); err != nil {
		return nil, err
	}
	if err := b.sub.connect(ctx); err != nil {
		_ = b.Close()
		return nil, err
	}
	for i := range cfg.PublishChannels {
		p := newPublisher(b, i)
		b.pubs = append(b.pubs, p)
		b.pubWG.Go(p.run)
	}
	return b, nil
}

// declareTopology declares the static topology on a fresh connection.
func (b *Broker) declareTopology(conn *amqp091.Connection) error {
	d := &declarer{conn: conn, log: b.log, quorum: b.n.quorum}
	defer d.close()
	return b.n.declare(d, b.cfg.Role)
}

// ensureDelay declares the delay queue d unless this connection declared it
// less than delayLease ago.
func (b *Broker) ensureDelay(ctx context.Context, d *delayQueue) error {
	conn, gen, err := b.pub.get(ctx)
	if err != nil {
		return err
	}
	b.delayMu.Lock()
	if gen != b.delayGen {
		b.delayGen = gen
		clear(b.delays)
	}
	t, ok := b.delays[d.name]
	b.delayMu.Unlock()
	if ok && time.Since(t) < delayLease {
		return nil
	}

	// declareMu serialises the declaring; delayMu is never held across a
	// round trip because publishers' confirm loops take it (forgetDelay).
	b.declareMu.Lock()
	defer b.declareMu.Unlock()
	if b.declarer == nil || b.declareGen != gen {
		if b.declarer != nil {
			b.declarer.close()
		}
		b.declarer, b.declareGen = &declarer{conn: conn, log: b.log, quorum: b.n.quorum}, gen
	}
	if err := declareDelay(b.declarer, d); err != nil {
		return fmt.Errorf("amqp broker: %w", err)
	}
	b.delayMu.Lock()
	b.delays[d.name] = time.Now()
	b.declared[d.name] = true
	b.delayMu.Unlock()
	return nil
}

// redeclare declares the topology again on the current connection, after a
// queue or exchange turned out to be missing.
func (b *Broker) redeclare(ctx context.Context) error {
	conn, _, err := b.pub.get(ctx)
	if err != nil {
		return err
	}
	if err := b.declareTopology(conn); err != nil {
		return fmt.Errorf("amqp broker: declare topology on %s: %w", b.redactedURL, err)
	}
	return nil
}

// Close stops the broker: consumers stop taking messages, their handlers
// see their ctx done and Close waits for them to return (so their acks go
// through); followers' channels close; publishes still waiting for confirms
// fail with ErrClosed; then the connections close. Later calls fail with
// ErrClosed. Close is idempotent and returns nil.
func (b *Broker) Close() error {
	b.closeOnce.Do(func() {
		b.closeMu.Lock()
		b.closed = true
		close(b.closing)
		b.closeMu.Unlock()
		b.wg.Wait()
		close(b.pubStop)
		b.pubWG.Wait()
		close(b.linkStop)
		if b.pub.started {
			<-b.pub.done
		}
		if b.sub.started {
			<-b.sub.done
		}
	})
	return nil
}

// enter registers a consumer, follower or publisher for Close to wait for;
// it returns false once the broker is closing.
func (b *Broker) enter() bool {
	b.closeMu.Lock()
	defer b.closeMu.Unlock()
	if b.closed {
		return false
	}
	b.wg.Add(1)
	return true
}

func (b *Broker) isClosed() bool {
	select {
	case <-b.closing:
		return true
	default:
		return false
	}
}

// dropConnections cuts both connections' sockets, as a network failure
// would. Tests use it.
func (b *Broker) dropConnections() {
	b.pub.dropConnection()
	b.sub.dropConnection()
}
