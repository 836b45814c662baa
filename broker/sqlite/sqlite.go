// Package sqlite is the durable broker of the embedded runtime: a
// broker.Broker whose messages are rows of a SQLite file (internal/sqlitedb),
// so that queued, delayed and in-hand messages survive the process being
// killed and are delivered after it restarts.
//
// One process owns the file (and one Broker the broker_ tables): consumers
// read due rows on a reader connection and mark them claimed through the
// file's single writer, and are woken in process when a publish commits or
// a delayed message falls due; a fallback poll only covers what nothing
// announced. Every write goes through
// sqlitedb.DB.Write and is committed in a group with other callers' writes:
// publishes are queued in order and inserted many rows per statement, acks
// deleted many rows per statement.
//
// Delivery is at least once. A row is claimed (in a consumer's hand) from the
// moment its handler is called until it is acked (deleted), put back after a
// handler error (delivered again after Options.RedeliveryPause) or
// dead-lettered (moved to broker.DeadLetter with the reason). Its delivery
// count is committed with the claim, before the handler runs: a message in
// hand when the process died is delivered again after the file is reopened,
// with Redelivered set, and one never handed out is delivered without it.
package sqlite

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/broker/internal/fanout"
	"github.com/rune-org/rune/internal/sqlitedb"
	"github.com/rune-org/rune/store/sqlfile"
)

//go:embed queries.sql
var queriesSQL string

var queries = sqlfile.MustParse(queriesSQL)

// ErrClosed is returned by a Broker's methods after Close.
var ErrClosed = errors.New("sqlite broker: closed")

// Options configures a Broker. The zero value is ready to use.
type Options struct {
	// Logger receives dead-lettering and redelivery logs. Default slog.Default().
	Logger *slog.Logger
	// RedeliveryPause is how long a message whose handler failed (or returned
	// ctx.Err()) waits before it is delivered again, so that a failing
	// handler never spins in a hot loop. Default 50ms.
	RedeliveryPause time.Duration
	// FollowOnly lists topics (Status, Completion) whose messages go to
	// followers only and are not stored for Consume. Default none.
	FollowOnly []broker.Topic
	// Poll is how often an idle consumer looks at the table although nothing
	// woke it (publishes and due times wake it in process). Default 1s.
	Poll time.Duration
}

// Broker is the SQLite broker.Broker. It also implements
// broker.RawPublisher, and reads, replays and purges its dead letters
// (DeadLetters, Replay, PurgeDeadLetters). It is safe for concurrent use.
type Broker struct {
	db         *sqlitedb.DB
	log        *slog.Logger
	pause      time.Duration
	poll       time.Duration
	followOnly map[broker.Topic]bool
	hub        *fanout.Hub
	stmts      statements

	pubs *batcher[*publish]
	acks *batcher[*ack]

	// stamp is the last available_at handed out: the wall clock, never
	// going back, so one publisher's messages keep their order.
	stampMu sync.Mutex
	stamp   int64

	// claiming is, per topic, the rows read by a claim whose mark has not
	// committed yet (consumer.claim).
	claiming map[broker.Topic]*claiming

	sigMu   sync.Mutex
	signals map[broker.Topic]chan struct{}

	// closing refuses new consumers and followers; closed refuses publishes
	// once the running handlers (which may publish) have returned.
	closing, closed atomic.Bool
	// mu orders Consume's consumers.Add after Close's closing.Store.
	mu        sync.Mutex
	closeCtx  context.Context
	closeFn   context.CancelFunc
	closeOnce sync.Once
	consumers sync.WaitGroup
}

var (
	_ broker.Broker       = (*Broker)(nil)
	_ broker.RawPublisher = (*Broker)(nil)
)

// insertChunks are the row counts of the prepared multi-row inserts; a
// publish group is inserted with the largest that fit.
var insertChunks = []int{64, 16, 4, 1}

// statements are prepared once, on the writer connection but for the reads
// of claims.
type statements struct {
	inserts                                        map[int]*sql.Stmt
	markClaimed, ack, unclaim, putBack, deadLetter *sql.Stmt
	// On the reader pool (consumer.claim).
	readClaim, readNextDue *sql.Stmt
	// readClaimExecution is readClaim on broker.Execution: by priority.
	readClaimExecution *sql.Stmt
}

// New creates the broker's tables in db when missing, hands back every row
// the previous process left claimed (to be delivered again, Redelivered) and
// returns a running broker. db stays the caller's: Close the broker before
// the db. Only one Broker may use a file at a time.
func New(db *sqlitedb.DB, opts Options) (*Broker, error) {
	if db == nil {
		return nil, errors.New("sqlite broker: db: missing")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.RedeliveryPause <= 0 {
		opts.RedeliveryPause = 50 * time.Millisecond
	}
	if opts.Poll <= 0 {
		opts.Poll = time.Second
	}
	b := &Broker{db: db, log: opts.Logger, pause: opts.RedeliveryPause, poll: opts.Poll,
		followOnly: map[broker.Topic]bool{}, signals: map[broker.Topic]chan struct{}{}}
	for _, t := range opts.FollowOnly {
		b.followOnly[t] = true
	}
	b.claiming = map[broker.Topic]*claiming{}
	for _, t := range []broker.Topic{broker.Execution, broker.Status, broker.Completion, broker.Timeout, broker.DeadLetter} {
		b.claiming[t] = &claiming{rows: map[int64]bool{}}
	}
	ctx := context.Background()
	if _, err := db.W.ExecContext(ctx, queries["schema"]); err != nil {
		return nil, fmt.Errorf("sqlite broker: create tables in %s: %w", db.Path(), err)
	}
	if err := addPriority(ctx, db.W); err != nil {
		return nil, fmt.Errorf("sqlite broker: add message priorities to %s: %w", db.Path(), err)
	}
	if err := db.Write(ctx, func(tx *sql.Tx) error {
		_, err := tx.Exec(queries["release_all"])
		return err
	}); err != nil {
		return nil, fmt.Errorf("sqlite broker: release the messages left in hand in %s: %w", db.Path(), err)
	}
	if err := b.prepare(ctx); err != nil {
		b.stmts.close()
		return nil, fmt.Errorf("sqlite broker: prepare statements on %s: %w", db.Path(), err)
	}
	b.closeCtx, b.closeFn = context.WithCancel(context.Background())
	b.hub = fanout.New(b.closeCtx.Done())
	b.pubs = newBatcher(b.writePublishes)
	b.acks = newBatcher(b.writeAcks)
	return b, nil
}

// addPriority adds the priority column to a file made before it (issue
// 35; its rows get the default, 5) and its index.
func addPriority(ctx context.Context, w *sql.DB) error {
	var n int
	if err := w.QueryRowContext(ctx, queries["has_priority"]).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		if _, err := w.ExecContext(ctx, queries["add_priority"]); err != nil {
			return err
		}
	}
	_, err := w.ExecContext(ctx, queries["schema_priority"])
	return err
}

func (b *Broker) prepare(ctx context.Context) error {
	b.stmts.inserts = map[int]*sql.Stmt{}
	one := queries["insert"]
	i := strings.LastIndex(one, "(")
	for _, n := range insertChunks {
		q := one + strings.Repeat(", "+one[i:], n-1)
		s, err := b.db.W.PrepareContext(ctx, q)
		if err != nil {
			return err
		}
		b.stmts.inserts[n] = s
	}
	for _, p := range []struct {
		s    **sql.Stmt
		name string
	}{{&b.stmts.markClaimed, "mark_claimed"}, {&b.stmts.ack, "ack"}, {&b.stmts.unclaim, "unclaim"},
		{&b.stmts.putBack, "put_back"}, {&b.stmts.deadLetter, "dead_letter"}} {
		s, err := b.db.W.PrepareContext(ctx, queries[p.name])
		if err != nil {
			return err
		}
		*p.s = s
	}
	var err error
	if b.stmts.readClaim, err = b.db.R.PrepareContext(ctx, queries["claim"]); err != nil {
		return err
	}
	if b.stmts.readClaimExecution, err = b.db.R.PrepareContext(ctx, queries["claim_execution"]); err != nil {
		return err
	}
	b.stmts.readNextDue, err = b.db.R.PrepareContext(ctx, queries["next_due"])
	return err
}

func (s *statements) close() {
	for _, st := range s.inserts {
		st.Close()
	}
	for _, st := range []*sql.Stmt{s.readClaim, s.readClaimExecution, s.readNextDue, s.markClaimed, s.ack, s.unclaim, s.putBack, s.deadLetter} {
		if st != nil {
			st.Close()
		}
	}
}

// clock is the wall clock in unix ns, the unit of available_at.
func (b *Broker) clock() int64 { return time.Now().UnixNano() }

// wait returns a channel closed by the next signal of topic: a publish to it
// committed, or a row of it was put back.
func (b *Broker) wait(topic broker.Topic) <-chan struct{} {
	b.sigMu.Lock()
	defer b.sigMu.Unlock()
	ch := b.signals[topic]
	if ch == nil {
		ch = make(chan struct{})
		b.signals[topic] = ch
	}
	return ch
}

// signal wakes the consumers of topic waiting for something new.
func (b *Broker) signal(topic broker.Topic) {
	b.sigMu.Lock()
	if ch := b.signals[topic]; ch != nil {
		close(ch)
		delete(b.signals, topic)
	}
	b.sigMu.Unlock()
}

// Follow returns the Status and Completion messages with Key key published
// after Follow returns, in publish order, each once it has committed (a
// follower never sees a message that could still be lost), until ctx is
// done; then the channel closes (it also closes when the broker does).
// Following consumes nothing. Publishers never wait for a follower: a
// follower that stops draining its channel without cancelling ctx grows in
// memory by every message of its key.
func (b *Broker) Follow(ctx context.Context, key string) (<-chan broker.Message, error) {
	if b.closing.Load() {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return b.hub.Follow(ctx, key), nil
}

// Close stops the broker: consumers' handlers see their ctx done, and once
// they have returned (a handler may still publish and ack meanwhile), the
// acks and publishes queued are committed, every Consume returns ErrClosed,
// follower channels close and later calls fail with ErrClosed. Messages not
// acked stay in the file for the next Broker on it. Close leaves the db
// open, is idempotent and returns nil.
func (b *Broker) Close() error {
	b.closeOnce.Do(func() {
		b.mu.Lock()
		b.closing.Store(true)
		b.mu.Unlock()
		b.closeFn()
		b.consumers.Wait()
		b.closed.Store(true)
		b.pubs.close()
		b.acks.close()
		b.stmts.close()
	})
	return nil
}
