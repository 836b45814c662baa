package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/broker/sqlite"
	"github.com/rune-org/rune/message"
)

// consume runs Consume in the background until t ends; it returns the
// deliveries the handler saw.
func consume(t *testing.T, b *sqlite.Broker, topic broker.Topic, opts broker.ConsumeOptions, h broker.Handler) <-chan *broker.Delivery {
	t.Helper()
	ctx, cancel := context.WithCancel(ctxBG)
	ch := make(chan *broker.Delivery, 1024)
	done := make(chan error, 1)
	go func() {
		done <- b.Consume(ctx, topic, opts, func(ctx context.Context, d *broker.Delivery) error {
			ch <- d
			return h(ctx, d)
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("Consume did not return")
		}
	})
	return ch
}

func recv(t *testing.T, ch <-chan *broker.Delivery, what string) *broker.Delivery {
	t.Helper()
	select {
	case d := <-ch:
		return d
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: nothing delivered", what)
		return nil
	}
}

func ack(context.Context, *broker.Delivery) error { return nil }

// Dead letters are listed oldest first with their reason, survive a
// reopening of the file, are replayed where they came from (and removed),
// and purged.
func TestDeadLetters(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "rune.db")
	db := openDB(t, path)
	b := newBroker(t, db, sqlite.Options{})
	ids := []string{"d0", "d1", "d2"}
	var msgs []broker.Message
	for _, id := range ids {
		msgs = append(msgs, execMsg(id, 0))
	}
	timeout := broker.Message{Topic: broker.Timeout, ID: "t0", Key: "exec-t0", Body: &message.Timeout{
		WorkflowID: "wf", ExecutionID: "exec-t0", NodeID: "n", Deadline: time.Now(), Key: "k", Message: execBody("t0x", "exec-t0")}}
	if err := b.Publish(ctxBG, msgs...).Wait(ctxBG); err != nil {
		t.Fatal(err)
	}
	if err := b.Publish(ctxBG, timeout).Wait(ctxBG); err != nil {
		t.Fatal(err)
	}
	reject := func(_ context.Context, d *broker.Delivery) error {
		return fmt.Errorf("bad %s: %w", d.ID, broker.ErrReject)
	}
	ctx, cancel := context.WithCancel(ctxBG)
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.Consume(ctx, broker.Execution, broker.ConsumeOptions{}, reject) // one at a time: dead-lettered in order
	}()
	waitFor(t, "three dead letters", func() bool {
		_, n, err := b.DeadLetters(ctxBG, 0)
		return err == nil && n == 3
	})
	cancel()
	<-done
	b.Close()

	b = newBroker(t, db, sqlite.Options{}) // what the file holds, not the broker
	t.Cleanup(func() { b.Close() })
	dls, total, err := b.DeadLetters(ctxBG, 2)
	if err != nil {
		t.Fatal(err)
	}
	if total != 3 || len(dls) != 2 {
		t.Fatalf("DeadLetters(2) = %d letters of %d, want 2 of 3", len(dls), total)
	}
	for i, dl := range dls {
		if dl.ID != ids[i] || dl.Key != "exec-"+ids[i] || dl.Topic != broker.Execution || dl.Reason != "bad "+ids[i]+": message rejected" {
			t.Errorf("dead letter %d = %+v, want %s from %s with its reason", i, dl, ids[i], broker.Execution)
		}
		body, err := broker.Decode(dl.Topic, dl.Body)
		if err != nil || !reflect.DeepEqual(body, msgs[i].Body) {
			t.Errorf("dead letter %s body = %v (%v), want the published one", dl.ID, body, err)
		}
		if time.Since(dl.At) > time.Minute || dl.At.After(time.Now()) {
			t.Errorf("dead letter %s At = %v, want when it was published", dl.ID, dl.At)
		}
	}

	// Replay: published again, first-time, and no longer a dead letter.
	ex := consume(t, b, broker.Execution, broker.ConsumeOptions{}, ack)
	done2, err := b.Replay(ctxBG, []string{"d1", "nope"}, func(m broker.Message) (broker.Message, error) {
		m.Body.(*message.NodeExecution).CurrentNode = "fixed"
		return m, nil
	})
	if !slices.Equal(done2, []string{"d1"}) || err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("Replay(d1, nope) = %v, %v; want [d1] and an error naming nope", done2, err)
	}
	d := recv(t, ex, "replayed message")
	if d.ID != "d1" || d.Redelivered || d.First || d.Body.(*message.NodeExecution).CurrentNode != "fixed" {
		t.Errorf("replayed delivery id=%s redelivered=%v first=%v node=%s, want d1, first delivery, fixed",
			d.ID, d.Redelivered, d.First, d.Body.(*message.NodeExecution).CurrentNode)
	}
	if _, n, _ := b.DeadLetters(ctxBG, 0); n != 2 {
		t.Errorf("after replaying one of 3, %d dead letters, want 2", n)
	}
	if _, err := b.Replay(ctxBG, nil, nil); err == nil {
		t.Error("Replay of no ids succeeded")
	}

	n, err := b.PurgeDeadLetters(ctxBG)
	if err != nil || n != 2 {
		t.Errorf("PurgeDeadLetters = %d, %v; want 2", n, err)
	}
	if dls, n, err := b.DeadLetters(ctxBG, 0); err != nil || n != 0 || len(dls) != 0 {
		t.Errorf("after purge: %d dead letters (%v), want none", n, err)
	}
	// The timeout message was never consumed: purging dead letters left it.
	tm := consume(t, b, broker.Timeout, broker.ConsumeOptions{}, ack)
	if d := recv(t, tm, "timeout message"); d.ID != "t0" {
		t.Errorf("timeout topic delivered %s, want t0", d.ID)
	}
}

// A status or completion dead letter cannot be replayed: nothing would
// consume it again the way it was.
func TestReplayOnlyExecutionsAndTimeouts(t *testing.T) {
	t.Parallel()
	b := newBroker(t, openDB(t, filepath.Join(t.TempDir(), "rune.db")), sqlite.Options{})
	t.Cleanup(func() { b.Close() })
	st := broker.Message{Topic: broker.Status, ID: "s1", Key: "e", Body: &message.NodeStatus{WorkflowID: "wf", ExecutionID: "e", NodeID: "n", Status: message.StatusRunning}}
	if err := b.Publish(ctxBG, st).Wait(ctxBG); err != nil {
		t.Fatal(err)
	}
	consume(t, b, broker.Status, broker.ConsumeOptions{}, func(context.Context, *broker.Delivery) error { return broker.ErrReject })
	waitFor(t, "the dead letter", func() bool { _, n, _ := b.DeadLetters(ctxBG, 0); return n == 1 })
	if _, err := b.Replay(ctxBG, []string{"s1"}, nil); err == nil || !strings.Contains(err.Error(), "only") {
		t.Errorf("Replay of a status = %v, want a refusal", err)
	}
}

// FollowOnly topics reach followers, after which nothing is stored.
func TestFollowOnlyNotStored(t *testing.T) {
	t.Parallel()
	db := openDB(t, filepath.Join(t.TempDir(), "rune.db"))
	b := newBroker(t, db, sqlite.Options{FollowOnly: []broker.Topic{broker.Status}})
	t.Cleanup(func() { b.Close() })
	ctx, cancel := context.WithCancel(ctxBG)
	defer cancel()
	events, err := b.Follow(ctx, "exec_1")
	if err != nil {
		t.Fatal(err)
	}
	st := &message.NodeStatus{WorkflowID: "wf", ExecutionID: "exec_1", NodeID: "a", Status: message.StatusRunning}
	if err := b.Publish(ctx, broker.Message{Topic: broker.Status, Key: "exec_1", Body: st}).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-events:
		if ev.Body != st {
			t.Fatalf("follower got %v", ev.Body)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("follower got nothing")
	}
	var n int
	if err := db.R.QueryRow("SELECT count(*) FROM broker_messages").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d rows stored; FollowOnly topics must not be", n)
	}
}

// Close lets the running handler return and keeps its message, and a
// delayed one, for the next Broker on the file; the one in hand comes back
// Redelivered, the other not.
func TestCloseKeepsMessages(t *testing.T) {
	t.Parallel()
	db := openDB(t, filepath.Join(t.TempDir(), "rune.db"))
	b := newBroker(t, db, sqlite.Options{})
	if err := b.Publish(ctxBG, execMsg("held", 0), execMsg("later", 300*time.Millisecond)).Wait(ctxBG); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- b.Consume(ctxBG, broker.Execution, broker.ConsumeOptions{}, func(ctx context.Context, d *broker.Delivery) error {
			close(started)
			<-ctx.Done() // Close cancels handlers
			return ctx.Err()
		})
	}()
	<-started
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, sqlite.ErrClosed) {
		t.Errorf("Consume after Close = %v, want ErrClosed", err)
	}
	if err := b.Publish(ctxBG, execMsg("x", 0)).Wait(ctxBG); !errors.Is(err, sqlite.ErrClosed) {
		t.Errorf("Publish after Close = %v, want ErrClosed", err)
	}
	if err := b.Consume(ctxBG, broker.Execution, broker.ConsumeOptions{}, ack); !errors.Is(err, sqlite.ErrClosed) {
		t.Errorf("Consume after Close = %v, want ErrClosed", err)
	}
	if _, err := b.Follow(ctxBG, "k"); !errors.Is(err, sqlite.ErrClosed) {
		t.Errorf("Follow after Close = %v, want ErrClosed", err)
	}

	b = newBroker(t, db, sqlite.Options{})
	t.Cleanup(func() { b.Close() })
	ch := consume(t, b, broker.Execution, broker.ConsumeOptions{}, ack)
	got := map[string]bool{}
	for range 2 {
		d := recv(t, ch, "kept message")
		got[d.ID] = d.Redelivered
	}
	if r, ok := got["held"]; !ok || !r {
		t.Errorf("message in hand at Close: delivered=%v redelivered=%v, want delivered again, Redelivered", ok, r)
	}
	if r, ok := got["later"]; !ok || r {
		t.Errorf("delayed message: delivered=%v redelivered=%v, want delivered, not Redelivered", ok, r)
	}
}

// Rows prefetched but never handed to a handler go back as they were when
// the consumer stops: the next consumer gets them as first deliveries.
func TestPrefetchedHandedBack(t *testing.T) {
	t.Parallel()
	b := newBroker(t, openDB(t, filepath.Join(t.TempDir(), "rune.db")), sqlite.Options{})
	t.Cleanup(func() { b.Close() })
	var msgs []broker.Message
	for i := range 4 {
		msgs = append(msgs, execMsg(fmt.Sprintf("p%d", i), 0))
	}
	if err := b.Publish(ctxBG, msgs...).Wait(ctxBG); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctxBG)
	started := make(chan string, 4)
	done := make(chan error, 1)
	go func() {
		done <- b.Consume(ctx, broker.Execution, broker.ConsumeOptions{Concurrency: 1, Prefetch: 4}, func(ctx context.Context, d *broker.Delivery) error {
			started <- d.ID
			<-ctx.Done()
			return ctx.Err()
		})
	}()
	held := <-started
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ch := consume(t, b, broker.Execution, broker.ConsumeOptions{Concurrency: 4}, ack)
	for range 4 {
		d := recv(t, ch, "message after the first consumer stopped")
		if d.Redelivered != (d.ID == held) {
			t.Errorf("message %s: Redelivered = %v, want %v (only %s was handed to a handler)", d.ID, d.Redelivered, d.ID == held, held)
		}
	}
}

// Publishes pipelined from one goroutine (Publish after Publish, waiting at
// the end) are delivered in publish order to a consumer of Concurrency 1.
func TestPipelinedPublishesKeepOrder(t *testing.T) {
	t.Parallel()
	b := newBroker(t, openDB(t, filepath.Join(t.TempDir(), "rune.db")), sqlite.Options{})
	t.Cleanup(func() { b.Close() })
	const n = 300
	var pending []broker.Pending
	for i := range n {
		m := execMsg(fmt.Sprintf("o%03d", i), 0)
		m.Key, m.Lane = "exec-order", "lane"
		pending = append(pending, b.Publish(ctxBG, m))
	}
	for _, p := range pending {
		if err := p.Wait(ctxBG); err != nil {
			t.Fatal(err)
		}
	}
	ch := consume(t, b, broker.Execution, broker.ConsumeOptions{Concurrency: 1, Prefetch: 64}, ack)
	for i := range n {
		if d := recv(t, ch, "ordered message"); d.ID != fmt.Sprintf("o%03d", i) || d.Lane != "lane" {
			t.Fatalf("delivery %d: id %s lane %q, want o%03d on lane", i, d.ID, d.Lane, i)
		}
	}
}

// Issue 35: a file made before message priorities (no priority column)
// gets the column when a broker opens it, its messages at the default
// priority (5), and execution messages go highest priority first.
func TestPriorityAddedToOldFile(t *testing.T) {
	t.Parallel()
	db := openDB(t, filepath.Join(t.TempDir(), "rune.db"))
	if _, err := db.W.ExecContext(ctxBG, oldSchema); err != nil {
		t.Fatal(err)
	}
	body, err := broker.Encode(execMsg("old", 0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.W.ExecContext(ctxBG, `INSERT INTO broker_messages (topic, available_at, published_at, msg_id, key, lane, trace, first, raw, body)
		VALUES ('workflow.execution', 1, 1, 'old', 'exec-old', '', '', 0, 0, ?)`, body); err != nil {
		t.Fatal(err)
	}
	b := newBroker(t, db, sqlite.Options{})
	t.Cleanup(func() { b.Close() })
	var msgs []broker.Message
	for i, p := range []int{1, 0, 10, 7} {
		m := execMsg(fmt.Sprintf("p%d", p), 0)
		if i%2 == 0 {
			m.Priority = p
		} else {
			m.Body.(*message.NodeExecution).Priority = p // the body's, as on a replay
		}
		msgs = append(msgs, m)
	}
	if err := b.Publish(ctxBG, msgs...).Wait(ctxBG); err != nil {
		t.Fatal(err)
	}
	ch := consume(t, b, broker.Execution, broker.ConsumeOptions{Concurrency: 1, Prefetch: 1}, ack)
	var got []string
	for range 5 {
		got = append(got, recv(t, ch, "execution message").ID)
	}
	if want := []string{"p10", "p7", "old", "p0", "p1"}; !slices.Equal(got, want) {
		t.Fatalf("delivered %v, want %v (priority order; the old file's row and 0 are the default 5, oldest first)", got, want)
	}
}

// oldSchema is broker_messages as files made before issue 35 have it.
const oldSchema = `
-- One row per message not yet acked, on every topic: a dead letter is a row
-- moved to topic workflow.dlq with origin (the topic it was consumed from)
-- and reason set. claimed marks a row in a consumer's hand; deliveries
-- counts how often it was handed out (more than 1: Redelivered).
CREATE TABLE IF NOT EXISTS broker_messages (
	id           INTEGER PRIMARY KEY,
	topic        TEXT    NOT NULL,
	available_at INTEGER NOT NULL, -- unix ns: not delivered before
	claimed      INTEGER NOT NULL DEFAULT 0,
	deliveries   INTEGER NOT NULL DEFAULT 0,
	published_at INTEGER NOT NULL, -- unix ns
	msg_id       TEXT    NOT NULL,
	key          TEXT    NOT NULL,
	lane         TEXT    NOT NULL,
	trace        TEXT    NOT NULL,
	first        INTEGER NOT NULL,
	raw          INTEGER NOT NULL, -- published by PublishRaw: ID and Key come from the body
	origin       TEXT    NOT NULL DEFAULT '',
	reason       TEXT    NOT NULL DEFAULT '',
	body         BLOB    NOT NULL
);
-- The claim query's: rows ready to hand out, by topic, earliest due first,
-- then in insert order (the rowid ends every index entry). Claimed rows
-- leave the index.
CREATE INDEX IF NOT EXISTS broker_messages_ready ON broker_messages (topic, available_at) WHERE claimed = 0;
-- Dead letters are listed and replayed by message id.
CREATE INDEX IF NOT EXISTS broker_messages_dead ON broker_messages (msg_id) WHERE topic = 'workflow.dlq';

`
