package amqp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/broker/brokertest"
	"github.com/rune-org/rune/internal/testinfra"
	"github.com/rune-org/rune/message"
)

// testLogger logs warnings to stderr under -v and nothing otherwise.
func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return slog.New(slog.DiscardHandler)
}

// testConfig is a Config with a prefix of its own for t.
func testConfig(t testing.TB) Config {
	return Config{
		URL:          testinfra.AMQPURL(t),
		Prefix:       testinfra.Name(t) + ".",
		Logger:       testLogger(),
		ReconnectMin: 50 * time.Millisecond,
		ReconnectMax: time.Second,
	}
}

// open starts a broker on cfg; it is closed and its queues and exchanges
// deleted when t ends.
func open(t testing.TB, cfg Config) *Broker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := New(ctx, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		_ = b.Close()
		purge(t, b)
	})
	return b
}

// purge deletes b's queues and exchanges (b may be closed).
func purge(t testing.TB, b *Broker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.DeleteTopology(ctx); err != nil {
		t.Logf("purge: %v", err) // e.g. a restricted user may not delete every queue
	}
}

func TestConformance(t *testing.T) {
	brokertest.Run(t, func(t *testing.T) broker.Broker {
		return open(t, testConfig(t))
	})
}

// rawChannel is a plain channel on the test RabbitMQ, closed when t ends.
func rawChannel(t *testing.T) *amqp091.Channel {
	t.Helper()
	conn, err := amqp091.Dial(testinfra.AMQPURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

func newExecution(id, key string) *message.NodeExecution {
	return &message.NodeExecution{
		MessageID:          id,
		WorkflowID:         "wf",
		ExecutionID:        key,
		CurrentNode:        "n1",
		Attempt:            1,
		StartedAt:          time.Now().UTC().Truncate(time.Millisecond),
		WorkflowDefinition: json.RawMessage(`{"id":"wf","name":"W","nodes":[{"id":"n1","name":"N1","type":"log","trigger":true}],"edges":[]}`),
		AccumulatedContext: map[string]any{},
	}
}

func execMessage(id, key string) broker.Message {
	return broker.Message{Topic: broker.Execution, ID: id, Key: key, Body: newExecution(id, key)}
}

func mustPublish(t *testing.T, b broker.Broker, msgs ...broker.Message) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Publish(ctx, msgs...).Wait(ctx); err != nil {
		t.Fatalf("Publish: %v", err)
	}
}

// consumeAll consumes topic in the background until t ends, passing on
// every delivery.
func consumeAll(t *testing.T, b broker.Broker, topic broker.Topic, opts broker.ConsumeOptions) <-chan *broker.Delivery {
	t.Helper()
	out := make(chan *broker.Delivery, 10000)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- b.Consume(ctx, topic, opts, func(ctx context.Context, d *broker.Delivery) error {
			out <- d
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Consume %s: %v", topic, err)
		}
	})
	return out
}

func next(t *testing.T, ch <-chan *broker.Delivery, what string) *broker.Delivery {
	t.Helper()
	select {
	case d := <-ch:
		return d
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: nothing delivered", what)
		return nil
	}
}

// The queues have the properties of RFC 001 §8 (and classic queue version
// 2): redeclaring them with exactly those arguments succeeds, and with others
// fails.
func TestTopology(t *testing.T) {
	cfg := testConfig(t)
	b := open(t, cfg)
	n := b.n
	ch := rawChannel(t)
	want := []struct {
		queue   string
		durable bool
		args    amqp091.Table
	}{
		{n.execution, true, amqp091.Table{"x-message-ttl": int64(24 * 3600 * 1000), "x-max-priority": int32(10), "x-dead-letter-exchange": n.dlx}},
		{n.status, false, amqp091.Table{"x-message-ttl": int64(3600 * 1000), "x-max-priority": int32(10)}},
		{n.completion, true, amqp091.Table{"x-message-ttl": int64(7 * 24 * 3600 * 1000), "x-max-priority": int32(10)}},
		{n.timeoutProcess, true, nil},
		{n.dlq, true, nil},
		{n.receipts, false, amqp091.Table{"x-message-ttl": int64(30 * 1000), "x-max-length": int32(10000)}},
	}
	for _, w := range want {
		if _, err := ch.QueueDeclare(w.queue, w.durable, false, false, false, versioned(w.args)); err != nil {
			t.Fatalf("queue %s does not have durable=%v args=%v: %v", w.queue, w.durable, w.args, err)
		}
	}
	for _, x := range []struct{ name, kind string }{
		{n.execX, "direct"}, {n.eventsX, "topic"}, {n.timeoutX, "direct"}, {n.dlx, "fanout"},
	} {
		if err := ch.ExchangeDeclare(x.name, x.kind, true, false, false, false, nil); err != nil {
			t.Fatalf("exchange %s is not a durable %s exchange: %v", x.name, x.kind, err)
		}
	}
	// The check is not vacuous: other arguments are refused.
	_, err := ch.QueueDeclare(n.execution, true, false, false, false, amqp091.Table{"x-message-ttl": int64(1000)})
	var aerr *amqp091.Error
	if !errors.As(err, &aerr) || aerr.Code != amqp091.PreconditionFailed {
		t.Fatalf("redeclaring %s with another TTL: %v, want PRECONDITION_FAILED", n.execution, err)
	}

	// Declaring again (a second process, a reconnect) is idempotent.
	open(t, Config{URL: cfg.URL, Prefix: cfg.Prefix, Logger: cfg.Logger})
}

// Queues declared by an earlier Rune as classic queue version 1 keep
// working: the broker declares them as they are, says how to move them, and
// messages flow.
func TestQueueVersionOneKept(t *testing.T) {
	cfg := testConfig(t)
	n := newNames(cfg.Prefix)
	ch := rawChannel(t)
	if _, err := ch.QueueDeclare(n.execution, true, false, false, false, executionArgs(n)); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	b := open(t, cfg)
	if !strings.Contains(logs.String(), "queue="+n.execution) || !strings.Contains(logs.String(), "Queue version") {
		t.Errorf("no warning about version 1 queue %s; logs:\n%s", n.execution, logs.String())
	}
	// Still version 1: redeclaring without a version succeeds.
	if _, err := ch.QueueDeclare(n.execution, true, false, false, false, executionArgs(n)); err != nil {
		t.Fatalf("queue %s changed: %v", n.execution, err)
	}
	// The other queues are version 2.
	if _, err := ch.QueueDeclare(n.dlq, true, false, false, false, versioned(nil)); err != nil {
		t.Fatalf("queue %s is not version 2: %v", n.dlq, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan *broker.Delivery, 1)
	go func() {
		_ = b.Consume(ctx, broker.Execution, broker.ConsumeOptions{}, func(_ context.Context, d *broker.Delivery) error {
			got <- d
			return nil
		})
	}()
	m := newExecution("v1-kept", "exec-v1")
	if err := b.Publish(ctx, broker.Message{Topic: broker.Execution, ID: m.MessageID, Key: m.ExecutionID, Body: m}).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if d := next(t, got, "message on a version 1 queue"); d.ID != m.MessageID {
		t.Fatalf("delivered %q, want %q", d.ID, m.MessageID)
	}
}

func TestRoundDelay(t *testing.T) {
	for _, c := range []struct{ in, want time.Duration }{
		{time.Nanosecond, time.Millisecond},
		{999 * time.Millisecond, 999 * time.Millisecond},
		{5 * time.Second, 5 * time.Second},
		{5123 * time.Millisecond, 5130 * time.Millisecond},
		{125 * time.Second, 125 * time.Second},
		{125*time.Second + time.Microsecond, 126 * time.Second},
	} {
		got, err := roundDelay(c.in)
		if err != nil || got != c.want {
			t.Errorf("roundDelay(%v) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	if _, err := roundDelay(60 * 24 * time.Hour); err == nil {
		t.Errorf("roundDelay(60 days) succeeded, want an error (RabbitMQ's TTL limit)")
	}
}

// Each distinct delay gets its own TTL'd queue dead-lettering back to
// workflow.execution, so delays never wait behind longer ones, and each
// message arrives no earlier than its delay.
func TestRetryQueues(t *testing.T) {
	b := open(t, testConfig(t))
	got := consumeAll(t, b, broker.Execution, broker.ConsumeOptions{Concurrency: 2})
	key := "exec-retry"
	delays := []time.Duration{2500 * time.Millisecond, 1500 * time.Millisecond, 300 * time.Millisecond, 800 * time.Millisecond, 300 * time.Millisecond}
	start := time.Now()
	var msgs []broker.Message
	for i, d := range delays {
		m := execMessage(fmt.Sprintf("m%d-%v", i, d), key)
		m.Delay = d
		msgs = append(msgs, m)
	}
	mustPublish(t, b, msgs...) // longest first, in one call
	want := map[string]time.Duration{}
	for _, m := range msgs {
		want[m.ID] = m.Delay
	}
	var last time.Duration
	for range msgs {
		d := next(t, got, "delayed execution")
		el := time.Since(start)
		delay := want[d.ID]
		if el < delay {
			t.Errorf("message %s with delay %v arrived after %v", d.ID, delay, el)
		}
		if el > delay+time.Second {
			t.Errorf("message %s with delay %v arrived only after %v: held back", d.ID, delay, el)
		}
		if delay < last {
			t.Errorf("message %s with delay %v arrived after one with delay %v", d.ID, delay, last)
		}
		last = delay
	}
	// The delay queues exist with their arguments.
	ch := rawChannel(t)
	for _, d := range []time.Duration{300 * time.Millisecond, 2500 * time.Millisecond} {
		dq := &delayQueue{name: b.n.execution + ".retry." + strconv.FormatInt(d.Milliseconds(), 10), exchange: b.n.execX, ttl: d, dlk: b.n.execution}
		if _, err := ch.QueueDeclare(dq.name, true, false, false, false, versioned(dq.args())); err != nil {
			t.Fatalf("delay queue %s: %v", dq.name, err)
		}
		if ttl := dq.args()["x-message-ttl"]; ttl != d.Milliseconds() {
			t.Errorf("delay queue %s TTL %v, want %d", dq.name, ttl, d.Milliseconds())
		}
	}
}

// A rejected message reaches workflow.dlq with its reason and topic in
// headers, its id, key and body unchanged.
func TestDeadLetterHeaders(t *testing.T) {
	b := open(t, testConfig(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- b.Consume(ctx, broker.Execution, broker.ConsumeOptions{}, func(ctx context.Context, d *broker.Delivery) error {
			return fmt.Errorf("node %q does not exist: %w", "ghost", broker.ErrReject)
		})
	}()
	defer func() { cancel(); <-done }()
	m := execMessage("bad-1", "exec-dlq")
	mustPublish(t, b, m)

	ch := rawChannel(t)
	var d amqp091.Delivery
	for deadline := time.Now().Add(10 * time.Second); ; {
		var ok bool
		var err error
		if d, ok, err = ch.Get(b.n.dlq, true); err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("nothing in the dead-letter queue")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r, _ := d.Headers[headerReason].(string); !strings.Contains(r, `node "ghost" does not exist`) {
		t.Errorf("%s header = %q, want the handler's error", headerReason, r)
	}
	if tp, _ := d.Headers[headerTopic].(string); tp != string(broker.Execution) {
		t.Errorf("%s header = %q, want %q", headerTopic, tp, broker.Execution)
	}
	if d.MessageId != m.ID || d.CorrelationId != m.Key || d.DeliveryMode != amqp091.Persistent {
		t.Errorf("dead letter id=%q key=%q mode=%d, want %q %q persistent", d.MessageId, d.CorrelationId, d.DeliveryMode, m.ID, m.Key)
	}
	want, _ := broker.Encode(m)
	if string(d.Body) != string(want) {
		t.Errorf("dead letter body changed:\n got %s\nwant %s", d.Body, want)
	}
}

// Messages RabbitMQ dead-letters by itself (expired in workflow.execution)
// carry only x-death; Consume(DeadLetter) derives topic and reason from it.
func TestDeadLetterFromXDeath(t *testing.T) {
	b := open(t, testConfig(t))
	m := execMessage("expired-1", "exec-x")
	body, _ := broker.Encode(m)
	ch := rawChannel(t)
	if err := ch.PublishWithContext(context.Background(), b.n.dlx, "", false, false, amqp091.Publishing{
		MessageId: m.ID, CorrelationId: m.Key, Body: body,
		Headers: amqp091.Table{"x-death": []any{amqp091.Table{"queue": b.n.execution, "reason": "expired", "count": int64(1)}}},
	}); err != nil {
		t.Fatal(err)
	}
	d := next(t, consumeAll(t, b, broker.DeadLetter, broker.ConsumeOptions{}), "dead letter")
	if d.Topic != broker.Execution || d.ID != m.ID || d.Key != m.Key || d.Raw != nil {
		t.Errorf("dead letter topic=%s id=%q key=%q raw=%q, want %s %q %q and a body", d.Topic, d.ID, d.Key, d.Raw, broker.Execution, m.ID, m.Key)
	}
	if !strings.Contains(d.Reason, "expired") || !strings.Contains(d.Reason, b.n.execution) {
		t.Errorf("dead letter reason %q, want it to say expired in %s", d.Reason, b.n.execution)
	}
}

// A master publishing before anyone declared workflow.execution gets an
// error, not a silent loss.
func TestUnroutableIsAnError(t *testing.T) {
	cfg := testConfig(t)
	cfg.Role = RoleMaster
	b := open(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := b.Publish(ctx, execMessage("m1", "exec-1")).Wait(ctx)
	if err == nil || !strings.Contains(err.Error(), "returned") {
		t.Fatalf("Publish with no queue bound: %v, want a returned-message error", err)
	}
	// The channel is still good.
	st := broker.Message{Topic: broker.Status, ID: "s1", Key: "exec-1", Body: &message.NodeStatus{
		WorkflowID: "wf", ExecutionID: "exec-1", NodeID: "n1", Status: message.StatusRunning, ExecutedAt: time.Now()}}
	if err := b.Publish(ctx, st).Wait(ctx); err != nil {
		t.Fatalf("Publish after a return: %v", err)
	}
}

// streamThroughFault publishes n messages, pipelined (many batches waiting
// for confirms at once), retrying batches whose confirms were lost, while
// fault strikes twice mid-stream; every message must be consumed.
func streamThroughFault(t *testing.T, b *Broker, n int, fault func()) {
	t.Helper()
	got := consumeAll(t, b, broker.Execution, broker.ConsumeOptions{Concurrency: 4})
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	const batch, window = 10, 8
	var retried int
	var wg sync.WaitGroup
	wg.Go(func() {
		type inflight struct {
			msgs []broker.Message
			p    broker.Pending
		}
		var q []inflight
		settle := func(f inflight) bool {
			for err := f.p.Wait(ctx); err != nil; err = b.Publish(ctx, f.msgs...).Wait(ctx) {
				if ctx.Err() != nil {
					t.Errorf("publish: %v", err)
					return false
				}
				retried++
				time.Sleep(20 * time.Millisecond)
			}
			return true
		}
		for i := 0; i < n; i += batch {
			var msgs []broker.Message
			for j := i; j < min(i+batch, n); j++ {
				msgs = append(msgs, execMessage(fmt.Sprintf("m%d", j), fmt.Sprintf("exec-%d", j%7)))
			}
			q = append(q, inflight{msgs, b.Publish(ctx, msgs...)})
			if len(q) == window {
				if !settle(q[0]) {
					return
				}
				q = q[1:]
			}
		}
		for _, f := range q {
			if !settle(f) {
				return
			}
		}
	})
	seen := map[string]bool{}
	var faults sync.WaitGroup
	var one sync.Mutex // a fault at a time: the second finds the first's reconnections
	for len(seen) < n {
		select {
		case d := <-got:
			seen[d.ID] = true
			if len(seen) == n/3 || len(seen) == 2*n/3 {
				faults.Go(func() {
					one.Lock()
					defer one.Unlock()
					fault()
				})
			}
		case <-ctx.Done():
			t.Fatalf("%d of %d messages consumed", len(seen), n)
		}
	}
	wg.Wait()
	faults.Wait()
	t.Logf("%d messages consumed through two faults; %d batches published again", n, retried)
}

// Cutting the connections mid-stream (as a network failure would) loses
// nothing: the broker reconnects, re-declares and resumes.
func TestReconnectAfterDrop(t *testing.T) {
	b := open(t, testConfig(t))
	streamThroughFault(t, b, 3000, b.dropConnections)
}

// RabbitMQ closing the connections (rabbitmqctl close_connection, as
// `rabbitmqctl close_all_connections` does to everyone) loses nothing.
func TestReconnectAfterServerClose(t *testing.T) {
	testinfra.RequireCommand(t, "rabbitmqctl")
	b := open(t, testConfig(t))
	streamThroughFault(t, b, 3000, func() {
		// Only this broker's connections: other tests share the server.
		// Both must be up (after an earlier fault they reconnect), and
		// listed by RabbitMQ, before they are closed.
		deadline := time.Now().Add(20 * time.Second)
		for {
			ports := map[string]bool{strconv.Itoa(b.pub.localPort()): true, strconv.Itoa(b.sub.localPort()): true}
			out, err := exec.Command("rabbitmqctl", "-q", "list_connections", "--no-table-headers", "pid", "peer_port").CombinedOutput()
			if err != nil {
				t.Errorf("rabbitmqctl list_connections: %v\n%s", err, out)
				return
			}
			var pids []string
			for line := range strings.Lines(string(out)) {
				if f := strings.Fields(line); len(f) == 2 && ports[f[1]] && f[1] != "0" {
					pids = append(pids, f[0])
				}
			}
			if len(pids) == 2 {
				for _, pid := range pids {
					if out, err := exec.Command("rabbitmqctl", "-q", "close_connection", pid, "test: closed by RabbitMQ").CombinedOutput(); err != nil {
						t.Errorf("rabbitmqctl close_connection: %v\n%s", err, out)
					}
				}
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("after 20s, %d of the broker's 2 connections (ports %v) listed by RabbitMQ:\n%s", len(pids), ports, out)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}

// Queues and exchanges deleted behind the broker's back are declared again:
// consumers resume and publishes succeed after a few failures.
func TestTopologyDeletedRecovers(t *testing.T) {
	b := open(t, testConfig(t))
	got := consumeAll(t, b, broker.Execution, broker.ConsumeOptions{})
	mustPublish(t, b, execMessage("before", "exec-1"))
	if d := next(t, got, "before"); d.ID != "before" {
		t.Fatalf("got %q", d.ID)
	}
	ch := rawChannel(t)
	if _, err := ch.QueueDelete(b.n.execution, false, false, false); err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDelete(b.n.execX, false, false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	failures := 0
	for {
		err := b.Publish(ctx, execMessage("after", "exec-1")).Wait(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("publishing never recovered: %v", err)
		}
		failures++
		time.Sleep(50 * time.Millisecond)
	}
	if d := next(t, got, "after"); d.ID != "after" {
		t.Fatalf("got %q", d.ID)
	}
	t.Logf("recovered after %d failed publishes", failures)
}

// A follower keeps following across a lost connection.
func TestFollowAcrossReconnect(t *testing.T) {
	b := open(t, testConfig(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	key := "exec-follow"
	fch, err := b.Follow(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	st := func(i int) broker.Message {
		return broker.Message{Topic: broker.Status, ID: fmt.Sprintf("s%d", i), Key: key, Body: &message.NodeStatus{
			WorkflowID: "wf", ExecutionID: key, NodeID: fmt.Sprintf("n%d", i), Status: message.StatusSuccess, ExecutedAt: time.Now()}}
	}
	mustPublish(t, b, st(0))
	b.dropConnections()
	time.Sleep(100 * time.Millisecond) // the follower's queue outlives its connection
	mustPublish(t, b, st(1))
	for i := range 2 {
		select {
		case m := <-fch:
			if m.ID != fmt.Sprintf("s%d", i) {
				t.Fatalf("follower got %q, want s%d", m.ID, i)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("follower got %d of 2 messages", i)
		}
	}
}

// Permissions: PermissionsFor gives the worker what it needs and the master
// no way to consume workflow.execution (RFC 001 §10.3).
func TestPermissions(t *testing.T) {
	testinfra.RequireCommand(t, "rabbitmqctl")
	base := testinfra.AMQPURL(t)
	if !strings.Contains(base, "guest:guest") {
		t.Skip("the test RabbitMQ URL has no guest:guest to replace")
	}
	name := testinfra.Name(t)
	vhost := "rune-" + name
	ctl := func(args ...string) error {
		if out, err := exec.Command("rabbitmqctl", append([]string{"-q"}, args...)...).CombinedOutput(); err != nil {
			return fmt.Errorf("rabbitmqctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	// Each rabbitmqctl takes the better part of a second: run them side by side.
	parallel := func(cmds ...[]string) {
		t.Helper()
		errs := make([]error, len(cmds))
		var wg sync.WaitGroup
		for i, c := range cmds {
			wg.Go(func() { errs[i] = ctl(c...) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
	}
	user := func(role string) string { return name + "-" + role }
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, c := range [][]string{{"delete_vhost", vhost}, {"delete_user", user(RoleWorker)}, {"delete_user", user(RoleMaster)}} {
			wg.Go(func() { _ = ctl(c...) })
		}
		wg.Wait()
	})
	parallel([]string{"add_vhost", vhost}, []string{"add_user", user(RoleWorker), "pw-" + name}, []string{"add_user", user(RoleMaster), "pw-" + name})
	var perms [][]string
	for _, role := range []string{RoleWorker, RoleMaster} {
		c, w, r := PermissionsFor(role, "") // production names
		perms = append(perms, []string{"set_permissions", "-p", vhost, user(role), c, w, r})
	}
	parallel(perms...)
	urlFor := func(role string) string {
		u := strings.Replace(base, "guest:guest", name+"-"+role+":pw-"+name, 1)
		return strings.TrimSuffix(u, "/") + "/" + vhost
	}
	// The master starts first: its execution publishes fail until a worker
	// has declared workflow.execution (they are never lost silently).
	master := open(t, Config{URL: urlFor(RoleMaster), Role: RoleMaster, Logger: testLogger()})
	worker := open(t, Config{URL: urlFor(RoleWorker), Role: RoleWorker, Logger: testLogger()})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The master cannot consume workflow.execution.
	err := master.Consume(ctx, broker.Execution, broker.ConsumeOptions{}, func(context.Context, *broker.Delivery) error { return nil })
	var aerr *amqp091.Error
	if !errors.As(err, &aerr) || aerr.Code != amqp091.AccessRefused {
		t.Fatalf("master Consume(Execution) = %v, want ACCESS_REFUSED", err)
	}
	// Nor declare it (why RoleMaster leaves it to the worker): RabbitMQ
	// wants read access to declare a queue with a dead-letter exchange.
	conn, err := amqp091.Dial(urlFor(RoleMaster))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	_, err = rch.QueueDeclare(master.n.execution, true, false, false, false, executionArgs(master.n))
	if !errors.As(err, &aerr) || aerr.Code != amqp091.AccessRefused {
		t.Fatalf("master declaring %s = %v, want ACCESS_REFUSED", master.n.execution, err)
	}
	// It can publish to it, and the worker consumes.
	mustPublish(t, master, execMessage("m1", "exec-1"))
	d := next(t, consumeAll(t, worker, broker.Execution, broker.ConsumeOptions{}), "execution at the worker")
	if d.ID != "m1" {
		t.Fatalf("worker got %q", d.ID)
	}
	// The worker's statuses reach the master, directly and by following.
	fch, err := master.Follow(ctx, "exec-1")
	if err != nil {
		t.Fatalf("master Follow: %v", err)
	}
	st := broker.Message{Topic: broker.Status, ID: "s1", Key: "exec-1", Body: &message.NodeStatus{
		WorkflowID: "wf", ExecutionID: "exec-1", NodeID: "n1", Status: message.StatusRunning, ExecutedAt: time.Now()}}
	retry := execMessage("m2", "exec-1")
	retry.Delay = 100 * time.Millisecond
	mustPublish(t, worker, st, retry)
	if d := next(t, consumeAll(t, master, broker.Status, broker.ConsumeOptions{}), "status at the master"); d.ID != "s1" {
		t.Fatalf("master got status %q", d.ID)
	}
	select {
	case m := <-fch:
		if m.ID != "s1" {
			t.Fatalf("master followed %q", m.ID)
		}
	case <-ctx.Done():
		t.Fatal("master's follower got nothing")
	}
	// The worker cannot read statuses.
	err = worker.Consume(ctx, broker.Status, broker.ConsumeOptions{}, func(context.Context, *broker.Delivery) error { return nil })
	if !errors.As(err, &aerr) || aerr.Code != amqp091.AccessRefused {
		t.Fatalf("worker Consume(Status) = %v, want ACCESS_REFUSED", err)
	}
}

// docs/operations.md gives the regexes PermissionsFor returns.
func TestPermissionsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, role := range []string{RoleWorker, RoleMaster, RoleScheduler} {
		c, w, r := PermissionsFor(role, "")
		for _, re := range []string{c, w, r} {
			if !strings.Contains(string(doc), "'"+re+"'") {
				t.Errorf("docs/operations.md lacks the %s regex '%s'", role, re)
			}
		}
	}
	if c, w, r := PermissionsFor("nobody", ""); c != "^$" || w != "^$" || r != "^$" {
		t.Errorf("unknown role gets %q %q %q, want nothing", c, w, r)
	}
}

// BenchmarkPublishConfirm publishes persistent execution messages through
// the broker, batch per Publish call, waiting for each call's confirms, from
// 8 goroutines per CPU (so confirms pipeline as a busy worker's do).
func BenchmarkPublishConfirm(b *testing.B) {
	for _, batch := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			br := open(b, testConfig(b))
			b.SetParallelism(8)
			ctx := context.Background()
			msgs := make([]broker.Message, batch)
			for i := range msgs {
				msgs[i] = execMessage(fmt.Sprintf("m%d", i), fmt.Sprintf("exec-%d", i))
			}
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := br.Publish(ctx, msgs...).Wait(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// TestConformanceScaled runs the suite with four execution queues and
// quorum queues.
func TestConformanceScaled(t *testing.T) {
	brokertest.Run(t, func(t *testing.T) broker.Broker {
		cfg := testConfig(t)
		cfg.ExecutionQueues, cfg.QueueType = 4, QueueQuorum
		return open(t, cfg)
	}, brokertest.WithoutPriorities()) // quorum queues: no priorities
}

// TestShardedExecutionQueues: with four execution queues, executions spread
// over all four by id (QueueDepths sees each), one execution's messages stay
// in one queue and in order, a retry comes back through its own queue's
// delay queue, and one Consume reads them all.
func TestShardedExecutionQueues(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.ExecutionQueues = 4
	cfg.MessageBatch = 1 // the depths count AMQP messages: one per message
	b := open(t, cfg)
	const execs, each = 40, 5
	var msgs []broker.Message
	for i := range execs {
		for j := range each {
			msgs = append(msgs, execMessage(fmt.Sprintf("m%02d-%d", i, j), fmt.Sprintf("exec-%02d", i)))
		}
	}
	mustPublish(t, b, msgs...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var depths map[string]int
	for {
		var err error
		if depths, err = b.QueueDepths(ctx); err != nil {
			t.Fatal(err)
		}
		sum := 0
		for _, q := range b.n.execQueues {
			sum += depths[strings.TrimPrefix(q, cfg.Prefix)]
		}
		if sum == execs*each {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("execution queues hold %d messages (%v), want %d", sum, depths, execs*each)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i, q := range b.n.execQueues {
		want := "workflow.execution"
		if i > 0 {
			want += ".shard." + strconv.Itoa(i)
		}
		if d := depths[strings.TrimPrefix(q, cfg.Prefix)]; d == 0 || strings.TrimPrefix(q, cfg.Prefix) != want {
			t.Fatalf("queue %s (want %s) holds %d messages, want some (depths %v)", q, want, d, depths)
		}
	}
	retry := execMessage("retried", "exec-07")
	retry.Delay = 300 * time.Millisecond
	mustPublish(t, b, retry)

	got := consumeAll(t, b, broker.Execution, broker.ConsumeOptions{Concurrency: 1})
	seen := map[string]int{}
	for range execs*each + 1 {
		d := next(t, got, "execution message")
		if d.ID == "retried" {
			continue
		}
		var i, j int
		if _, err := fmt.Sscanf(d.ID, "m%02d-%d", &i, &j); err != nil {
			t.Fatalf("unexpected message %q", d.ID)
		}
		if k := fmt.Sprintf("exec-%02d", i); seen[k] != j {
			t.Fatalf("message %s of %s arrived after %d of its execution's, want in order", d.ID, k, seen[k])
		}
		seen[fmt.Sprintf("exec-%02d", i)]++
	}
	want := b.n.executionQueue("exec-07") + ".retry.300"
	if _, err := rawChannel(t).QueueDeclarePassive(want, true, false, false, false, nil); err != nil {
		t.Fatalf("retry of exec-07 did not go through its queue's delay queue %s: %v", want, err)
	}
}

// TestQuorumTopology: with QueueType quorum the durable queues are quorum
// queues (declaring one as classic is refused) without x-max-priority, and
// the non-durable status queue stays classic.
func TestQuorumTopology(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.QueueType = QueueQuorum
	b := open(t, cfg)
	n := b.n
	ch := rawChannel(t)
	for _, q := range []struct {
		name string
		args amqp091.Table
	}{
		{n.execution, amqp091.Table{"x-message-ttl": int64(24 * 3600 * 1000), "x-dead-letter-exchange": n.dlx}},
		{n.completion, amqp091.Table{"x-message-ttl": int64(7 * 24 * 3600 * 1000)}},
		{n.timeoutProcess, nil},
		{n.dlq, nil},
	} {
		if _, err := ch.QueueDeclare(q.name, true, false, false, false, quorumArgs(q.args)); err != nil {
			t.Fatalf("queue %s is not a quorum queue with %v: %v", q.name, q.args, err)
		}
	}
	_, err := ch.QueueDeclare(n.dlq, true, false, false, false, versioned(nil))
	var aerr *amqp091.Error
	if !errors.As(err, &aerr) || aerr.Code != amqp091.PreconditionFailed {
		t.Fatalf("redeclaring %s as a classic queue: %v, want PRECONDITION_FAILED", n.dlq, err)
	}
	ch = rawChannel(t)
	if _, err := ch.QueueDeclare(n.status, false, false, false, false, versioned(amqp091.Table{"x-message-ttl": int64(3600 * 1000), "x-max-priority": int32(10)})); err != nil {
		t.Fatalf("status queue is not the classic one: %v", err)
	}
	if _, err := New(context.Background(), Config{URL: cfg.URL, QueueType: "stream"}); err == nil {
		t.Fatal("QueueType stream: no error")
	}
}

// Config.URL may list the nodes of a cluster (issue 30, item 8): a node
// that does not answer is passed over, on the first connection and on
// every reconnection (the node after the one lost is tried first, here the
// dead one), and nothing is lost. The passwords stay out of the errors.
func TestSeveralURLs(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "amqp://guest:s3cret@" + l.Addr().String() + "/"
	l.Close() // nothing listens there now: connections are refused
	cfg := testConfig(t)
	cfg.URL = dead + "," + cfg.URL
	b := open(t, cfg)
	streamThroughFault(t, b, 1000, b.dropConnections)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg.URL = dead + ", " + dead
	_, err = New(ctx, cfg)
	if err == nil || strings.Count(err.Error(), "connect to amqp://guest:xxxxx@") != 2 || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("New with no node up: %v; want both nodes' errors, without the password", err)
	}
	cfg.URL = dead + ",guest:x@127.0.0.1:5672"
	if _, err := New(ctx, cfg); err == nil || !strings.Contains(err.Error(), "URI 2 of 2 does not start with amqp://") {
		t.Fatalf("New with a malformed second URI: %v", err)
	}
}

// A nacked publish fails (the caller publishes again) and its channel is
// replaced: RabbitMQ 3.10 kept nacking every message on a channel opened
// while a quorum queue elected a new leader (issue 30, item 8;
// e2e.TestFaultRabbitClusterNodeLost). The nack here comes from a policy
// that makes the test's execution queue refuse a second message.
func TestNackReplacesPublishChannel(t *testing.T) {
	testinfra.RequireCommand(t, "rabbitmqctl")
	cfg := testConfig(t)
	b := open(t, cfg)
	policy := strings.TrimSuffix(cfg.Prefix, ".") + "-nack"
	ctl := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("rabbitmqctl", append([]string{"-q"}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("rabbitmqctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	ctl("set_policy", "--apply-to", "queues", policy, "^"+regexp.QuoteMeta(cfg.Prefix+"workflow.execution")+"$", `{"max-length":1,"overflow":"reject-publish"}`)
	t.Cleanup(func() { _ = exec.Command("rabbitmqctl", "-q", "clear_policy", policy).Run() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := b.pubs[0]
	channel := func() *amqp091.Channel {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.ch
	}
	var first *amqp091.Channel
	var err error
	// The policy applies within moments: publish until one is refused.
	for i := 0; err == nil; i++ {
		if i == 50 {
			t.Fatal("50 messages taken by a queue of at most 1")
		}
		first = channel()
		err = b.Publish(ctx, execMessage(fmt.Sprintf("n%d", i), "exec")).Wait(ctx)
	}
	if !strings.Contains(err.Error(), "nacked by RabbitMQ") {
		t.Fatalf("publish over the limit: %v, want a nack", err)
	}
	ctl("clear_policy", policy)
	mustPublish(t, b, execMessage("after", "exec"))
	if after := channel(); after == nil || after == first {
		t.Fatal("the publisher still uses the channel that was nacked")
	}
}

// A completion that workflow.completion refuses (a nack) while the receipts
// queue takes its copy is not taken for published: its receipt is voided,
// so a redelivered completer publishes it again rather than lose it
// (issue 30, item 8: a quorum workflow.completion electing a leader did
// this, and 4 of 300 executions never completed). Here a policy makes
// workflow.completion refuse a second message.
func TestNackedCompletionIsNotReceipted(t *testing.T) {
	testinfra.RequireCommand(t, "rabbitmqctl")
	cfg := testConfig(t)
	b := open(t, cfg)
	policy := strings.TrimSuffix(cfg.Prefix, ".") + "-full"
	out, err := exec.Command("rabbitmqctl", "-q", "set_policy", "--apply-to", "queues", policy,
		"^"+regexp.QuoteMeta(cfg.Prefix+"workflow.completion")+"$", `{"max-length":1,"overflow":"reject-publish"}`).CombinedOutput()
	if err != nil {
		t.Fatalf("rabbitmqctl set_policy: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("rabbitmqctl", "-q", "clear_policy", policy).Run() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var taken []string
	var refused string
	for i := 0; refused == "" && i < 50; i++ {
		exec := fmt.Sprintf("exec-%d", i)
		if err := b.Publish(ctx, completionMessage(exec)).Wait(ctx); err != nil {
			if !strings.Contains(err.Error(), "nacked by RabbitMQ") {
				t.Fatalf("publish %s: %v", exec, err)
			}
			refused = exec
		} else {
			taken = append(taken, exec)
		}
	}
	if refused == "" || len(taken) == 0 {
		t.Fatalf("taken %v, refused %q: want some taken, then one refused", taken, refused)
	}
	for _, exec := range taken {
		if ok, err := b.CompletionRouted(ctx, exec); err != nil || !ok {
			t.Fatalf("CompletionRouted(%s) = %v, %v for a completion RabbitMQ took", exec, ok, err)
		}
	}
	if ok, err := b.CompletionRouted(ctx, refused); err != nil || ok {
		t.Fatalf("CompletionRouted(%s) = %v, %v for the completion workflow.completion refused; want false", refused, ok, err)
	}
}

// On quorum queues a receipt proves nothing: workflow.completion may lose a
// completion (its Raft leader's node lost mid-publish, the confirm lost
// with it) that the receipts queue, on another node, kept. So a completion
// RabbitMQ took is not reported routed there, and its redelivered
// completer publishes it again rather than risk losing it (the cluster
// test lost 7 of 300 completions when it trusted the receipts). Here the
// loss is made by purging workflow.completion.
func TestQuorumCompletionIsNotTakenForRouted(t *testing.T) {
	cfg := testConfig(t)
	cfg.QueueType = QueueQuorum
	b := open(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mustPublish(t, b, completionMessage("exec-lost"))
	if _, err := rawChannel(t).QueuePurge(cfg.Prefix+"workflow.completion", false); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.CompletionRouted(ctx, "exec-lost"); err != nil || ok {
		t.Fatalf("CompletionRouted = %v, %v on quorum queues; want false (publish it again)", ok, err)
	}
}
