package memory

import (
	"context"
	"testing"
	"time"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/message"
)

func TestFollowOnlyTopicsAreNotQueued(t *testing.T) {
	b := New(Options{FollowOnly: []broker.Topic{broker.Status}})
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
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
	case <-time.After(5 * time.Second):
		t.Fatal("follower got nothing")
	}
	q := b.queues[topicIndex(broker.Status)]
	q.mu.Lock()
	n := q.n
	q.mu.Unlock()
	if n != 0 {
		t.Fatalf("status queue holds %d messages; FollowOnly topics must not be queued", n)
	}
}
