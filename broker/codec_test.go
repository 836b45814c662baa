package broker_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/message"
)

var at = time.Date(2025, 10, 9, 12, 34, 56, 789, time.UTC)

func bodies() map[broker.Topic]any {
	return map[broker.Topic]any{
		broker.Execution: &message.NodeExecution{
			MessageID: "m1", WorkflowID: "wf", ExecutionID: "ex-1", CurrentNode: "a", FromNode: "t", Attempt: 1,
			StartedAt: at, WorkflowDefinition: json.RawMessage(`{"id":"wf"}`),
			AccumulatedContext: map[string]any{"$trigger": map[string]any{"n": 1.5}},
		},
		broker.Status: &message.NodeStatus{
			WorkflowID: "wf", ExecutionID: "ex-1", NodeID: "a", Status: message.StatusFailed,
			Error: &message.Error{Message: "boom", Code: "x"}, ExecutedAt: at, DurationMS: 3, Attempt: 1,
		},
		broker.Completion: &message.Completion{
			WorkflowID: "wf", ExecutionID: "ex-1", Status: message.CompletionCompleted,
			FinalContext: map[string]any{"$a": "b"}, CompletedAt: at, TotalDurationMS: 9,
		},
		broker.Timeout: &message.Timeout{WorkflowID: "wf", ExecutionID: "ex-1", NodeID: "merge", Deadline: at, Key: "k",
			Message: &message.NodeExecution{MessageID: "m2", WorkflowID: "wf", ExecutionID: "ex-1", CurrentNode: "merge", Attempt: 1,
				WorkflowDefinition: []byte(`{"id":"wf"}`), AccumulatedContext: map[string]any{}}},
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	for topic, body := range bodies() {
		data, err := broker.Encode(broker.Message{Topic: topic, ID: "id", Key: "ex-1", Body: body})
		if err != nil {
			t.Fatalf("Encode %s: %v", topic, err)
		}
		got, err := broker.Decode(topic, data)
		if err != nil {
			t.Fatalf("Decode %s: %v", topic, err)
		}
		if !reflect.DeepEqual(got, body) {
			t.Errorf("%s round trip:\n got %#v\nwant %#v", topic, got, body)
		}
	}
}

func TestDecodeErrorsReject(t *testing.T) {
	valid, _ := json.Marshal(bodies()[broker.Status])
	huge := append([]byte(`{"workflow_id":"`), bytes.Repeat([]byte("x"), message.MaxSize)...)
	cases := []struct {
		name  string
		topic broker.Topic
		data  string
		want  string
	}{
		{"not JSON", broker.Execution, `{"message_id":`, "invalid JSON"},
		{"wrong JSON type", broker.Completion, `[1,2]`, "want a JSON object"},
		{"invalid message", broker.Status, `{"workflow_id":"wf"}`, "execution_id"},
		{"body of another topic", broker.Execution, string(valid), `unknown field "node_id"`}, // fields of a status are not those of an execution
		{"dead letter topic", broker.DeadLetter, string(valid), "no body type"},
		{"unknown topic", "nope", string(valid), "no body type"},
		{"too large", broker.Timeout, string(huge), "over the limit"},
	}
	for _, c := range cases {
		_, err := broker.Decode(c.topic, []byte(c.data))
		if !errors.Is(err, broker.ErrReject) {
			t.Errorf("%s: Decode error %v does not wrap ErrReject", c.name, err)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Decode error %q does not mention %q", c.name, err, c.want)
		}
	}
	if _, err := broker.Decode(broker.Timeout, huge); !errors.Is(err, message.ErrTooLarge) {
		t.Errorf("oversized body: error %v does not wrap message.ErrTooLarge", err)
	}
}

func TestValidate(t *testing.T) {
	b := bodies()
	var nilExec *message.NodeExecution
	bad := []struct {
		m    broker.Message
		want string
	}{
		{broker.Message{Topic: broker.Execution, ID: "x", Body: b[broker.Status]}, "does not belong"},
		{broker.Message{Topic: broker.Execution, ID: "x"}, "does not belong"},
		{broker.Message{Topic: broker.Execution, ID: "x", Body: nilExec}, "does not belong"},
		{broker.Message{Topic: broker.DeadLetter, ID: "x", Body: b[broker.Execution]}, "written by the broker"},
		{broker.Message{Topic: "nope", ID: "x", Body: b[broker.Execution]}, "unknown topic"},
		{broker.Message{Topic: broker.Status, ID: "x", Body: b[broker.Status], Delay: time.Second}, "only"},
		{broker.Message{Topic: broker.Execution, ID: "x", Body: b[broker.Execution], Delay: -time.Second}, "negative"},
	}
	for _, c := range bad {
		err := c.m.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `"x"`) {
			t.Errorf("Validate(%s, %T, delay %v) = %v, want an error naming the message and saying %q", c.m.Topic, c.m.Body, c.m.Delay, err, c.want)
		}
		if _, err := broker.Encode(c.m); err == nil {
			t.Errorf("Encode(%s, %T) succeeded", c.m.Topic, c.m.Body)
		}
	}
	for _, topic := range []broker.Topic{broker.Execution, broker.Timeout} {
		if err := (broker.Message{Topic: topic, Body: b[topic], Delay: time.Minute}).Validate(); err != nil {
			t.Errorf("delayed %s: %v", topic, err)
		}
	}
}
