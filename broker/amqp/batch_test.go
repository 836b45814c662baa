package amqp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/broker/sign"
	"github.com/rune-org/rune/message"
)

// failOnce consumes topic with conc handlers until t ends and passes on
// "<id>/<redelivered>" of every delivery. The first delivery of failID
// fails with a transient error; rejectID is always rejected.
func failOnce(t *testing.T, b *Broker, topic broker.Topic, conc int, failID, rejectID string) <-chan string {
	t.Helper()
	got := make(chan string, 100)
	var failed atomic.Bool
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- b.Consume(ctx, topic, broker.ConsumeOptions{Concurrency: conc}, func(ctx context.Context, d *broker.Delivery) error {
			got <- fmt.Sprintf("%s/%v", d.ID, d.Redelivered)
			switch {
			case d.ID == failID && failed.CompareAndSwap(false, true):
				return errors.New("the store is away")
			case d.ID == rejectID:
				return fmt.Errorf("poison %s: %w", d.ID, broker.ErrReject)
			}
			return nil
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return got
}

// keyring is the keyring of a RUNE_SIGNING_KEY value.
func keyring(t *testing.T, spec string) *sign.Keyring {
	t.Helper()
	keys, err := sign.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// followed opens a signing broker and follows each of execs on it until t
// ends.
func followed(t *testing.T, execs ...string) (*Broker, map[string]<-chan broker.Message) {
	t.Helper()
	cfg := testConfig(t)
	cfg.Signing = keyring(t, "k1:0123456789abcdef0123456789abcdef")
	b := open(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	follows := map[string]<-chan broker.Message{}
	for _, key := range execs {
		f, err := b.Follow(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		follows[key] = f
	}
	return b, follows
}

func sampleItems() []batchItem {
	return []batchItem{
		{id: "m-1", key: "exec-1", trace: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", first: true, body: []byte(`{"a":1}`)},
		{id: "m-2", key: "exec-2", body: []byte(`{}`)},
		{}, // empty fields are kept as empty
	}
}

// A batch decodes to what was encoded, and every shorter prefix of it, or
// anything after it, is an error rather than a shorter batch.
func TestBatchCodec(t *testing.T) {
	items := sampleItems()
	buf := encodeBatch(items)
	got, err := decodeBatch(buf)
	if err != nil {
		t.Fatal(err)
	}
	if !equalItems(got, items) {
		t.Fatalf("decoded %+v, want %+v", got, items)
	}
	for n := range len(buf) {
		if _, err := decodeBatch(buf[:n]); !errors.Is(err, errBatch) {
			t.Errorf("prefix of %d of %d bytes: error %v, want errBatch", n, len(buf), err)
		}
	}
	if _, err := decodeBatch(append(slices.Clip(buf), 0)); !errors.Is(err, errBatch) {
		t.Errorf("a byte after the batch: error %v, want errBatch", err)
	}
}

func equalItems(a, b []batchItem) bool {
	return slices.EqualFunc(a, b, func(x, y batchItem) bool {
		return x.id == y.id && x.key == y.key && x.trace == y.trace && x.first == y.first && bytes.Equal(x.body, y.body)
	})
}

// FuzzBatch: no input makes decodeBatch panic, and what it decodes encodes
// to a batch that decodes the same.
func FuzzBatch(f *testing.F) {
	f.Add(encodeBatch(sampleItems()))
	f.Add(encodeBatch(sampleItems()[:1]))
	f.Add([]byte{batchVersion, 0})
	f.Fuzz(func(t *testing.T, buf []byte) {
		items, err := decodeBatch(buf)
		if err != nil {
			return
		}
		again, err := decodeBatch(encodeBatch(items))
		if err != nil || !equalItems(again, items) {
			t.Fatalf("re-encoded batch decodes to %+v, %v; want %+v", again, err, items)
		}
	})
}

// Execution messages published while a batch waits for its confirm go out
// in batches, and a signed consumer gets each one once, with its id, key,
// trace, first-copy flag and body, as if it had travelled alone.
func TestBatchesCarryEveryMessage(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Signing = keyring(t, "k1:0123456789abcdef0123456789abcdef")
	b := open(t, cfg)
	got := consumeAll(t, b, broker.Execution, broker.ConsumeOptions{Concurrency: 8})
	dead := consumeAll(t, b, broker.DeadLetter, broker.ConsumeOptions{})

	const publishers, each = 32, 10
	want := map[string]broker.Message{}
	var all [][]broker.Message
	for p := range publishers {
		var msgs []broker.Message
		for i := range each {
			m := execMessage(fmt.Sprintf("m-%02d-%d", p, i), fmt.Sprintf("exec-%02d", p))
			m.Trace = fmt.Sprintf("00-%032x-%016x-01", p+1, i+1)
			m.First = i%2 == 0
			msgs = append(msgs, m)
			want[m.ID] = m
		}
		all = append(all, msgs)
	}
	// One call with several messages is a batch for sure; the others
	// publish one message at a time, concurrently.
	mustPublish(t, b, all[0]...)
	var wg sync.WaitGroup
	for _, msgs := range all[1:] {
		wg.Go(func() {
			for _, m := range msgs {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				err := b.Publish(ctx, m).Wait(ctx)
				cancel()
				if err != nil {
					t.Errorf("Publish %s: %v", m.ID, err)
				}
			}
		})
	}
	wg.Wait()
	for len(want) > 0 {
		d := next(t, got, "execution")
		m, ok := want[d.ID]
		if !ok {
			t.Fatalf("unexpected or repeated delivery %s", d.ID)
		}
		delete(want, d.ID)
		ne, _ := d.Body.(*message.NodeExecution)
		if d.Key != m.Key || d.Trace != m.Trace || d.First != m.First || d.Redelivered || ne == nil || ne.MessageID != m.ID {
			t.Errorf("%s delivered as key %q trace %q first %v redelivered %v body %+v; want key %q trace %q first %v",
				d.ID, d.Key, d.Trace, d.First, d.Redelivered, ne, m.Key, m.Trace, m.First)
		}
	}
	if c := b.Published()[broker.Execution]; c.Messages != publishers*each || c.AMQP > c.Messages-(each-1) {
		t.Errorf("published %d execution messages in %d RabbitMQ messages, want %d in at most %d (the %d of one call in one)",
			c.Messages, c.AMQP, publishers*each, publishers*each-(each-1), each)
	}
	quiet := time.Now().Add(quietWindow)
	for _, d := range arrivals(got, quiet) {
		t.Errorf("unexpected delivery %s after all (redelivered %v)", d.ID, d.Redelivered)
	}
	for _, d := range arrivals(dead, quiet) {
		t.Errorf("dead letter %s: %s", d.ID, d.Reason)
	}
}

// A message of a batch whose handler fails is delivered again on its own,
// with Redelivered set; one rejected is dead-lettered on its own; the
// others of the batch are delivered once.
func TestBatchMessagesSettleAlone(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.RedeliveryPause = 10 * time.Millisecond
	b := open(t, cfg)
	var msgs []broker.Message
	for i := range 5 {
		msgs = append(msgs, execMessage(fmt.Sprintf("m-%d", i), "exec-1"))
	}
	mustPublish(t, b, msgs...) // one batch

	got := failOnce(t, b, broker.Execution, 2, "m-2", "m-3")
	want := map[string]int{"m-0/false": 1, "m-1/false": 1, "m-2/false": 1, "m-2/true": 1, "m-3/false": 1, "m-4/false": 1}
	count := map[string]int{}
	for range 6 {
		select {
		case s := <-got:
			count[s]++
		case <-time.After(30 * time.Second):
			t.Fatalf("deliveries %v, want %v", count, want)
		}
	}
	dls := waitDeadLetters(t, b, 1)
	if dls[0].ID != "m-3" || !strings.Contains(dls[0].Reason, "poison m-3") || dls[0].Topic != broker.Execution {
		t.Errorf("dead letter %s from %s: %q; want m-3 from %s with its reason", dls[0].ID, dls[0].Topic, dls[0].Reason, broker.Execution)
	}
	for _, s := range arrivals(got, time.Now().Add(quietWindow)) {
		count[s]++
	}
	if fmt.Sprint(count) != fmt.Sprint(want) {
		t.Errorf("deliveries %v, want %v", count, want)
	}
}

// A batch whose signature does not verify is dead-lettered whole; the
// dead-letter queue lists each of its messages, and replaying one leaves
// the others there, each on its own.
func TestBatchDeadLettersListedAndReplayedOneByOne(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Signing = keyring(t, "k1:0123456789abcdef0123456789abcdef")
	sender := open(t, cfg)
	cfg.Signing = keyring(t, "k2:fedcba9876543210fedcba9876543210")
	b := open(t, cfg)
	got := consumeAll(t, b, broker.Execution, broker.ConsumeOptions{})

	var msgs []broker.Message
	for i := range 3 {
		msgs = append(msgs, execMessage(fmt.Sprintf("m-%d", i), fmt.Sprintf("exec-%d", i)))
	}
	mustPublish(t, sender, msgs...)
	dls := waitDeadLetters(t, b, 3)
	for i, dl := range dls {
		want := fmt.Sprintf("m-%d", i)
		if dl.ID != want || dl.Key != fmt.Sprintf("exec-%d", i) || dl.Topic != broker.Execution || !strings.Contains(dl.Reason, "k1") {
			t.Errorf("dead letter %d: %s of %s from %s (%q); want %s from %s, refused for its key k1", i, dl.ID, dl.Key, dl.Topic, dl.Reason, want, broker.Execution)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done, err := b.Replay(ctx, []string{"m-1"}, nil)
	if err != nil || fmt.Sprint(done) != "[m-1]" {
		t.Fatalf("Replay m-1 = %v, %v", done, err)
	}
	if d := next(t, got, "replayed m-1"); d.ID != "m-1" {
		t.Errorf("replay delivered %s, want m-1", d.ID)
	}
	left := waitDeadLetters(t, b, 2)
	if left[0].ID != "m-0" || left[1].ID != "m-2" || !strings.Contains(left[0].Reason, "k1") {
		t.Errorf("left in the dead-letter queue: %+v, want m-0 and m-2 with their reason", left)
	}
}

// Closing a broker while a handler holds a message of a batch returns the
// messages not acked, on their own; the one acked is not delivered again.
func TestCloseReturnsTheRestOfABatch(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	b, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []broker.Message
	for i := range 4 {
		msgs = append(msgs, execMessage(fmt.Sprintf("m-%d", i), "exec-1"))
	}
	mustPublish(t, b, msgs...)
	acked, holding := make(chan string, 1), make(chan struct{})
	var once sync.Once
	done := make(chan error, 1)
	go func() {
		done <- b.Consume(context.Background(), broker.Execution, broker.ConsumeOptions{}, func(ctx context.Context, d *broker.Delivery) error {
			ack := false
			once.Do(func() { ack = true })
			if ack {
				acked <- d.ID
				return nil
			}
			close(holding)
			<-ctx.Done()
			return ctx.Err()
		})
	}()
	ackedID := <-acked
	select {
	case <-holding:
	case <-time.After(30 * time.Second):
		t.Fatal("no second message handled")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Errorf("Consume returned %v, want ErrClosed", err)
	}
	var unacked []string
	for _, m := range msgs {
		if m.ID != ackedID {
			unacked = append(unacked, m.ID)
		}
	}

	again := open(t, cfg)
	got := consumeAll(t, again, broker.Execution, broker.ConsumeOptions{})
	receiveEach(t, got, "the messages not acked ("+ackedID+" was)", unacked...)
	for _, d := range arrivals(got, time.Now().Add(quietWindow)) {
		t.Errorf("delivered %s again", d.ID)
	}
}

// Statuses of several executions published together go out as one batch,
// routed to every execution's key: the status queue's consumer gets each
// status once, and a follower of one execution gets its statuses only, in
// order, and its completion after them.
func TestStatusBatchReachesEachFollower(t *testing.T) {
	t.Parallel()
	execs := []string{"exec-a", "exec-b", "exec-c"}
	b, follows := followed(t, execs...)
	all := consumeAll(t, b, broker.Status, broker.ConsumeOptions{})
	st := func(key string, i int) broker.Message {
		return broker.Message{Topic: broker.Status, ID: fmt.Sprintf("%s-s%d", key, i), Key: key, Body: &message.NodeStatus{
			WorkflowID: "wf", ExecutionID: key, NodeID: fmt.Sprintf("n%d", i), Status: message.StatusSuccess, ExecutedAt: time.Now()}}
	}
	var msgs []broker.Message
	for i := range 3 {
		for _, key := range execs {
			msgs = append(msgs, st(key, i))
		}
	}
	mustPublish(t, b, msgs...)
	if c := b.Published()[broker.Status]; c.Messages != int64(len(msgs)) || c.AMQP != 1 {
		t.Errorf("published %d statuses in %d RabbitMQ messages, want all %d in one", c.Messages, c.AMQP, len(msgs))
	}
	mustPublish(t, b, st("exec-b", 3), broker.Message{Topic: broker.Completion, ID: "exec-b-done", Key: "exec-b", Body: &message.Completion{
		WorkflowID: "wf", ExecutionID: "exec-b", Status: message.CompletionCompleted, CompletedAt: time.Now()}})

	ids := []string{"exec-b-s3"}
	for _, m := range msgs {
		ids = append(ids, m.ID)
	}
	receiveEach(t, all, "status queue", ids...)
	for _, key := range execs {
		var got []string
		for len(got) < 3 || (key == "exec-b" && len(got) < 5) {
			select {
			case m := <-follows[key]:
				got = append(got, m.ID)
			case <-time.After(30 * time.Second):
				t.Fatalf("follower of %s got %v, then nothing", key, got)
			}
		}
		w := fmt.Sprintf("[%[1]s-s0 %[1]s-s1 %[1]s-s2]", key)
		if key == "exec-b" {
			w = "[exec-b-s0 exec-b-s1 exec-b-s2 exec-b-s3 exec-b-done]"
		}
		if fmt.Sprint(got) != w {
			t.Errorf("follower of %s got %v, want %v", key, got, w)
		}
	}
}

// A batch that does not decode is dead-lettered as it is, once: the
// dead-letter consumer gets its bytes and the reason, and does not send it
// round again.
func TestMalformedBatchDeadLetteredOnce(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	b := open(t, cfg)
	got := consumeAll(t, b, broker.Execution, broker.ConsumeOptions{})
	dead := consumeAll(t, b, broker.DeadLetter, broker.ConsumeOptions{})
	garbage := []byte{batchVersion, 3, 1, 'x'}
	ch := rawChannel(t)
	if err := ch.PublishWithContext(context.Background(), b.n.execX, b.n.executionQueue("exec-1"), true, false, amqp091.Publishing{
		ContentType: contentTypeBatch, DeliveryMode: amqp091.Persistent, Body: garbage}); err != nil {
		t.Fatal(err)
	}
	d := next(t, dead, "dead letter")
	if !bytes.Equal(d.Raw, garbage) || d.Topic != broker.Execution || !strings.Contains(d.Reason, "malformed batch") {
		t.Errorf("dead letter: topic %s raw %q reason %q; want %s, the bytes published and why", d.Topic, d.Raw, d.Reason, broker.Execution)
	}
	// Longer than the others: a malformed batch that went round the
	// dead-letter queue came back within it.
	quiet := time.Now().Add(500 * time.Millisecond)
	for _, d := range arrivals(dead, quiet) {
		t.Errorf("dead letter delivered again: %q", d.Reason)
	}
	for _, d := range arrivals(got, quiet) {
		t.Errorf("handler got %s", d.ID)
	}
}

// A status of a batch whose handler fails takes the whole batch back to its
// place in the queue: the statuses come again in their order, redelivered,
// and never to the execution's followers a second time.
func TestStatusBatchFailureReturnsTheBatch(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.RedeliveryPause = 10 * time.Millisecond
	b := open(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	follow, err := b.Follow(ctx, "exec-1")
	if err != nil {
		t.Fatal(err)
	}
	var msgs []broker.Message
	for i := range 3 {
		msgs = append(msgs, broker.Message{Topic: broker.Status, ID: fmt.Sprintf("s%d", i), Key: "exec-1", Body: &message.NodeStatus{
			WorkflowID: "wf", ExecutionID: "exec-1", NodeID: fmt.Sprintf("n%d", i), Status: message.StatusSuccess, ExecutedAt: time.Now()}})
	}
	got := failOnce(t, b, broker.Status, 1, "s1", "")
	mustPublish(t, b, msgs...) // one batch
	var seq []string
	for len(seq) < 6 {
		select {
		case s := <-got:
			seq = append(seq, s)
		case <-time.After(30 * time.Second):
			t.Fatalf("status consumer got %v, then nothing", seq)
		}
	}
	if w := "[s0/false s1/false s2/false s0/true s1/true s2/true]"; fmt.Sprint(seq) != w {
		t.Errorf("status consumer got %v, want %v", seq, w)
	}
	var followed []string
	for len(followed) < 3 {
		select {
		case m := <-follow:
			followed = append(followed, m.ID)
		case <-time.After(30 * time.Second):
			t.Fatalf("follower got %v, then nothing", followed)
		}
	}
	quiet := time.Now().Add(quietWindow)
	for _, m := range arrivals(follow, quiet) {
		t.Errorf("follower got %s again (after %v)", m.ID, followed)
	}
	for _, s := range arrivals(got, quiet) {
		t.Errorf("status consumer got %s again", s)
	}
}

// Completions of several executions published together go out as one
// batch: the completion queue's consumer gets each once, each execution's
// follower gets its own, and the receipts queue knows every one of them
// (CompletionRouted), as it knows a completion sent alone.
func TestCompletionBatchRoutedAndReceipted(t *testing.T) {
	t.Parallel()
	execs := []string{"exec-a", "exec-b", "exec-c"}
	b, follows := followed(t, execs...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var msgs []broker.Message
	for _, key := range execs {
		msgs = append(msgs, broker.Message{Topic: broker.Completion, ID: key + "-done", Key: key, Body: &message.Completion{
			WorkflowID: "wf", ExecutionID: key, Status: message.CompletionCompleted, CompletedAt: time.Now()}})
	}
	all := consumeAll(t, b, broker.Completion, broker.ConsumeOptions{})
	mustPublish(t, b, msgs...)
	if c := b.Published()[broker.Completion]; c.Messages != 3 || c.AMQP != 1 {
		t.Errorf("published %d completions in %d RabbitMQ messages, want 3 in one", c.Messages, c.AMQP)
	}
	for _, key := range execs {
		routed, err := b.CompletionRouted(ctx, key)
		if err != nil || !routed {
			t.Errorf("CompletionRouted(%s) = %v, %v; want true", key, routed, err)
		}
	}
	if routed, err := b.CompletionRouted(ctx, "exec-never"); err != nil || routed {
		t.Errorf("CompletionRouted(exec-never) = %v, %v; want false", routed, err)
	}
	receiveEach(t, all, "completion queue", "exec-a-done", "exec-b-done", "exec-c-done")
	for _, key := range execs {
		select {
		case m := <-follows[key]:
			if m.ID != key+"-done" || m.Topic != broker.Completion {
				t.Errorf("follower of %s got %s %s, want its completion", key, m.Topic, m.ID)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("follower of %s got nothing", key)
		}
	}
	for _, d := range arrivals(all, time.Now().Add(quietWindow)) {
		t.Errorf("completion queue: %s again", d.ID)
	}
}

// receiveEach receives from ch until each of ids has come once; another id,
// or one of them twice, fails t.
func receiveEach(t *testing.T, ch <-chan *broker.Delivery, what string, ids ...string) {
	t.Helper()
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	for len(want) > 0 {
		d := next(t, ch, what)
		if !want[d.ID] {
			t.Fatalf("%s: unexpected or repeated %s", what, d.ID)
		}
		delete(want, d.ID)
	}
}

// quietWindow is how long a test that has seen everything it expects waits
// to see that nothing more comes (a redelivery, a second dead letter):
// an absence has no event to wait on.
const quietWindow = 300 * time.Millisecond

// arrivals returns everything ch delivers until deadline, and what it
// holds then.
func arrivals[T any](ch <-chan T, deadline time.Time) []T {
	var got []T
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		select { // first what is there already, even past the deadline
		case v, ok := <-ch:
			if !ok {
				return got
			}
			got = append(got, v)
			continue
		default:
		}
		select {
		case v, ok := <-ch:
			if !ok {
				return got
			}
			got = append(got, v)
		case <-timer.C:
			return got
		}
	}
}
