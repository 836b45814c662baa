package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/rune-org/rune/broker"
)

// claimed is a row in a consumer's hand.
type claimed struct {
	id, availableAt, deliveries, publishedAt int64
	msgID, key, lane, trace, origin, reason  string
	first, raw                               bool
	body                                     []byte
}

// ack is a handled row to delete; wg is its consumer's count of acks not
// yet committed.
type ack struct {
	id int64
	wg *sync.WaitGroup
}

// maxClaim bounds the rows one claim takes.
const maxClaim = 256

// Consume runs opts.Concurrency handlers (default 1) on messages of topic
// until ctx is done, waits for the running handlers and for their acks to
// commit, and returns nil. It returns ErrClosed when the broker is closed
// first; handlers then see their ctx done. Up to opts.Prefetch rows
// (default 2 × Concurrency, never fewer than Concurrency) are claimed at
// once, handlers running or about to; those not yet handed to a handler when
// Consume stops go back to the topic as they were.
//
// A handler's nil acks the message: its row is deleted in a group commit
// with other acks (a crash before that commit delivers it again). An error
// wrapping broker.ErrReject moves it to broker.DeadLetter with the error
// text as Reason and the original Topic kept (a handler rejecting a dead
// letter drops it, with a log). Any other error, including ctx.Err(),
// delivers it again with Redelivered set after Options.RedeliveryPause, to
// whichever consumer of topic is free; when the broker is closing, the
// message stays in the file for the next Broker instead. Rows that do not
// decode (broker.Decode) are dead-lettered without calling the handler,
// except on broker.DeadLetter, where they are delivered with Raw.
//
// A claim counts as a delivery as soon as it commits: after a crash, every
// row then claimed, in a handler or prefetched, is delivered with
// Redelivered set (as RabbitMQ redelivers a consumer's unacked messages).
func (b *Broker) Consume(ctx context.Context, topic broker.Topic, opts broker.ConsumeOptions, h broker.Handler) error {
	switch topic {
	case broker.Execution, broker.Status, broker.Completion, broker.Timeout, broker.DeadLetter:
	default:
		return fmt.Errorf("sqlite broker: cannot consume unknown topic %q", topic)
	}
	if h == nil {
		return errors.New("sqlite broker: Consume with a nil handler")
	}
	b.mu.Lock()
	if b.closing.Load() {
		b.mu.Unlock()
		return ErrClosed
	}
	b.consumers.Add(1)
	b.mu.Unlock()
	defer b.consumers.Done()

	// Handlers see ctx, and also the broker closing.
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopClose := context.AfterFunc(b.closeCtx, cancel)
	defer stopClose()

	n := max(opts.Concurrency, 1)
	p := opts.Prefetch
	if p <= 0 {
		p = 2 * n
	}
	p = max(p, n)
	c := &consumer{b: b, topic: topic, h: h, ctx: hctx,
		tokens: make(chan struct{}, p), ready: make(chan *claimed, p), batch: min(p, maxClaim)}
	for range n {
		c.handlers.Go(c.work)
	}
	c.fetch()
	c.handlers.Wait()
	close(c.ready)
	for r := range c.ready {
		c.left = append(c.left, r.id)
	}
	c.unclaim()
	c.acks.Wait()
	if ctx.Err() == nil && b.closing.Load() {
		return ErrClosed
	}
	return nil
}

// consumer is one Consume call.
type consumer struct {
	b     *Broker
	topic broker.Topic
	h     broker.Handler
	ctx   context.Context
	// tokens holds one token per claimed row not yet settled (Prefetch).
	tokens chan struct{}
	// ready holds claimed rows for the handlers.
	ready    chan *claimed
	batch    int
	handlers sync.WaitGroup
	acks     sync.WaitGroup

	leftMu sync.Mutex
	left   []int64 // claimed, never handed to a handler
}

// work runs the handler on claimed rows until ctx is done.
func (c *consumer) work() {
	for {
		select {
		case r := <-c.ready:
			if c.ctx.Err() != nil {
				c.leftMu.Lock()
				c.left = append(c.left, r.id)
				c.leftMu.Unlock()
				return
			}
			c.handle(r)
			<-c.tokens
		case <-c.ctx.Done():
			return
		}
	}
}

// unclaim hands the rows claimed but never handed to a handler back to the
// topic, their claim not counted as a delivery.
func (c *consumer) unclaim() {
	if len(c.left) == 0 {
		return
	}
	err := c.b.db.Write(context.Background(), func(tx *sql.Tx) error {
		_, err := tx.Stmt(c.b.stmts.unclaim).Exec(idList(c.left))
		return err
	})
	if err != nil {
		c.b.log.Error("sqlite broker: handing back prefetched messages failed; they are delivered again when the file is reopened",
			"topic", c.topic, "messages", len(c.left), "error", err)
		return
	}
	c.b.signal(c.topic)
}

// fetch claims rows for the handlers until ctx is done.
func (c *consumer) fetch() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		select {
		case c.tokens <- struct{}{}:
		case <-c.ctx.Done():
			return
		}
		k := 1
	more:
		for k < c.batch {
			select {
			case c.tokens <- struct{}{}:
				k++
			default:
				break more
			}
		}
		for {
			woken := c.b.wait(c.topic) // before claiming: a commit after the claim's read wakes us
			rows, next, err := c.claim(k)
			if err != nil && c.ctx.Err() == nil {
				c.b.log.Error("sqlite broker: claim failed, trying again", "topic", c.topic, "pause", c.b.pause, "error", err)
				next = c.b.clock() + int64(c.b.pause)
			}
			if len(rows) > 0 {
				for range k - len(rows) {
					<-c.tokens
				}
				for i := range rows {
					c.ready <- &rows[i] // never blocks: a token per row
				}
				break
			}
			wait := c.b.poll
			if next > 0 {
				wait = min(wait, time.Duration(next-c.b.clock()))
			}
			timer.Reset(max(wait, 0))
			select {
			case <-woken:
			case <-timer.C:
			case <-c.ctx.Done():
				for range k {
					<-c.tokens
				}
				return
			}
			timer.Stop()
		}
	}
}

// claiming is the rows of one topic read by a claim and not yet marked:
// other claims of the topic skip them. mu is held across each read, so a read
// either sees a row's mark committed or finds the row here.
type claiming struct {
	mu   sync.Mutex
	rows map[int64]bool
}

// claim takes up to k due rows of the topic, in due order; when fewer were
// due, next is when the earliest other row falls due (0: none). The rows are
// read on a reader connection, off the single writer, which only marks them
// claimed; concurrent claims of the topic skip the rows read but not yet
// marked, so that their marks can share a group commit.
func (c *consumer) claim(k int) (rows []claimed, next int64, err error) {
	b := c.b
	cl := b.claiming[c.topic]
	cl.mu.Lock()
	rows, next, err = b.due(c.ctx, c.topic, k, cl.rows)
	for i := range rows {
		cl.rows[rows[i].id] = true
	}
	cl.mu.Unlock()
	if err != nil || len(rows) == 0 {
		return nil, next, err
	}
	ids := make([]int64, len(rows))
	for i := range rows {
		ids[i] = rows[i].id
		rows[i].deliveries++ // mark_claimed's
	}
	err = b.db.Write(c.ctx, func(tx *sql.Tx) error {
		_, err := tx.Stmt(b.stmts.markClaimed).Exec(idList(ids))
		return err
	})
	cl.mu.Lock()
	for _, id := range ids {
		delete(cl.rows, id)
	}
	cl.mu.Unlock()
	if err != nil {
		b.signal(c.topic) // other consumers skipped these rows
		return nil, 0, err
	}
	return rows, next, nil
}

// due reads up to k due rows of topic that are not in skip and, when fewer,
// the next due time still to come.
func (b *Broker) due(ctx context.Context, topic broker.Topic, k int, skip map[int64]bool) (rows []claimed, next int64, err error) {
	now := b.clock()
	stmt := b.stmts.readClaim
	if topic == broker.Execution {
		stmt = b.stmts.readClaimExecution
	}
	rs, err := stmt.QueryContext(ctx, string(topic), now, k+len(skip))
	if err != nil {
		return nil, 0, err
	}
	defer rs.Close()
	for rs.Next() && len(rows) < k {
		var r claimed
		if err := rs.Scan(&r.id, &r.availableAt, &r.deliveries, &r.publishedAt, &r.msgID, &r.key, &r.lane,
			&r.trace, &r.first, &r.raw, &r.origin, &r.reason, &r.body); err != nil {
			return nil, 0, err
		}
		if !skip[r.id] {
			rows = append(rows, r)
		}
	}
	if err := rs.Err(); err != nil {
		return nil, 0, err
	}
	if len(rows) == k {
		return rows, 0, nil
	}
	var at sql.NullInt64
	if err := b.stmts.readNextDue.QueryRowContext(ctx, string(topic), now).Scan(&at); err != nil {
		return nil, 0, err
	}
	return rows, at.Int64, nil
}

// handle runs the handler on r and settles the outcome.
func (c *consumer) handle(r *claimed) {
	b := c.b
	d := &broker.Delivery{
		Message:     broker.Message{Topic: c.topic, ID: r.msgID, Key: r.key, Lane: r.lane, Trace: r.trace, First: r.first},
		Redelivered: r.deliveries > 1,
	}
	if c.topic == broker.DeadLetter {
		d.Topic, d.Reason = broker.Topic(r.origin), r.reason
	}
	body, err := broker.Decode(d.Topic, r.body)
	switch {
	case err == nil:
		d.Body = body
		if r.raw {
			d.ID, d.Key = broker.IDs(body)
		}
	case c.topic == broker.DeadLetter:
		d.Raw = r.body
	default:
		b.deadLetter(r.id, d, err.Error())
		return
	}
	err = c.h(c.ctx, d)
	switch {
	case err == nil:
		c.ack(r.id)
	case errors.Is(err, broker.ErrReject):
		if c.topic == broker.DeadLetter {
			b.log.Warn("sqlite broker: dead letter rejected again, dropping it",
				"topic", d.Topic, "id", d.ID, "key", d.Key, "reason", d.Reason, "error", err)
			c.ack(r.id)
			return
		}
		b.deadLetter(r.id, d, err.Error())
	default:
		if b.closing.Load() {
			return // stays claimed: the next Broker on the file delivers it again
		}
		lvl := slog.LevelWarn
		if c.ctx.Err() != nil {
			lvl = slog.LevelDebug // a consumer shutting down hands its message on
		}
		b.log.Log(c.ctx, lvl, "sqlite broker: handler failed, delivering again",
			"topic", c.topic, "id", d.ID, "key", d.Key, "pause", b.pause, "error", err)
		b.putBack(r.id, c.topic)
	}
}

func (c *consumer) ack(id int64) {
	c.acks.Add(1)
	if !c.b.acks.add(&ack{id: id, wg: &c.acks}) {
		c.acks.Done()
	}
}

// writeAcks deletes a group of acked rows in one statement.
func (b *Broker) writeAcks(group []*ack) {
	ids := make([]int64, len(group))
	for i, a := range group {
		ids[i] = a.id
	}
	err := b.db.Write(context.Background(), func(tx *sql.Tx) error {
		_, err := tx.Stmt(b.stmts.ack).Exec(idList(ids))
		return err
	})
	if err != nil {
		// The rows stay claimed: the next Broker on the file delivers them again.
		b.log.Error("sqlite broker: ack failed", "messages", len(group), "error", err)
	}
	for _, a := range group {
		a.wg.Done()
	}
}

// putBack returns a row to its topic, due after the redelivery pause.
func (b *Broker) putBack(id int64, topic broker.Topic) {
	err := b.db.Write(context.Background(), func(tx *sql.Tx) error {
		_, err := tx.Stmt(b.stmts.putBack).Exec(id, b.clock()+int64(b.pause))
		return err
	})
	if err != nil {
		b.log.Error("sqlite broker: putting a message back failed; it is delivered again when the file is reopened", "row", id, "error", err)
		return
	}
	b.signal(topic)
}

// deadLetter moves a row to broker.DeadLetter with reason; d says what it was.
func (b *Broker) deadLetter(id int64, d *broker.Delivery, reason string) {
	b.log.Warn("sqlite broker: message dead-lettered", "topic", d.Topic, "id", d.ID, "key", d.Key, "reason", reason)
	err := b.db.Write(context.Background(), func(tx *sql.Tx) error {
		_, err := tx.Stmt(b.stmts.deadLetter).Exec(id, reason, b.clock())
		return err
	})
	if err != nil {
		b.log.Error("sqlite broker: dead-lettering failed; the message is delivered again when the file is reopened", "row", id, "error", err)
		return
	}
	b.signal(broker.DeadLetter)
}

// idList is ids as a JSON array, for json_each.
func idList(ids []int64) []byte {
	out := make([]byte, 0, 12*len(ids)+2)
	out = append(out, '[')
	for i, id := range ids {
		if i > 0 {
			out = append(out, ',')
		}
		out = strconv.AppendInt(out, id, 10)
	}
	return append(out, ']')
}
