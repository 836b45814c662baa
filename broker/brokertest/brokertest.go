// Package brokertest is the conformance suite of broker.Broker: every
// implementation runs it unchanged, so the embedded and the distributed
// runtime keep the same promises.
//
//	func TestConformance(t *testing.T) {
//		brokertest.Run(t, func(t *testing.T) broker.Broker { return memory.New(memory.Options{}) })
//	}
package brokertest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/message"
)

// patience bounds every wait for something that must happen. Conditions are
// awaited, never slept for; a sleep only proves that something did not happen.
// A variable only so that the suite's own tests can fail faster.
var patience = 10 * time.Second

// Run runs the suite. Each subtest calls newBroker for a broker of its own,
// isolated from every other (same topics, separate queues: the RabbitMQ
// factory prefixes its queue names per test), and most run in parallel. Run
// closes each broker when its subtest ends, before the cleanups newBroker
// registered on t run, so a factory can delete its queues in a t.Cleanup.
func Run(t *testing.T, newBroker func(t *testing.T) broker.Broker, opts ...Option) {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	open := func(t *testing.T) broker.Broker {
		t.Helper()
		b := newBroker(t)
		t.Cleanup(func() {
			if err := b.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return b
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, open(t))
		})
	}
	if !cfg.noPriorities {
		t.Run("PriorityUnderBacklog", func(t *testing.T) {
			t.Parallel()
			testPriority(t, open(t))
		})
	}
}

// Option adjusts the suite to what a broker supports.
type Option func(*config)

type config struct {
	noPriorities bool
}

// WithoutPriorities leaves out the case of execution message priorities
// (broker.Message.Priority), for a broker configured without them (such
// as RabbitMQ's quorum queues before 3.13).
func WithoutPriorities() Option {
	return func(c *config) { c.noPriorities = true }
}

var cases = []struct {
	name string
	run  func(t *testing.T, b broker.Broker)
}{
	{"RoundTrip", testRoundTrip},
	{"IDAndKeyPreserved", testIDAndKey},
	{"PublishInvalid", testPublishInvalid},
	{"RedeliveryAfterError", testRedelivery},
	{"NoHotLoop", testNoHotLoop},
	{"ShutdownHandsMessageOn", testShutdownHandsOn},
	{"RejectDeadLetters", testReject},
	{"PublishRawUndecodable", testPublishRaw},
	{"Delay", testDelay},
	{"MixedDelays", testMixedDelays},
	{"TimeoutWithDelay", testTimeoutDelay},
	{"Follow", testFollow},
	{"Concurrency", testConcurrency},
	{"ManyMessages", testMany},
	{"ConsumeWaitsForHandlers", testConsumeWaits},
	{"UnconsumedSurvive", testUnconsumedSurvive},
}

// ---- helpers

func publish(t *testing.T, b broker.Broker, msgs ...broker.Message) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := b.Publish(ctx, msgs...).Wait(ctx); err != nil {
		t.Fatalf("Publish: %v", err)
	}
}

// consumer is a running Consume call.
type consumer struct {
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
	ok     bool
}

// consume starts Consume in the background; it is stopped when t ends.
func consume(t *testing.T, b broker.Broker, topic broker.Topic, opts broker.ConsumeOptions, h broker.Handler) *consumer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := &consumer{cancel: cancel, done: make(chan error, 1)}
	go func() { c.done <- b.Consume(ctx, topic, opts, h) }()
	t.Cleanup(func() { c.stop(t) })
	return c
}

// stop cancels the consumer and waits for Consume to return nil.
func (c *consumer) stop(t *testing.T) {
	t.Helper()
	c.once.Do(func() {
		c.cancel()
		select {
		case c.err = <-c.done:
			c.ok = true
		case <-time.After(patience):
		}
	})
	if !c.ok {
		t.Errorf("Consume did not return within %v of its ctx being cancelled", patience)
	} else if c.err != nil {
		t.Errorf("Consume returned %v after its ctx was cancelled, want nil", c.err)
	}
}

// collect consumes topic, acking every delivery and passing it on.
func collect(t *testing.T, b broker.Broker, topic broker.Topic, opts broker.ConsumeOptions) (<-chan *broker.Delivery, *consumer) {
	t.Helper()
	ch := make(chan *broker.Delivery, 4096)
	c := consume(t, b, topic, opts, func(ctx context.Context, d *broker.Delivery) error {
		select {
		case ch <- d:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	return ch, c
}

// recv waits for the next delivery.
func recv(t *testing.T, ch <-chan *broker.Delivery, what string) *broker.Delivery {
	t.Helper()
	select {
	case d := <-ch:
		return d
	case <-time.After(patience):
		t.Fatalf("%s: nothing delivered within %v", what, patience)
		return nil
	}
}

// expectNone fails t when ch delivers within d.
func expectNone(t *testing.T, ch <-chan *broker.Delivery, d time.Duration, what string) {
	t.Helper()
	select {
	case got := <-ch:
		t.Errorf("%s: unexpected delivery id=%q key=%q topic=%s redelivered=%v", what, got.ID, got.Key, got.Topic, got.Redelivered)
	case <-time.After(d):
	}
}

// waitFor waits for ch to close or be signalled.
func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(patience):
		t.Fatalf("timed out after %v waiting for %s", patience, what)
	}
}

func execMsg(id, key string) broker.Message {
	return broker.Message{Topic: broker.Execution, ID: id, Key: key, Body: execution(id, key)}
}

// ---- cases

// Every body type arrives with every field intact, with its ID and Key.
func testRoundTrip(t *testing.T, b broker.Broker) {
	key := uid("exec")
	msgs := []broker.Message{
		execMsg(uid("m"), key),
		{Topic: broker.Status, ID: uid("s"), Key: key, Body: retryingStatus(key)},
		{Topic: broker.Status, ID: uid("s"), Key: key, Body: waitingStatus(key)},
		{Topic: broker.Completion, ID: uid("c"), Key: key, Body: completion(key)},
		{Topic: broker.Timeout, ID: uid("t"), Key: key, Body: timeout(key)},
	}
	publish(t, b, msgs...)
	chans := map[broker.Topic]<-chan *broker.Delivery{}
	for _, topic := range []broker.Topic{broker.Execution, broker.Status, broker.Completion, broker.Timeout} {
		chans[topic], _ = collect(t, b, topic, broker.ConsumeOptions{})
	}
	got := map[string]*broker.Delivery{}
	for _, m := range msgs {
		d := recv(t, chans[m.Topic], string(m.Topic))
		got[d.ID] = d
	}
	for _, m := range msgs {
		what := fmt.Sprintf("%s message %q", m.Topic, m.ID)
		d := got[m.ID]
		if d == nil {
			t.Errorf("%s: not delivered (delivered ids: %v)", what, slices.Collect(maps.Keys(got)))
			continue
		}
		if d.Topic != m.Topic || d.Key != m.Key {
			t.Errorf("%s: delivered topic=%s key=%q, want %s %q", what, d.Topic, d.Key, m.Topic, m.Key)
		}
		if d.Redelivered {
			t.Errorf("%s: Redelivered on first delivery", what)
		}
		if d.Raw != nil || d.Reason != "" {
			t.Errorf("%s: Raw=%q Reason=%q on a good delivery", what, d.Raw, d.Reason)
		}
		checkBody(t, what, m.Body, d.Body)
	}
}

// Each delivery carries the ID and Key it was published with.
func testIDAndKey(t *testing.T, b broker.Broker) {
	const n = 20
	want := map[string]string{} // id → key
	var msgs []broker.Message
	for i := range n {
		key := uid("exec")
		id := uid("m")
		want[id] = key
		if i%2 == 0 {
			msgs = append(msgs, execMsg(id, key))
		} else {
			msgs = append(msgs, broker.Message{Topic: broker.Status, ID: id, Key: key, Body: status(key, "fetch", "running")})
		}
	}
	publish(t, b, msgs...)
	ex, _ := collect(t, b, broker.Execution, broker.ConsumeOptions{Concurrency: 2})
	st, _ := collect(t, b, broker.Status, broker.ConsumeOptions{Concurrency: 2})
	for range n {
		var d *broker.Delivery
		select {
		case d = <-ex:
		case d = <-st:
		case <-time.After(patience):
			t.Fatalf("only %d of %d messages delivered", n-len(want), n)
		}
		key, ok := want[d.ID]
		if !ok {
			t.Fatalf("delivery with unknown or repeated id %q", d.ID)
		}
		if d.Key != key {
			t.Errorf("message %q: key %q, want %q", d.ID, d.Key, key)
		}
		delete(want, d.ID)
	}
}

// A message whose body does not fit its topic, or a publish to DeadLetter, fails.
func testPublishInvalid(t *testing.T, b broker.Broker) {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	key := uid("exec")
	bad := []broker.Message{
		{Topic: broker.Execution, ID: "wrong-type", Key: key, Body: status(key, "n", "running")},
		{Topic: broker.Status, ID: "nil-body", Key: key},
		{Topic: broker.DeadLetter, ID: "dlq", Key: key, Body: execution("dlq", key)},
		{Topic: "no.such.topic", ID: "topic", Key: key, Body: execution("topic", key)},
	}
	for _, m := range bad {
		if err := b.Publish(ctx, m).Wait(ctx); err == nil {
			t.Errorf("Publish of message %q (topic %s, body %T) succeeded, want an error", m.ID, m.Topic, m.Body)
		}
	}
}

// A handler error redelivers the message with Redelivered set; once acked it is gone.
func testRedelivery(t *testing.T, b broker.Broker) {
	m := execMsg(uid("m"), uid("exec"))
	var (
		mu    sync.Mutex
		seen  []bool // Redelivered of each delivery
		acked = make(chan struct{})
	)
	consume(t, b, broker.Execution, broker.ConsumeOptions{}, func(ctx context.Context, d *broker.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, d.Redelivered)
		if d.ID != m.ID {
			t.Errorf("delivered id %q, want %q", d.ID, m.ID)
		}
		if len(seen) == 1 {
			return errors.New("transient failure")
		}
		if len(seen) == 2 {
			checkBody(t, "redelivered body", m.Body, d.Body)
			close(acked)
		}
		return nil
	})
	publish(t, b, m)
	waitFor(t, acked, "the redelivery")
	time.Sleep(300 * time.Millisecond) // an acked message must not come back
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(seen, []bool{false, true}) {
		t.Errorf("deliveries' Redelivered flags = %v, want [false true] (one failure, one ack)", seen)
	}
}

// A handler that always fails is not fed its message in a hot loop.
func testNoHotLoop(t *testing.T, b broker.Broker) {
	var n atomic.Int64
	c := consume(t, b, broker.Execution, broker.ConsumeOptions{}, func(ctx context.Context, d *broker.Delivery) error {
		n.Add(1)
		return errors.New("always failing")
	})
	publish(t, b, execMsg(uid("m"), uid("exec")))
	time.Sleep(500 * time.Millisecond)
	c.stop(t)
	if got := n.Load(); got > 50 {
		t.Errorf("a failing message was delivered %d times in 500ms; redelivery must pause", got)
	} else if got == 0 {
		t.Errorf("message never delivered")
	}
}

// A handler returning ctx.Err() on shutdown hands its message to another consumer.
func testShutdownHandsOn(t *testing.T, b broker.Broker) {
	m := execMsg(uid("m"), uid("exec"))
	got := make(chan struct{})
	first := consume(t, b, broker.Execution, broker.ConsumeOptions{}, func(ctx context.Context, d *broker.Delivery) error {
		close(got)
		<-ctx.Done()
		return ctx.Err()
	})
	publish(t, b, m)
	waitFor(t, got, "the first consumer's delivery")
	next, _ := collect(t, b, broker.Execution, broker.ConsumeOptions{})
	first.stop(t)
	d := recv(t, next, "delivery to the next consumer")
	if d.ID != m.ID || !d.Redelivered {
		t.Errorf("next consumer got id=%q redelivered=%v, want %q redelivered", d.ID, d.Redelivered, m.ID)
	}
	checkBody(t, "handed-on body", m.Body, d.Body)
}

// ErrReject dead-letters a message with its reason; the consumer goes on.
func testReject(t *testing.T, b broker.Broker) {
	key := uid("exec")
	bad, good := execMsg(uid("bad"), key), execMsg(uid("good"), key)
	var badSeen atomic.Int64
	processed := make(chan struct{})
	consume(t, b, broker.Execution, broker.ConsumeOptions{}, func(ctx context.Context, d *broker.Delivery) error {
		if d.ID == bad.ID {
			badSeen.Add(1)
			return fmt.Errorf("unknown node %q: %w", "nowhere", broker.ErrReject)
		}
		close(processed)
		return nil
	})
	dlq, _ := collect(t, b, broker.DeadLetter, broker.ConsumeOptions{})
	publish(t, b, bad)
	publish(t, b, good)
	waitFor(t, processed, "the message after the rejected one")
	d := recv(t, dlq, "dead letter")
	if d.ID != bad.ID || d.Key != bad.Key {
		t.Errorf("dead letter id=%q key=%q, want %q %q", d.ID, d.Key, bad.ID, bad.Key)
	}
	if d.Topic != broker.Execution {
		t.Errorf("dead letter Topic = %s, want the original topic %s", d.Topic, broker.Execution)
	}
	if !strings.Contains(d.Reason, `unknown node "nowhere"`) {
		t.Errorf("dead letter Reason = %q, want it to contain the handler's error", d.Reason)
	}
	checkBody(t, "dead letter body", bad.Body, d.Body)
	expectNone(t, dlq, 200*time.Millisecond, "second dead letter")
	if n := badSeen.Load(); n != 1 {
		t.Errorf("rejected message delivered %d times, want 1", n)
	}
}

// Bytes that do not decode are dead-lettered with Raw; the consumer goes on.
func testPublishRaw(t *testing.T, b broker.Broker) {
	rp, ok := b.(broker.RawPublisher)
	if !ok {
		t.Skip("broker does not implement broker.RawPublisher")
	}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	key := uid("exec")
	good := execution(uid("raw"), key)
	goodRaw, err := broker.Encode(broker.Message{Topic: broker.Execution, Body: good})
	if err != nil {
		t.Fatal(err)
	}
	garbage := [][]byte{
		[]byte(`{"message_id": "x", "attempt": `), // not JSON
		[]byte(`{"message_id": "no-fields"}`),     // JSON, invalid message
	}
	dlq, _ := collect(t, b, broker.DeadLetter, broker.ConsumeOptions{})
	for _, g := range garbage {
		if err := rp.PublishRaw(ctx, broker.Execution, g); err != nil {
			t.Fatalf("PublishRaw: %v", err)
		}
	}
	if err := rp.PublishRaw(ctx, broker.Execution, goodRaw); err != nil {
		t.Fatalf("PublishRaw: %v", err)
	}
	after := execMsg(uid("m"), key)
	publish(t, b, after)
	// Consumed only now, from a backlog: a raw message keeps its place in
	// it (a broker that orders by priority gives it the default one).
	ex, _ := collect(t, b, broker.Execution, broker.ConsumeOptions{})

	d := recv(t, ex, "raw message that decodes")
	checkBody(t, "raw message that decodes", good, d.Body)
	if d.Raw != nil {
		t.Errorf("decoded raw message also has Raw %q", d.Raw)
	}
	if d = recv(t, ex, "message after the garbage"); d.ID != after.ID {
		t.Errorf("delivered %q, want %q", d.ID, after.ID)
	}
	var dead [][]byte
	for range garbage {
		d := recv(t, dlq, "dead-lettered garbage")
		if d.Body != nil || d.Reason == "" || d.Topic != broker.Execution {
			t.Errorf("garbage dead letter: Body=%v Reason=%q Topic=%s, want nil body, a reason and topic %s", d.Body, d.Reason, d.Topic, broker.Execution)
		}
		dead = append(dead, d.Raw)
	}
	for _, g := range garbage {
		if !slices.ContainsFunc(dead, func(r []byte) bool { return string(r) == string(g) }) {
			t.Errorf("garbage %q not on the dead-letter topic with its raw bytes (got %q)", g, dead)
		}
	}
	expectNone(t, ex, 100*time.Millisecond, "garbage delivered to the consumer")
}

// A delayed message is not delivered before its delay, and does not hold back
// an undelayed one published after it.
func testDelay(t *testing.T, b broker.Broker) {
	const delay = 400 * time.Millisecond
	key := uid("exec")
	ch, _ := collect(t, b, broker.Execution, broker.ConsumeOptions{})
	late := execMsg(uid("late"), key)
	late.Delay = delay
	now := execMsg(uid("now"), key)
	start := time.Now()
	publish(t, b, late)
	publish(t, b, now)
	d := recv(t, ch, "undelayed message")
	if d.ID != now.ID {
		t.Fatalf("first delivery %q, want the undelayed %q", d.ID, now.ID)
	}
	d = recv(t, ch, "delayed message")
	if el := time.Since(start); el < delay {
		t.Errorf("delayed message delivered after %v, want at least %v", el, delay)
	}
	if d.ID != late.ID {
		t.Errorf("delivered %q, want %q", d.ID, late.ID)
	}
	checkBody(t, "delayed body", late.Body, d.Body)
}

// A long delay published first does not hold back a short one.
func testMixedDelays(t *testing.T, b broker.Broker) {
	const long, short = 3 * time.Second, 200 * time.Millisecond
	key := uid("exec")
	ch, _ := collect(t, b, broker.Execution, broker.ConsumeOptions{})
	lm, sm := execMsg(uid("long"), key), execMsg(uid("short"), key)
	lm.Delay, sm.Delay = long, short
	start := time.Now()
	publish(t, b, lm)
	publish(t, b, sm)
	d := recv(t, ch, "short-delay message")
	el := time.Since(start)
	if d.ID != sm.ID {
		t.Fatalf("first delivery %q after %v, want the short-delay %q", d.ID, el, sm.ID)
	}
	if el < short || el > long/2 {
		t.Errorf("short-delay message delivered after %v, want between %v and %v", el, short, long/2)
	}
	d = recv(t, ch, "long-delay message")
	if el := time.Since(start); el < long {
		t.Errorf("long-delay message delivered after %v, want at least %v", el, long)
	}
	if d.ID != lm.ID {
		t.Errorf("delivered %q, want %q", d.ID, lm.ID)
	}
}

// Timeout messages round-trip with their delay.
func testTimeoutDelay(t *testing.T, b broker.Broker) {
	const delay = 300 * time.Millisecond
	key := uid("exec")
	m := broker.Message{Topic: broker.Timeout, ID: uid("t"), Key: key, Body: timeout(key), Delay: delay}
	ch, _ := collect(t, b, broker.Timeout, broker.ConsumeOptions{})
	start := time.Now()
	publish(t, b, m)
	d := recv(t, ch, "timeout message")
	if el := time.Since(start); el < delay {
		t.Errorf("timeout delivered after %v, want at least %v", el, delay)
	}
	if d.ID != m.ID || d.Key != m.Key || d.Topic != broker.Timeout {
		t.Errorf("timeout delivered topic=%s id=%q key=%q, want %s %q %q", d.Topic, d.ID, d.Key, broker.Timeout, m.ID, m.Key)
	}
	checkBody(t, "timeout body", m.Body, d.Body)
}

// A follower gets the Status and Completion messages of its key published
// after Follow, in order, and nothing else; the queues still get them all.
func testFollow(t *testing.T, b broker.Broker) {
	a, other := uid("exec"), uid("exec")
	st := func(key, node string) broker.Message {
		return broker.Message{Topic: broker.Status, ID: uid("s"), Key: key, Body: status(key, node, "success")}
	}
	before := st(a, "early")
	publish(t, b, before)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fch, err := b.Follow(ctx, a)
	if err != nil {
		t.Fatalf("Follow: %v", err)
	}
	want := []broker.Message{
		st(a, "n1"),
		st(a, "n2"),
		{Topic: broker.Completion, ID: uid("c"), Key: a, Body: completion(a)},
	}
	others := []broker.Message{st(other, "x1"), {Topic: broker.Completion, ID: uid("c"), Key: other, Body: completion(other)}}
	publish(t, b, want[0], others[0])
	publish(t, b, execMsg(uid("m"), a)) // executions are never followed
	publish(t, b, want[1], others[1], want[2])

	next := func() (broker.Message, bool) {
		select {
		case m, ok := <-fch:
			return m, ok
		case <-time.After(patience):
			t.Fatalf("follower: nothing within %v", patience)
			return broker.Message{}, false
		}
	}
	for i, w := range want {
		m, ok := next()
		if !ok {
			t.Fatalf("follow channel closed after %d of %d messages", i, len(want))
		}
		if m.ID != w.ID || m.Key != a || m.Topic != w.Topic {
			t.Fatalf("follower message %d: topic=%s id=%q key=%q, want %s %q %q", i, m.Topic, m.ID, m.Key, w.Topic, w.ID, a)
		}
		checkBody(t, fmt.Sprintf("followed message %d", i), w.Body, m.Body)
	}
	select {
	case m := <-fch:
		t.Errorf("follower got unexpected topic=%s id=%q key=%q", m.Topic, m.ID, m.Key)
	case <-time.After(200 * time.Millisecond):
	}

	// Following consumes nothing: the status queue has every status.
	sch, _ := collect(t, b, broker.Status, broker.ConsumeOptions{})
	wantIDs := []string{before.ID, want[0].ID, want[1].ID, others[0].ID}
	var got []string
	for range wantIDs {
		got = append(got, recv(t, sch, "status").ID)
	}
	slices.Sort(got)
	slices.Sort(wantIDs)
	if !slices.Equal(got, wantIDs) {
		t.Errorf("status queue delivered %q, want %q", got, wantIDs)
	}

	cancel()
	deadline := time.After(patience)
	for {
		select {
		case _, ok := <-fch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatalf("follow channel not closed within %v of ctx being cancelled", patience)
		}
	}
}

// Concurrency N runs N handlers at once.
func testConcurrency(t *testing.T, b broker.Broker) {
	const n = 4
	var running atomic.Int64
	all := make(chan struct{})
	var once sync.Once
	consume(t, b, broker.Execution, broker.ConsumeOptions{Concurrency: n}, func(ctx context.Context, d *broker.Delivery) error {
		if running.Add(1) == n {
			once.Do(func() { close(all) })
		}
		select {
		case <-all:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	key := uid("exec")
	var msgs []broker.Message
	for range 2 * n {
		msgs = append(msgs, execMsg(uid("m"), key))
	}
	publish(t, b, msgs...)
	select {
	case <-all:
	case <-time.After(patience):
		t.Fatalf("with Concurrency %d only %d handlers ran at once", n, running.Load())
	}
}

// Thousands of messages published in batches arrive exactly once each
// (without failures), spread over two consumers.
func testMany(t *testing.T, b broker.Broker) {
	const n, batch = 2000, 100
	var (
		mu    sync.Mutex
		count = map[string]int{}
		done  = make(chan struct{})
	)
	h := func(ctx context.Context, d *broker.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		count[d.ID]++
		if len(count) == n && count[d.ID] == 1 {
			close(done)
		}
		return nil
	}
	consume(t, b, broker.Execution, broker.ConsumeOptions{Concurrency: 4}, h)
	consume(t, b, broker.Execution, broker.ConsumeOptions{Concurrency: 4}, h)

	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	var pending []broker.Pending
	ids := map[string]bool{}
	for i := 0; i < n; i += batch {
		var msgs []broker.Message
		for range batch {
			m := execMsg(uid("m"), uid("exec"))
			ids[m.ID] = true
			msgs = append(msgs, m)
		}
		pending = append(pending, b.Publish(ctx, msgs...))
	}
	for _, p := range pending {
		if err := p.Wait(ctx); err != nil {
			t.Fatalf("Publish: %v", err)
		}
	}
	select {
	case <-done:
	case <-time.After(patience):
		mu.Lock()
		got := len(count)
		mu.Unlock() // handlers must be able to return: a broker's Close may wait for them
		t.Fatalf("%d of %d messages delivered", got, n)
	}
	time.Sleep(200 * time.Millisecond) // duplicates would show up now
	mu.Lock()
	defer mu.Unlock()
	for id, c := range count {
		if !ids[id] {
			t.Errorf("unknown message %q delivered", id)
		} else if c != 1 {
			t.Errorf("message %q delivered %d times without any failure", id, c)
		}
	}
}

// Consume returns only after its running handlers have.
func testConsumeWaits(t *testing.T, b broker.Broker) {
	started, release := make(chan struct{}), make(chan struct{})
	var finished atomic.Bool
	c := consume(t, b, broker.Execution, broker.ConsumeOptions{}, func(ctx context.Context, d *broker.Delivery) error {
		close(started)
		<-release // ignores ctx on purpose
		finished.Store(true)
		return nil
	})
	publish(t, b, execMsg(uid("m"), uid("exec")))
	waitFor(t, started, "the handler to start")
	c.cancel()
	select {
	case err := <-c.done:
		t.Fatalf("Consume returned (%v) while its handler was running", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	c.stop(t)
	if !finished.Load() {
		t.Errorf("Consume returned before its handler finished")
	}
	// The handler acked: nothing to deliver again.
	ch, _ := collect(t, b, broker.Execution, broker.ConsumeOptions{})
	expectNone(t, ch, 300*time.Millisecond, "message acked before Consume stopped")
}

// Messages not acked when a consumer stops, and messages published while
// no one consumes, wait for the next consumer.
func testUnconsumedSurvive(t *testing.T, b broker.Broker) {
	key := uid("exec")
	want := map[string]bool{}
	var first []broker.Message
	for range 5 {
		m := execMsg(uid("m"), key)
		first = append(first, m)
		want[m.ID] = true
	}
	publish(t, b, first...)

	acked := make(chan string, 1)
	holding := make(chan struct{}, 1)
	var once sync.Once
	c := consume(t, b, broker.Execution, broker.ConsumeOptions{}, func(ctx context.Context, d *broker.Delivery) error {
		ack := false
		once.Do(func() { ack = true })
		if ack {
			acked <- d.ID
			return nil
		}
		select { // a message is in hand when the consumer stops
		case holding <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return ctx.Err()
	})
	var ackedID string
	select {
	case ackedID = <-acked:
	case <-time.After(patience):
		t.Fatal("first consumer got nothing")
	}
	select {
	case <-holding:
	case <-time.After(patience):
		t.Fatal("first consumer took no second message")
	}
	c.stop(t)
	delete(want, ackedID)

	for range 3 { // nobody is consuming now
		m := execMsg(uid("m"), key)
		want[m.ID] = true
		publish(t, b, m)
	}
	ch, _ := collect(t, b, broker.Execution, broker.ConsumeOptions{Concurrency: 2})
	for len(want) > 0 {
		d := recv(t, ch, fmt.Sprintf("%d remaining messages", len(want)))
		if d.ID == ackedID {
			t.Errorf("acked message %q delivered again", d.ID)
		}
		delete(want, d.ID)
	}
	expectNone(t, ch, 200*time.Millisecond, "message after all were delivered")
}

// Issue 35: with a backlog of execution messages, a consumer gets the
// highest priority first (broker.Message.Priority, or the body's), the
// default (0: 5) next, and each priority in publish order.
func testPriority(t *testing.T, b broker.Broker) {
	const low = 30
	var msgs []broker.Message
	for range low {
		m := execMsg(uid("low"), uid("exec"))
		m.Priority = 2
		m.Body.(*message.NodeExecution).Priority = 2
		msgs = append(msgs, m)
	}
	def := execMsg(uid("def"), uid("exec")) // no priority: the default, 5
	high := execMsg(uid("high"), uid("exec"))
	high.Priority = 9
	high.Body.(*message.NodeExecution).Priority = 9
	publish(t, b, msgs...)
	publish(t, b, def, high)
	ch, c := collect(t, b, broker.Execution, broker.ConsumeOptions{Concurrency: 1, Prefetch: 1})
	var got []string
	for range low + 2 {
		got = append(got, recv(t, ch, "an execution message of the backlog").ID)
	}
	c.stop(t)
	if got[0] != high.ID || got[1] != def.ID {
		t.Fatalf("delivered %v first; want %s (priority 9), then %s (default 5), then the priority-2 backlog", got[:3], high.ID, def.ID)
	}
	for i, m := range msgs {
		if got[2+i] != m.ID {
			t.Fatalf("priority-2 message %d delivered at %d (%s); want publish order within a priority", i, 2+i, got[2+i])
		}
	}
}
