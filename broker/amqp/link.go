package amqp

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// link is one AMQP connection kept alive: when it is lost, link reconnects
// with backoff and re-declares the topology before anyone uses it again.
// The broker has two, one for publishing and one for consuming, because
// RabbitMQ's flow control blocks a publishing connection, and consumers on
// that connection could then not ack.
type link struct {
	b    *Broker
	name string

	mu      sync.Mutex
	conn    *amqp091.Connection // nil while down
	netConn net.Conn            // the socket under conn, for dropConnection
	gen     uint64              // counts connections made
	up      chan struct{}       // closed while conn is usable; replaced when it goes down

	started bool // connect succeeded, so run runs
	// node is the index in Broker.urls of the node connected to (or last
	// connected to), next the one dial tries first. Only connect and run
	// use them, one after the other.
	node, next int
	done       chan struct{} // closed when run has returned
}

func newLink(b *Broker, name string) *link {
	return &link{b: b, name: name, up: make(chan struct{}), done: make(chan struct{})}
}

// connect makes the first connection; run keeps it afterwards.
func (l *link) connect(ctx context.Context) error {
	conn, nc, err := l.dial(ctx)
	if err != nil {
		return err
	}
	l.setUp(conn, nc)
	l.started = true
	go l.run(conn)
	return nil
}

// dial connects to a node of Config.URL and declares the topology: the
// nodes in turn from l.next, each within Config.DialTimeout, the first
// that answers.
func (l *link) dial(ctx context.Context) (*amqp091.Connection, net.Conn, error) {
	var errs []error
	n := len(l.b.urls)
	for i := range n {
		idx := (l.next + i) % n
		conn, nc, err := l.dialNode(ctx, idx)
		if err == nil {
			l.node = idx
			return conn, nc, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, nil, errors.Join(errs...)
}

// dialNode connects to node idx of Config.URL and declares the topology.
func (l *link) dialNode(ctx context.Context, idx int) (*amqp091.Connection, net.Conn, error) {
	cfg := l.b.cfg
	dialCtx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	var nc net.Conn
	props := amqp091.NewConnectionProperties()
	props.SetClientConnectionName(cfg.Name + " " + l.name)
	conn, err := amqp091.DialConfig(l.b.urls[idx], amqp091.Config{
		Heartbeat:  cfg.Heartbeat,
		Properties: props,
		Dial: func(network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(dialCtx, network, addr)
			if err != nil {
				return nil, err
			}
			// The handshake must also finish within DialTimeout.
			if dl, ok := dialCtx.Deadline(); ok {
				_ = c.SetDeadline(dl)
			}
			nc = c
			return c, nil
		},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("amqp broker: connect to %s: %w", l.b.redacted[idx], err)
	}
	// amqp091 clears the handshake deadline itself; heartbeats take over.
	if err := l.b.declareTopology(conn); err != nil {
		_ = conn.Close()
		return nil, nil, fmt.Errorf("amqp broker: declare topology on %s: %w", l.b.redacted[idx], err)
	}
	return conn, nc, nil
}

func (l *link) setUp(conn *amqp091.Connection, nc net.Conn) {
	l.mu.Lock()
	l.conn, l.netConn = conn, nc
	l.gen++
	close(l.up)
	l.mu.Unlock()
}

func (l *link) setDown() {
	l.mu.Lock()
	l.conn, l.netConn = nil, nil
	l.up = make(chan struct{})
	l.mu.Unlock()
}

// run watches the connection and replaces it when it is lost, until the
// broker closes.
func (l *link) run(conn *amqp091.Connection) {
	defer close(l.done)
	log := l.b.log.With("connection", l.name)
	for {
		closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
		blocked := conn.NotifyBlocked(make(chan amqp091.Blocking, 4))
	watch:
		for {
			select {
			case <-l.b.linkStop:
				l.setDown()
				_ = conn.Close()
				return
			case b := <-blocked:
				if b.Active {
					log.Warn("amqp broker: RabbitMQ blocks publishing (flow control)", "reason", b.Reason)
				} else {
					log.Info("amqp broker: RabbitMQ unblocked publishing")
				}
			case err := <-closed:
				l.setDown()
				log.Warn("amqp broker: connection lost, reconnecting", "error", err, "node", l.b.redacted[l.node])
				// The node lost may be down: the others first.
				l.next = (l.node + 1) % len(l.b.urls)
				break watch
			}
		}
		pause := l.b.cfg.ReconnectMin
		for attempt := 1; ; attempt++ {
			if !sleep(l.b.linkStop, jitter(pause)) {
				return
			}
			ctx, cancel := contextFrom(l.b.linkStop)
			c, nc, err := l.dial(ctx)
			cancel()
			if err == nil {
				conn = c
				l.setUp(conn, nc)
				log.Info("amqp broker: reconnected", "attempt", attempt, "node", l.b.redacted[l.node])
				break
			}
			log.Warn("amqp broker: reconnect failed", "attempt", attempt, "error", err)
			pause = min(2*pause, l.b.cfg.ReconnectMax)
		}
	}
}

// get returns the current connection, waiting for one while the link is down.
func (l *link) get(ctx context.Context) (*amqp091.Connection, uint64, error) {
	for {
		l.mu.Lock()
		conn, gen, up := l.conn, l.gen, l.up
		l.mu.Unlock()
		if conn != nil && !conn.IsClosed() {
			return conn, gen, nil
		}
		if conn != nil {
			// Lost, and run has not noticed yet: wait for it to.
			select {
			case <-ctx.Done():
				return nil, 0, ctx.Err()
			case <-l.b.closing:
				return nil, 0, ErrClosed
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		select {
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-l.b.closing:
			return nil, 0, ErrClosed
		case <-up:
		}
	}
}

// channel opens a channel on the current connection, waiting for one.
func (l *link) channel(ctx context.Context) (*amqp091.Channel, uint64, error) {
	conn, gen, err := l.get(ctx)
	if err != nil {
		return nil, 0, err
	}
	ch, err := conn.Channel()
	if err != nil {
		return nil, 0, fmt.Errorf("amqp broker: open channel on %s connection: %w", l.name, err)
	}
	return ch, gen, nil
}

// dropConnection cuts the socket under the connection without a goodbye, as
// a network failure would. Tests use it.
func (l *link) dropConnection() {
	l.mu.Lock()
	nc := l.netConn
	l.mu.Unlock()
	if nc != nil {
		_ = nc.Close()
	}
}

// localPort is the local TCP port of the current connection, 0 while down.
func (l *link) localPort() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.netConn == nil {
		return 0
	}
	if a, ok := l.netConn.LocalAddr().(*net.TCPAddr); ok {
		return a.Port
	}
	return 0
}

// sleep waits d, returning false when stop closes first.
func sleep(stop <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-stop:
		return false
	case <-t.C:
		return true
	}
}

// jitter spreads d over [d/2, d) so that many clients do not reconnect in step.
func jitter(d time.Duration) time.Duration {
	if d < 2 {
		return d
	}
	return d/2 + rand.N(d/2)
}

// contextFrom is a context cancelled when stop closes.
func contextFrom(stop <-chan struct{}) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// isNotFound reports whether err is RabbitMQ's NOT_FOUND: a queue or
// exchange that should exist was deleted behind our back.
func isNotFound(err error) bool {
	var e *amqp091.Error
	return errors.As(err, &e) && e.Code == amqp091.NotFound
}

// isPermanent reports whether err is an AMQP error that retrying will not
// cure: access refused, not found, precondition failed and the like.
func isPermanent(err error) bool {
	var e *amqp091.Error
	if errors.As(err, &e) {
		switch e.Code {
		case amqp091.AccessRefused, amqp091.NotFound, amqp091.PreconditionFailed, amqp091.NotAllowed, amqp091.NotImplemented:
			return true
		}
	}
	return false
}
