package publish_test

import (
	"context"
	"testing"
	"time"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/broker/memory"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/publish"
)

func nodeStatus(node, status string) *message.NodeStatus {
	st := &message.NodeStatus{WorkflowID: "wf", ExecutionID: "exec_1", NodeID: node, Status: status, ExecutedAt: time.Now()}
	if status == message.StatusFailed {
		st.Error = &message.Error{Code: "X", Message: "x"}
	}
	return st
}

// statusBodies consumes the status topic of b and sends each delivered body.
func statusBodies(t *testing.T, b broker.Broker) <-chan any {
	t.Helper()
	out := make(chan any, 64)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = b.Consume(ctx, broker.Status, broker.ConsumeOptions{}, func(_ context.Context, d *broker.Delivery) error {
			out <- d.Body
			return nil
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return out
}

func next(t *testing.T, ch <-chan any) any {
	t.Helper()
	select {
	case b := <-ch:
		return b
	case <-time.After(30 * time.Second):
		t.Fatal("no status message within 30s")
		return nil
	}
}

func names(ss []*message.NodeStatus) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.NodeID+":"+s.Status)
	}
	return out
}

// Everything one handled message reports is one status message, in order,
// the running status of a node that ended within the threshold included.
func TestPublisherSendsOneStatusMessagePerHop(t *testing.T) {
	t.Parallel()
	b := memory.New(memory.Options{})
	defer b.Close()
	bodies := statusBodies(t, b)
	ctx := context.Background()
	p := publish.New(publish.Config{Broker: b, RunningAfter: time.Minute})
	p.Status(ctx, nodeStatus("a", message.StatusRunning))
	p.Status(ctx, nodeStatus("a", message.StatusSuccess))
	p.Status(ctx, nodeStatus("agg", message.StatusSuccess))
	p.Complete(&message.Completion{WorkflowID: "wf", ExecutionID: "exec_1", Status: message.CompletionCompleted, FinalContext: map[string]any{}})
	if err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	got, ok := next(t, bodies).(*message.Statuses)
	if !ok {
		t.Fatalf("the hop's statuses came as %T, want one *message.Statuses", got)
	}
	if n := names(got.Statuses); len(n) != 3 || n[0] != "a:running" || n[1] != "a:success" || n[2] != "agg:success" {
		t.Fatalf("statuses %v, want [a:running a:success agg:success]", n)
	}
	select {
	case extra := <-bodies:
		t.Fatalf("a second status message for one hop: %T", extra)
	case <-time.After(100 * time.Millisecond):
	}
}

// A node still running after the threshold has its running status
// published on its own, at once; its other statuses follow in the batch.
func TestPublisherPublishesSlowRunningAlone(t *testing.T) {
	t.Parallel()
	b := memory.New(memory.Options{})
	defer b.Close()
	bodies := statusBodies(t, b)
	ctx := context.Background()
	p := publish.New(publish.Config{Broker: b, RunningAfter: time.Millisecond})
	p.Status(ctx, nodeStatus("slow", message.StatusRunning))
	first, ok := next(t, bodies).(*message.NodeStatus)
	if !ok || first.NodeID != "slow" || first.Status != message.StatusRunning {
		t.Fatalf("first status message %+v, want slow's running status alone", first)
	}
	p.Status(ctx, nodeStatus("slow", message.StatusFailed))
	if err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if n := names(message.StatusesOf(next(t, bodies))); len(n) != 1 || n[0] != "slow:failed" {
		t.Fatalf("then %v, want [slow:failed] (running published once)", n)
	}
}
