package memory_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/broker/brokertest"
	"github.com/rune-org/rune/broker/memory"
	"github.com/rune-org/rune/message"
)

func TestConformance(t *testing.T) {
	brokertest.Run(t, func(t *testing.T) broker.Broker {
		return memory.New(memory.Options{Logger: discard()})
	})
}

var ctxBG = context.Background()

func newBroker(t *testing.T, opts memory.Options) *memory.Broker {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = discard()
	}
	b := memory.New(opts)
	t.Cleanup(func() { b.Close() })
	return b
}

func execMsg(id string, delay time.Duration) broker.Message {
	return broker.Message{Topic: broker.Execution, ID: id, Key: "exec-1", Delay: delay, Body: &message.NodeExecution{
		MessageID: id, WorkflowID: "wf", ExecutionID: "exec-1", CurrentNode: "n", Attempt: 1,
		WorkflowDefinition: json.RawMessage(`{}`), AccumulatedContext: map[string]any{},
	}}
}

func statusMsg(key string, i int) broker.Message {
	return broker.Message{Topic: broker.Status, ID: strconv.Itoa(i), Key: key, Body: &message.NodeStatus{
		WorkflowID: "wf", ExecutionID: key, NodeID: "n", Status: message.StatusRunning,
	}}
}

// consumeAll runs Consume in the background and returns its deliveries and
// a stop function returning Consume's error.
func consumeAll(t *testing.T, b *memory.Broker, topic broker.Topic) (<-chan *broker.Delivery, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctxBG)
	ch := make(chan *broker.Delivery, 1<<14)
	errc := make(chan error, 1)
	go func() {
		errc <- b.Consume(ctx, topic, broker.ConsumeOptions{}, func(ctx context.Context, d *broker.Delivery) error {
			ch <- d
			return nil
		})
	}()
	var once sync.Once
	var err error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-errc:
			case <-time.After(5 * time.Second):
				t.Error("Consume did not return")
			}
		})
		return err
	}
	t.Cleanup(func() { stop() })
	return ch, stop
}

func recv(t *testing.T, ch <-chan *broker.Delivery) *broker.Delivery {
	t.Helper()
	select {
	case d := <-ch:
		return d
	case <-time.After(5 * time.Second):
		t.Fatal("nothing delivered")
		return nil
	}
}

func TestBodiesArePointers(t *testing.T) {
	t.Parallel()
	b := newBroker(t, memory.Options{})
	ch, _ := consumeAll(t, b, broker.Execution)
	m := execMsg("m1", 0)
	if err := b.Publish(ctxBG, m).Wait(ctxBG); err != nil {
		t.Fatal(err)
	}
	if d := recv(t, ch); d.Body != m.Body {
		t.Errorf("delivered body %p, want the published pointer %p", d.Body, m.Body)
	}
}

func TestPublishIsAllOrNothing(t *testing.T) {
	t.Parallel()
	b := newBroker(t, memory.Options{})
	good := execMsg("good", 0)
	bad := broker.Message{Topic: broker.Status, ID: "bad", Body: good.Body}
	if err := b.Publish(ctxBG, good, bad).Wait(ctxBG); err == nil || !strings.Contains(err.Error(), `"bad"`) {
		t.Fatalf("Publish = %v, want an error naming message \"bad\"", err)
	}
	ch, _ := consumeAll(t, b, broker.Execution)
	select {
	case d := <-ch:
		t.Errorf("message %q of a failed publish was queued", d.ID)
	case <-time.After(100 * time.Millisecond):
	}
}

func TestRedeliveryPause(t *testing.T) {
	t.Parallel()
	const pause = 300 * time.Millisecond
	b := newBroker(t, memory.Options{RedeliveryPause: pause})
	times := make(chan time.Time, 2)
	ctx, cancel := context.WithCancel(ctxBG)
	defer cancel()
	go b.Consume(ctx, broker.Execution, broker.ConsumeOptions{}, func(ctx context.Context, d *broker.Delivery) error {
		times <- time.Now()
		if !d.Redelivered {
			return errors.New("fail once")
		}
		return nil
	})
	if err := b.Publish(ctxBG, execMsg("m", 0)).Wait(ctxBG); err != nil {
		t.Fatal(err)
	}
	first, second := <-times, <-times
	if gap := second.Sub(first); gap < pause {
		t.Errorf("redelivered %v after the failure, want at least the pause %v", gap, pause)
	}
}

// A dead letter its consumer rejects is dropped, not dead-lettered again in
// a loop. The dead-letter queue is FIFO with one handler: by the time the
// second sentinel (published once the first is in hand, so after any copy
// of m pushed back while m was handled) arrives, any such copy would have
// arrived before it. No sleep: the sentinels mark where to look.
func TestDeadLetterRejectedAgainIsDropped(t *testing.T) {
	t.Parallel()
	b := newBroker(t, memory.Options{})
	reject := func(ctx context.Context, d *broker.Delivery) error { return fmt.Errorf("no: %w", broker.ErrReject) }
	var mu sync.Mutex
	seen := map[string]int{}
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(ctxBG)
	defer cancel()
	go b.Consume(ctx, broker.Execution, broker.ConsumeOptions{}, reject)
	go b.Consume(ctx, broker.DeadLetter, broker.ConsumeOptions{}, func(ctx context.Context, d *broker.Delivery) error {
		mu.Lock()
		seen[d.ID]++
		n := seen[d.ID]
		mu.Unlock()
		next := map[string]string{"m": "sentinel-1", "sentinel-1": "sentinel-2"}[d.ID]
		switch {
		case n > 1:
		case next != "":
			if err := b.Publish(ctx, execMsg(next, 0)).Wait(ctx); err != nil {
				t.Errorf("publish %s: %v", next, err)
			}
		case d.ID == "sentinel-2":
			close(done)
		}
		return reject(ctx, d)
	})
	if err := b.Publish(ctxBG, execMsg("m", 0)).Wait(ctxBG); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the dead letters did not arrive within 30s")
	}
	mu.Lock()
	defer mu.Unlock()
	if seen["m"] != 1 || seen["sentinel-1"] != 1 {
		t.Errorf("dead letters delivered %v, want m and the first sentinel once each", seen)
	}
}

func TestPublishRawTakesIDAndKeyFromBody(t *testing.T) {
	t.Parallel()
	b := newBroker(t, memory.Options{})
	m := execMsg("m-raw", 0)
	raw, err := broker.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.PublishRaw(ctxBG, broker.Execution, raw); err != nil {
		t.Fatal(err)
	}
	ch, _ := consumeAll(t, b, broker.Execution)
	if d := recv(t, ch); d.ID != "m-raw" || d.Key != "exec-1" || d.Topic != broker.Execution {
		t.Errorf("raw delivery topic=%s id=%q key=%q, want %s m-raw exec-1", d.Topic, d.ID, d.Key, broker.Execution)
	}
	if err := b.PublishRaw(ctxBG, broker.DeadLetter, raw); err == nil {
		t.Error("PublishRaw to DeadLetter succeeded")
	}
}

// Many random delays: each message waits at least its own delay, and all arrive.
func TestManyDelays(t *testing.T) {
	t.Parallel()
	b := newBroker(t, memory.Options{})
	ch, _ := consumeAll(t, b, broker.Execution)
	const n = 2000
	due := map[string]time.Time{}
	var msgs []broker.Message
	start := time.Now()
	for i := range n {
		delay := time.Duration(rand.IntN(300)) * time.Millisecond
		m := execMsg(strconv.Itoa(i), delay)
		msgs = append(msgs, m)
		due[m.ID] = start.Add(delay)
	}
	if err := b.Publish(ctxBG, msgs...).Wait(ctxBG); err != nil {
		t.Fatal(err)
	}
	for range n {
		d := recv(t, ch)
		at := time.Now()
		want, ok := due[d.ID]
		if !ok {
			t.Fatalf("unexpected or repeated delivery %q", d.ID)
		}
		delete(due, d.ID)
		if at.Before(want) {
			t.Errorf("message %q delivered %v early", d.ID, want.Sub(at))
		}
	}
}

// A follower that stops reading never blocks publishers; it gets everything,
// in order, when it reads again.
func TestSlowFollowerDoesNotBlockPublishers(t *testing.T) {
	t.Parallel()
	b := newBroker(t, memory.Options{})
	ctx, cancel := context.WithCancel(ctxBG)
	defer cancel()
	fch, err := b.Follow(ctx, "exec-slow")
	if err != nil {
		t.Fatal(err)
	}
	const n = 20000
	published := make(chan struct{})
	go func() {
		defer close(published)
		for i := range n {
			if err := b.Publish(ctxBG, statusMsg("exec-slow", i)).Wait(ctxBG); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	select {
	case <-published:
	case <-time.After(5 * time.Second):
		t.Fatal("publishers blocked by a follower that does not read")
	}
	for i := range n {
		select {
		case m := <-fch:
			if m.ID != strconv.Itoa(i) {
				t.Fatalf("follower message %d has id %q", i, m.ID)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("follower got %d of %d messages", i, n)
		}
	}
}

func TestClose(t *testing.T) {
	t.Parallel()
	b := memory.New(memory.Options{Logger: discard()})
	started := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- b.Consume(ctxBG, broker.Execution, broker.ConsumeOptions{}, func(ctx context.Context, d *broker.Delivery) error {
			close(started)
			<-ctx.Done() // Close cancels handlers
			return ctx.Err()
		})
	}()
	fch, err := b.Follow(ctxBG, "exec-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Publish(ctxBG, execMsg("m", 0), execMsg("later", time.Hour)).Wait(ctxBG); err != nil {
		t.Fatal(err)
	}
	<-started
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, memory.ErrClosed) {
			t.Errorf("Consume after Close = %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Consume did not return after Close")
	}
	select {
	case _, ok := <-fch:
		if ok {
			t.Error("follower got a message after Close")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("follow channel not closed by Close")
	}
	if err := b.Publish(ctxBG, execMsg("m2", 0)).Wait(ctxBG); !errors.Is(err, memory.ErrClosed) {
		t.Errorf("Publish after Close = %v, want ErrClosed", err)
	}
	ack := func(context.Context, *broker.Delivery) error { return nil }
	if err := b.Consume(ctxBG, broker.Execution, broker.ConsumeOptions{}, ack); !errors.Is(err, memory.ErrClosed) {
		t.Errorf("Consume after Close = %v, want ErrClosed", err)
	}
	if _, err := b.Follow(ctxBG, "k"); !errors.Is(err, memory.ErrClosed) {
		t.Errorf("Follow after Close = %v, want ErrClosed", err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

func TestUnknownTopic(t *testing.T) {
	t.Parallel()
	b := newBroker(t, memory.Options{})
	ack := func(context.Context, *broker.Delivery) error { return nil }
	if err := b.Consume(ctxBG, "nope", broker.ConsumeOptions{}, ack); err == nil {
		t.Error("Consume of an unknown topic succeeded")
	}
	if err := b.Consume(ctxBG, broker.Execution, broker.ConsumeOptions{}, nil); err == nil {
		t.Error("Consume with a nil handler succeeded")
	}
}
