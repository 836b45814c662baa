package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/rune-org/rune/broker"
)

// publish is one Publish call on its way to the file.
type publish struct {
	rows []row
	// msgs are handed to followers once rows have committed.
	msgs []broker.Message
	err  error
	done chan struct{}
}

// row is one message as stored.
type row struct {
	topic                    broker.Topic
	availableAt, publishedAt int64
	id, key, lane, trace     string
	first, raw               bool
	body                     []byte
	priority                 int // execution rows: 1 … 10 (issue 35)
}

// Wait returns once the publish has committed, or failed.
func (p *publish) Wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Publish validates and encodes every message (broker.Encode) and, when all
// are valid, queues them to be inserted in one group commit with other
// publishes; otherwise it queues none. Wait returns once they have
// committed. Publishes are inserted in the order of the Publish calls, so
// messages of one Key and Lane are delivered in publish order (bar
// redeliveries). A message with a Delay becomes deliverable once it has
// passed. Followers of a Status or Completion message get it after its
// commit; messages of Options.FollowOnly topics go to followers only (after
// the commit of the messages published before them) and are not stored.
func (b *Broker) Publish(ctx context.Context, msgs ...broker.Message) broker.Pending {
	if b.closed.Load() {
		return broker.Done{Err: ErrClosed}
	}
	if err := ctx.Err(); err != nil {
		return broker.Done{Err: err}
	}
	if len(msgs) == 0 {
		return broker.Done{}
	}
	p := &publish{rows: make([]row, 0, len(msgs)), msgs: msgs, done: make(chan struct{})}
	for i := range msgs {
		m := &msgs[i]
		if b.followOnly[m.Topic] {
			if err := m.Validate(); err != nil {
				return broker.Done{Err: err}
			}
			continue
		}
		body, err := broker.Encode(*m)
		if err != nil {
			return broker.Done{Err: err}
		}
		p.rows = append(p.rows, row{topic: m.Topic, id: m.ID, key: m.Key, lane: m.Lane, trace: m.Trace,
			first: m.First, body: body, availableAt: int64(m.Delay), priority: priority(m)})
	}
	b.enqueue(p)
	return p
}

// priority is the stored priority of m: an execution message's, 1 … 10
// (0 is the default, 5); 0 on other topics, whose claim ignores it.
func priority(m *broker.Message) int {
	if m.Topic != broker.Execution {
		return 0
	}
	return broker.ExecutionPriority(m)
}

// enqueue stamps p's rows and queues it; the stamps are taken in queue
// order, so that rows published later are never due earlier.
func (b *Broker) enqueue(p *publish) {
	b.stampMu.Lock() // held across add: stamps and queue order agree
	defer b.stampMu.Unlock()
	if len(p.rows) > 0 {
		now := max(b.clock(), b.stamp)
		b.stamp = now
		for i := range p.rows {
			p.rows[i].publishedAt = now
			p.rows[i].availableAt += now // the delay, until now
		}
	}
	if !b.pubs.add(p) {
		p.err = ErrClosed
		close(p.done)
	}
}

// PublishRaw stores body as it is and returns once it has committed. It is
// decoded with broker.Decode when it is delivered; a body that does not
// decode goes to broker.DeadLetter with Raw and Reason set, and the consumer
// carries on with the next message. A body that decodes is delivered with ID
// and Key taken from it (message id and execution id). Followers are not
// notified of raw messages.
func (b *Broker) PublishRaw(ctx context.Context, topic broker.Topic, body []byte) error {
	if b.closed.Load() {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	switch topic {
	case broker.Execution, broker.Status, broker.Completion, broker.Timeout:
	default:
		return fmt.Errorf("sqlite broker: cannot publish raw to topic %q", topic)
	}
	p := &publish{rows: []row{{topic: topic, raw: true, body: append([]byte(nil), body...), priority: priority(&broker.Message{Topic: topic})}}, done: make(chan struct{})}
	b.enqueue(p)
	return p.Wait(ctx)
}

// writePublishes inserts a group of publishes in one transaction, then
// tells followers and consumers. A failed insert fails the whole group.
func (b *Broker) writePublishes(group []*publish) {
	n := 0
	for _, p := range group {
		n += len(p.rows)
	}
	var err error
	if n > 0 {
		err = b.db.Write(context.Background(), func(tx *sql.Tx) error {
			return b.insert(tx, group, n)
		})
		if err != nil {
			err = fmt.Errorf("sqlite broker: publish: %w", err)
		}
	}
	var topics [4]broker.Topic
	nt := 0
	for _, p := range group {
		p.err = err
		if err == nil {
			for i := range p.msgs {
				b.hub.Notify(p.msgs[i])
			}
			for i := range p.rows {
				if t := p.rows[i].topic; nt < len(topics) && !contains(topics[:nt], t) {
					topics[nt] = t
					nt++
				}
			}
		}
		close(p.done)
	}
	for _, t := range topics[:nt] {
		b.signal(t)
	}
}

func contains(ts []broker.Topic, t broker.Topic) bool {
	for _, u := range ts {
		if u == t {
			return true
		}
	}
	return false
}

// insert writes the n rows of group with the largest prepared inserts that fit.
func (b *Broker) insert(tx *sql.Tx, group []*publish, n int) error {
	args := make([]any, 0, 11*min(n, insertChunks[0]))
	pending := 0 // rows in args
	flush := func(size int) error {
		_, err := tx.Stmt(b.stmts.inserts[size]).Exec(args...)
		args, pending = args[:0], 0
		return err
	}
	left := n
	chunk := chunkFor(left)
	for _, p := range group {
		for i := range p.rows {
			r := &p.rows[i]
			args = append(args, string(r.topic), r.availableAt, r.publishedAt, r.id, r.key, r.lane, r.trace,
				r.first, r.raw, r.body, r.priority)
			pending++
			if pending == chunk {
				if err := flush(chunk); err != nil {
					return err
				}
				left -= chunk
				chunk = chunkFor(left)
			}
		}
	}
	return nil
}

// chunkFor is the largest prepared insert size not above n.
func chunkFor(n int) int {
	for _, c := range insertChunks {
		if c <= n {
			return c
		}
	}
	return 1
}
