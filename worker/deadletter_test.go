package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/client"
	"github.com/rune-org/rune/embedded"
	"github.com/rune-org/rune/message"
)

const linear = `{"id": "dl_linear", "name": "dead letters", "nodes": [
 {"id": "start", "type": "trigger", "name": "Start", "trigger": true},
 {"id": "say", "type": "log", "name": "Say", "parameters": {"message": "hi"}}],
 "edges": [{"id": "e1", "src": "start", "dst": "say"}]}`

// A message the engine refuses (here: of an execution that never started,
// which issue 12 found acked and dropped) is dead-lettered with the reason,
// and a follower of that execution learns it at once instead of waiting
// for a completion that cannot come.
func TestRefusedMessageIsDeadLetteredAndReported(t *testing.T) {
	t.Parallel()
	rt, err := embedded.New(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	wf, err := rt.Engine.Compile([]byte(linear))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dead := make(chan *broker.Delivery, 1)
	go func() {
		_ = rt.Broker.Consume(ctx, broker.DeadLetter, broker.ConsumeOptions{}, func(_ context.Context, d *broker.Delivery) error {
			dead <- d
			return nil
		})
	}()
	exec := "exec_never_started"
	events, err := rt.Broker.Follow(ctx, exec)
	if err != nil {
		t.Fatal(err)
	}
	m := &message.NodeExecution{MessageID: "m1", WorkflowID: "dl_linear", ExecutionID: exec, CurrentNode: "say",
		FromNode: "start", Attempt: 1, StartedAt: time.Now().UTC(), WorkflowDefinition: wf.Raw,
		AccumulatedContext: map[string]any{"$trigger": map[string]any{}}}
	if err := rt.Broker.Publish(ctx, broker.Message{Topic: broker.Execution, ID: m.MessageID, Key: exec, Body: m}).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = client.Wait(ctx, events, nil)
	var de *client.DeadLetteredError
	if !errors.As(err, &de) || de.NodeID != "say" {
		t.Fatalf("Wait = %v, want a DeadLetteredError for node say", err)
	}
	select {
	case d := <-dead:
		if d.ID != "m1" || d.Reason == "" {
			t.Errorf("dead letter %q with reason %q, want m1 with a reason", d.ID, d.Reason)
		}
	case <-ctx.Done():
		t.Fatal("no dead letter")
	}
}
