package distributed_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/broker/amqp"
	"github.com/rune-org/rune/broker/sign"
	"github.com/rune-org/rune/client"
	"github.com/rune-org/rune/distributed"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/internal/testinfra"
	"github.com/rune-org/rune/message"
)

const waitThenFinish = `{"id": "forge_target", "nodes": [
 {"id": "start", "type": "trigger", "trigger": true},
 {"id": "pause", "type": "wait", "parameters": {"amount": 3, "unit": "seconds"}},
 {"id": "finish", "type": "set", "parameters": {"values": {"who": "{{ $trigger.who }}"}}}],
 "edges": [{"id": "e1", "src": "start", "dst": "pause"}, {"id": "e2", "src": "pause", "dst": "finish"}]}`

func mustKeys(t *testing.T, spec string) *sign.Keyring {
	t.Helper()
	k, err := sign.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Issue 12, finding 4: a hand-published message for a live execution, with a
// made-up field, another current_node and a forged $trigger, ran at once and
// completed the execution. With a signing key, forged, unsigned and
// wrongly signed messages are dead-lettered with a reason, change nothing,
// and the genuine execution completes normally.
func TestForgedMessagesAreRefused(t *testing.T) {
	t.Parallel()
	keys := mustKeys(t, "live:0123456789abcdef-genuine")
	r := newRuntimeWith(t, distributed.Config{Signing: keys})
	prefix := r.prefix + "."
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Attackers: RabbitMQ lets them publish, but they lack the key.
	attackers := map[string]*sign.Keyring{
		"unsigned":     nil,
		"wrong secret": mustKeys(t, "live:not-the-genuine-secret"),
		"unknown key":  mustKeys(t, "stolen:0123456789abcdef-genuine"),
	}
	dead := make(chan *broker.Delivery, 10)
	go func() {
		_ = r.rt.Broker.Consume(ctx, broker.DeadLetter, broker.ConsumeOptions{}, func(_ context.Context, d *broker.Delivery) error {
			dead <- d
			return nil
		})
	}()

	wf, err := r.rt.Engine.Compile([]byte(waitThenFinish))
	if err != nil {
		t.Fatal(err)
	}
	exec := engine.NewExecutionID(time.Now())
	events, err := r.rt.Broker.Follow(ctx, exec)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Start(ctx, r.rt.Broker, r.rt.Engine, wf, exec, map[string]any{"who": "genuine"}); err != nil {
		t.Fatal(err)
	}
	var statuses []*message.NodeStatus
	waiting := make(chan struct{})
	done := make(chan *message.Completion, 1)
	go func() {
		c, err := client.Wait(ctx, events, func(s *message.NodeStatus) {
			statuses = append(statuses, s)
			if s.NodeID == "pause" && s.Status == message.StatusWaiting {
				close(waiting)
			}
		})
		if err != nil {
			t.Errorf("wait: %v", err)
		}
		done <- c
	}()
	select {
	case <-waiting:
	case <-ctx.Done():
		t.Fatal("the execution never reached its wait")
	}

	// The forgery of the issue: straight to the last node, a forged
	// trigger, a made-up schema_version.
	forged := map[string]any{
		"schema_version": 7, "message_id": "forged-1", "workflow_id": "forge_target", "execution_id": exec,
		"current_node": "finish", "from_node": "pause", "attempt": 1, "execution_started_at": time.Now().UTC(),
		"workflow_definition": json.RawMessage(waitThenFinish),
		"accumulated_context": map[string]any{"$trigger": map[string]any{"who": "forger"}},
	}
	body, err := json.Marshal(forged)
	if err != nil {
		t.Fatal(err)
	}
	withoutField := map[string]any{}
	for k, v := range forged {
		if k != "schema_version" {
			withoutField[k] = v
		}
	}
	clean, _ := json.Marshal(withoutField)
	for name, k := range attackers {
		b, err := amqp.New(ctx, amqp.Config{URL: testinfra.AMQPURL(t), Prefix: prefix, Role: amqp.RoleAdmin,
			Logger: slog.New(slog.DiscardHandler), Signing: k, Name: "forger " + name})
		if err != nil {
			t.Fatal(err)
		}
		for _, data := range [][]byte{body, clean} {
			if err := b.PublishRaw(ctx, broker.Execution, data); err != nil {
				t.Fatalf("%s: publish: %v", name, err)
			}
		}
		// A forged completion would end the follower's wait early.
		fake := &message.Completion{WorkflowID: "forge_target", ExecutionID: exec, Status: message.CompletionHalted,
			FinalContext: map[string]any{"$trigger": map[string]any{"who": "forger"}}, CompletedAt: time.Now().UTC()}
		if err := b.Publish(ctx, broker.Message{Topic: broker.Completion, ID: exec, Key: exec, Body: fake}).Wait(ctx); err != nil {
			t.Fatalf("%s: publish a completion: %v", name, err)
		}
		b.Close()
	}
	// Signed with the genuine key, the made-up field still does not pass.
	if err := r.rt.Broker.PublishRaw(ctx, broker.Execution, body); err != nil {
		t.Fatal(err)
	}

	reasons := map[string]int{}
	for range 2*len(attackers) + 1 {
		select {
		case d := <-dead:
			switch {
			case strings.Contains(d.Reason, "not signed"):
				reasons["unsigned"]++
			case strings.Contains(d.Reason, "does not match"):
				reasons["wrong secret"]++
			case strings.Contains(d.Reason, `key "stolen"`):
				reasons["unknown key"]++
			case strings.Contains(d.Reason, `unknown field "schema_version"`):
				reasons["unknown field"]++
			default:
				t.Errorf("dead letter with reason %q", d.Reason)
			}
		case <-ctx.Done():
			t.Fatalf("dead letters by reason: %v; want 2 for each attacker and 1 unknown field", reasons)
		}
	}
	for _, want := range []string{"unsigned", "wrong secret", "unknown key"} {
		if reasons[want] != 2 {
			t.Errorf("%d dead letters for %s, want 2 (%v)", reasons[want], want, reasons)
		}
	}
	if reasons["unknown field"] != 1 {
		t.Errorf("%d dead letters for the unknown field, want 1", reasons["unknown field"])
	}

	c := <-done
	if c == nil {
		t.FailNow()
	}
	if c.Status != message.CompletionCompleted {
		t.Fatalf("completion %s, want completed", c.Status)
	}
	if got := c.FinalContext["$finish"].(map[string]any)["who"]; got != "genuine" {
		t.Errorf("finish saw who=%v, want genuine: the forged trigger got in", got)
	}
	n := 0
	for _, s := range statuses {
		if s.NodeID == "finish" && s.Status == message.StatusSuccess {
			n++
		}
	}
	if n != 1 {
		t.Errorf("finish succeeded %d times, want once (the genuine timer's)", n)
	}
}
