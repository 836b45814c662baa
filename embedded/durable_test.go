package embedded_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/embedded"
	"github.com/rune-org/rune/message"
)

// The durable runtime keeps the messages its worker rejects, for an
// operator: DeadLetters lists one (here: of an execution that never
// started), replays it to its topic (where it is rejected again: its
// execution still does not exist) and purges them.
func TestDurableDeadLetters(t *testing.T) {
	t.Parallel()
	rt := durable(t, embedded.Options{Logger: slog.New(slog.DiscardHandler)})
	if rt.DeadLetters == nil {
		t.Fatal("a durable runtime has no DeadLetters")
	}
	wf, err := rt.Engine.Compile([]byte(`{"id": "dl", "nodes": [{"id": "start", "type": "trigger", "trigger": true},
		{"id": "say", "type": "log", "parameters": {"message": "hi"}}], "edges": [{"id": "e1", "src": "start", "dst": "say"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m := &message.NodeExecution{MessageID: "m1", WorkflowID: "dl", ExecutionID: "exec_never_started", CurrentNode: "say",
		FromNode: "start", Attempt: 1, StartedAt: time.Now().UTC(), WorkflowDefinition: wf.Raw,
		AccumulatedContext: map[string]any{"$trigger": map[string]any{}}}
	if err := rt.Broker.Publish(ctx, broker.Message{Topic: broker.Execution, ID: m.MessageID, Key: m.ExecutionID, Body: m}).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	var dls []embedded.DeadLetter
	for n := 0; n == 0; {
		if ctx.Err() != nil {
			t.Fatal("no dead letter within 60 s")
		}
		if dls, n, err = rt.DeadLetters.List(ctx, 10); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if d := dls[0]; len(dls) != 1 || d.ID != "m1" || d.Key != "exec_never_started" || d.Topic != broker.Execution || d.Reason == "" {
		t.Fatalf("dead letters %+v, want m1 of exec_never_started, from %s, with a reason", dls, broker.Execution)
	}
	if ids, err := rt.DeadLetters.Replay(ctx, []string{"m1"}); err != nil || len(ids) != 1 || ids[0] != "m1" {
		t.Fatalf("Replay = %v, %v; want [m1]", ids, err)
	}
	// Replayed, it runs and is rejected again.
	for n := 0; n == 0; {
		if ctx.Err() != nil {
			t.Fatal("the replayed message was not dead-lettered again within 60 s")
		}
		if _, n, err = rt.DeadLetters.List(ctx, 10); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n, err := rt.DeadLetters.Purge(ctx); err != nil || n != 1 {
		t.Fatalf("Purge = %d, %v; want 1", n, err)
	}
	if _, n, err := rt.DeadLetters.List(ctx, 10); err != nil || n != 0 {
		t.Fatalf("after Purge: %d dead letters, %v", n, err)
	}
}
