package broker_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/message"
)

func batch() *message.Statuses {
	run := &message.NodeStatus{WorkflowID: "wf", ExecutionID: "ex-1", NodeID: "a", Status: message.StatusRunning, ExecutedAt: at, Attempt: 1}
	ok := &message.NodeStatus{WorkflowID: "wf", ExecutionID: "ex-1", NodeID: "a", Status: message.StatusSuccess, ExecutedAt: at, Attempt: 1,
		Output: map[string]any{"statuses": []any{"a text that looks like a batch"}}}
	return &message.Statuses{WorkflowID: "wf", ExecutionID: "ex-1", Statuses: []*message.NodeStatus{run, ok}}
}

// One status message carries a hop's statuses; it round-trips, and a lone
// status (the RFC's form, older Rune's) still decodes as one, even when its
// output contains what a batch looks like.
func TestStatusesRoundTripBesideLoneStatus(t *testing.T) {
	b := batch()
	data, err := broker.Encode(broker.Message{Topic: broker.Status, Key: "ex-1", Body: b})
	if err != nil {
		t.Fatal(err)
	}
	got, err := broker.Decode(broker.Status, data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, b) {
		t.Fatalf("batch round trip:\n got %#v\nwant %#v", got, b)
	}
	lone := b.Statuses[1]
	data, err = broker.Encode(broker.Message{Topic: broker.Status, Key: "ex-1", Body: lone})
	if err != nil {
		t.Fatal(err)
	}
	got, err = broker.Decode(broker.Status, data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(message.StatusesOf(got), []*message.NodeStatus{lone}) {
		t.Fatalf("a lone status decoded as %#v", got)
	}
}

func TestStatusesRejectedWhenInvalid(t *testing.T) {
	for name, body := range map[string]string{
		"empty":           `{"workflow_id":"wf","execution_id":"ex-1","statuses":[]}`,
		"other execution": `{"workflow_id":"wf","execution_id":"ex-1","statuses":[{"workflow_id":"wf","execution_id":"ex-2","node_id":"a","status":"running","executed_at":"2025-10-09T12:34:56Z","duration_ms":0}]}`,
		"bad status":      `{"workflow_id":"wf","execution_id":"ex-1","statuses":[{"workflow_id":"wf","execution_id":"ex-1","node_id":"a","status":"done","executed_at":"2025-10-09T12:34:56Z","duration_ms":0}]}`,
	} {
		if _, err := broker.Decode(broker.Status, []byte(body)); !errors.Is(err, broker.ErrReject) {
			t.Errorf("%s: Decode = %v, want a rejection", name, err)
		}
	}
	if err := (broker.Message{Topic: broker.Status, Body: &message.Statuses{}}).Validate(); err == nil {
		t.Error("an empty batch passed Validate")
	}
}

// Followers see a batch one status at a time, in order, with ids derived
// from the message's.
func TestUnbatch(t *testing.T) {
	b := batch()
	parts := broker.Unbatch(broker.Message{Topic: broker.Status, ID: "m", Key: "ex-1", Lane: "l", Body: b})
	if len(parts) != 2 {
		t.Fatalf("%d parts, want 2", len(parts))
	}
	for i, p := range parts {
		if p.Body != b.Statuses[i] || p.Key != "ex-1" || p.Lane != "l" || p.ID != "m/"+string(rune('0'+i)) {
			t.Fatalf("part %d: %+v", i, p)
		}
	}
	c := broker.Message{Topic: broker.Completion, Key: "ex-1", Body: &message.Completion{}}
	if got := broker.Unbatch(c); len(got) != 1 || got[0].Body != c.Body {
		t.Fatalf("a completion unbatched to %+v", got)
	}
}
