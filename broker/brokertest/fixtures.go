package brokertest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/rune-org/rune/message"
)

// uid returns a fresh id usable as a message, workflow or execution id.
func uid(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// Times with nanoseconds and a non-UTC zone, so a lossy encoding shows.
var (
	t0 = time.Date(2025, 3, 4, 5, 6, 7, 123456789, time.FixedZone("plus2", 2*3600))
	t1 = t0.Add(90*time.Second + 7)
	t2 = t0.Add(36 * time.Hour)
)

// definition is compact JSON: encoding a json.RawMessage compacts it.
const definition = `{"id":"wf_conf","name":"Conformance","nodes":[{"id":"start","name":"Start","type":"manual","trigger":true},` +
	`{"id":"fetch","name":"Fetch","type":"http","parameters":{"url":"https://example.com"}},` +
	`{"id":"done","name":"Done","type":"log","parameters":{"message":"ok"}}],` +
	`"edges":[{"id":"e1","src":"start","dst":"fetch"},{"id":"e2","src":"fetch","dst":"done"}]}`

// Bodies with every field set, valid for the message package's decoders.
// Values inside maps are what JSON decodes to (float64, []any, map[string]any).

func execution(id, key string) *message.NodeExecution {
	return &message.NodeExecution{
		MessageID:          id,
		WorkflowID:         "wf_conf",
		ExecutionID:        key,
		CurrentNode:        "done",
		FromNode:           "fetch",
		Attempt:            2,
		StartedAt:          t0,
		WorkflowDefinition: json.RawMessage(definition),
		AccumulatedContext: map[string]any{
			"$trigger": map[string]any{"user_id": "123", "n": 42.5, "ok": true, "none": nil},
			"$fetch":   map[string]any{"status": float64(200), "body": []any{"a", float64(1), map[string]any{"x": "y"}}},
		},
		LineageStack: []message.Frame{{SplitNodeID: "split", BranchID: "b-1", ItemIndex: 1, TotalItems: 3}},
	}
}

func retryingStatus(key string) *message.NodeStatus {
	return &message.NodeStatus{
		WorkflowID:  "wf_conf",
		ExecutionID: key,
		NodeID:      "fetch",
		Status:      message.StatusRetrying,
		Output:      map[string]any{"partial": []any{float64(1), "two"}},
		Error: &message.Error{
			Message: "upstream returned 503",
			Code:    "http_status",
			Details: map[string]any{"status": float64(503)},
		},
		ExecutedAt:    t0,
		DurationMS:    1234,
		Attempt:       1,
		NextAttemptAt: &t1,
		LineageStack:  []message.Frame{{SplitNodeID: "split", BranchID: "b-0", ItemIndex: 0, TotalItems: 2}},
	}
}

func waitingStatus(key string) *message.NodeStatus {
	return &message.NodeStatus{
		WorkflowID:  "wf_conf",
		ExecutionID: key,
		NodeID:      "done",
		Status:      message.StatusWaiting,
		ExecutedAt:  t1,
		DurationMS:  5,
		Attempt:     1,
		ResumeAt:    &t2,
		Details:     map[string]any{"arrived": float64(1), "expected": float64(2)},
	}
}

func status(key, node, st string) *message.NodeStatus {
	return &message.NodeStatus{
		WorkflowID:  "wf_conf",
		ExecutionID: key,
		NodeID:      node,
		Status:      st,
		ExecutedAt:  t0,
		Attempt:     1,
	}
}

func completion(key string) *message.Completion {
	return &message.Completion{
		WorkflowID:      "wf_conf",
		ExecutionID:     key,
		Status:          message.CompletionFailed,
		FinalContext:    map[string]any{"$trigger": map[string]any{"a": "b"}, "$fetch": nil},
		CompletedAt:     t2,
		TotalDurationMS: 98765,
		FailureReason: &message.Failure{
			NodeID: "fetch",
			Error:  message.Error{Message: "boom", Code: "node_failed", Details: map[string]any{"k": "v"}},
		},
	}
}

func timeout(key string) *message.Timeout {
	return &message.Timeout{
		WorkflowID:   "wf_conf",
		ExecutionID:  key,
		NodeID:       "done",
		LineageStack: []message.Frame{{SplitNodeID: "split", BranchID: "b-2", ItemIndex: 2, TotalItems: 3}},
		Deadline:     t2,
		Key:          "barrier-" + key,
		Message:      execution("timeout-"+key, key),
	}
}

// diffBody describes how got differs from want ("" when equal). Times are
// compared with time.Equal, the rest with reflect.DeepEqual.
func diffBody(want, got any) string {
	if reflect.TypeOf(want) != reflect.TypeOf(got) {
		return fmt.Sprintf("body is %T, want %T", got, want)
	}
	if reflect.ValueOf(got).IsNil() {
		return "body is nil"
	}
	var wc, gc any
	var times []string
	switch w := want.(type) {
	case *message.NodeExecution:
		ww, gg := *w, *got.(*message.NodeExecution)
		times = appendTimeDiff(times, "execution_started_at", ww.StartedAt, gg.StartedAt)
		ww.StartedAt, gg.StartedAt = time.Time{}, time.Time{}
		wc, gc = ww, gg
	case *message.NodeStatus:
		ww, gg := *w, *got.(*message.NodeStatus)
		times = appendTimeDiff(times, "executed_at", ww.ExecutedAt, gg.ExecutedAt)
		times = appendPtrTimeDiff(times, "next_attempt_at", ww.NextAttemptAt, gg.NextAttemptAt)
		times = appendPtrTimeDiff(times, "resume_at", ww.ResumeAt, gg.ResumeAt)
		ww.ExecutedAt, gg.ExecutedAt = time.Time{}, time.Time{}
		ww.NextAttemptAt, gg.NextAttemptAt = nil, nil
		ww.ResumeAt, gg.ResumeAt = nil, nil
		wc, gc = ww, gg
	case *message.Completion:
		ww, gg := *w, *got.(*message.Completion)
		times = appendTimeDiff(times, "completed_at", ww.CompletedAt, gg.CompletedAt)
		ww.CompletedAt, gg.CompletedAt = time.Time{}, time.Time{}
		wc, gc = ww, gg
	case *message.Timeout:
		ww, gg := *w, *got.(*message.Timeout)
		times = appendTimeDiff(times, "deadline", ww.Deadline, gg.Deadline)
		ww.Deadline, gg.Deadline = time.Time{}, time.Time{}
		if ww.Message != nil && gg.Message != nil {
			wm, gm := *ww.Message, *gg.Message
			times = appendTimeDiff(times, "message.execution_started_at", wm.StartedAt, gm.StartedAt)
			wm.StartedAt, gm.StartedAt = time.Time{}, time.Time{}
			ww.Message, gg.Message = &wm, &gm
		}
		wc, gc = ww, gg
	default:
		return fmt.Sprintf("unexpected body type %T", want)
	}
	if len(times) > 0 {
		return fmt.Sprint(times)
	}
	if !reflect.DeepEqual(wc, gc) {
		return fmt.Sprintf("body\n got %#v\nwant %#v", gc, wc)
	}
	return ""
}

func appendTimeDiff(diffs []string, field string, want, got time.Time) []string {
	if !want.Equal(got) {
		diffs = append(diffs, fmt.Sprintf("%s is %v, want %v", field, got, want))
	}
	return diffs
}

func appendPtrTimeDiff(diffs []string, field string, want, got *time.Time) []string {
	switch {
	case want == nil && got == nil:
	case want == nil || got == nil:
		diffs = append(diffs, fmt.Sprintf("%s is %v, want %v", field, got, want))
	default:
		diffs = appendTimeDiff(diffs, field, *want, *got)
	}
	return diffs
}

// checkBody fails t when got is not want.
func checkBody(t *testing.T, what string, want, got any) {
	t.Helper()
	if d := diffBody(want, got); d != "" {
		t.Errorf("%s: %s", what, d)
	}
}
