package console

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/store"
)

// TestAttemptsOf: a node tried three times lists three attempts, each
// with its start, end, duration, error and the backoff before the next;
// the final failure has none; another branch's and node's statuses stay
// out; a fast attempt whose running status never came gets its start
// from its duration.
func TestAttemptsOf(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 8, 40, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ptr := func(v time.Time) *time.Time { return &v }
	boom := &message.Error{Code: "HTTP_503", Message: "service unavailable"}
	var evs []store.Event
	add := func(st message.NodeStatus) {
		b, _ := json.Marshal(st)
		evs = append(evs, store.Event{ID: int64(len(evs) + 1), Kind: "status", Body: b, At: st.ExecutedAt})
	}
	add(message.NodeStatus{NodeID: "fetch", Status: "running", Attempt: 1, ExecutedAt: at(0)})
	add(message.NodeStatus{NodeID: "other", Status: "success", Attempt: 1, ExecutedAt: at(5)})
	add(message.NodeStatus{NodeID: "fetch", Status: "retrying", Attempt: 1, ExecutedAt: at(120), DurationMS: 120, Error: boom, NextAttemptAt: ptr(at(1120))})
	add(message.NodeStatus{NodeID: "fetch", Status: "running", Attempt: 1, ExecutedAt: at(130), LineageStack: []message.Frame{{SplitNodeID: "s", ItemIndex: 1}}})
	add(message.NodeStatus{NodeID: "fetch", Status: "running", Attempt: 2, ExecutedAt: at(1125)})
	add(message.NodeStatus{NodeID: "fetch", Status: "retrying", Attempt: 2, ExecutedAt: at(1200), DurationMS: 75, Error: boom, NextAttemptAt: ptr(at(3200))})
	add(message.NodeStatus{NodeID: "fetch", Status: "failed", Attempt: 3, ExecutedAt: at(3290), DurationMS: 80, Error: boom})

	got := attemptsOf(evs, "fetch", "")
	if len(got) != 3 {
		t.Fatalf("%d attempts, want 3: %+v", len(got), got)
	}
	want := []struct {
		status     string
		start, end time.Time
		ms         int64
		backoff    time.Duration
	}{
		{"retrying", at(0), at(120), 120, time.Second},
		{"retrying", at(1125), at(1200), 75, 2 * time.Second},
		{"failed", at(3210), at(3290), 80, 0},
	}
	for i, w := range want {
		a := got[i]
		if a.N != i+1 || a.Status != w.status || !a.Start.Equal(w.start) || !a.End.Equal(w.end) || a.DurationMS != w.ms || a.Backoff != w.backoff || a.Error == nil || a.Error.Code != "HTTP_503" {
			t.Errorf("attempt %d: %+v, want %+v", i+1, *a, w)
		}
	}
	if got[2].NextAt != nil {
		t.Errorf("the last attempt has a next attempt at %v", got[2].NextAt)
	}
	if br := attemptsOf(evs, "fetch", "s:1"); len(br) != 1 || br[0].Status != "running" || br[0].End != nil {
		t.Errorf("branch s:1: %+v, want one running attempt", br)
	}

	// The timeline has them all, in order, after creation and dispatch.
	x := &store.Execution{CreatedAt: t0.Add(-time.Second), DispatchedAt: ptr(t0.Add(-time.Millisecond)), Trigger: "api"}
	cb, _ := json.Marshal(message.Completion{Status: "failed", FailureReason: &message.Failure{NodeID: "fetch", Error: *boom}})
	ch, _ := json.Marshal(store.ExecutionChange{Change: store.ChangeCancelRequested})
	tl := timeline(x, append(evs, store.Event{Kind: "execution", Body: ch}, store.Event{Kind: "completion", Body: cb}))
	kinds := ""
	for _, e := range tl {
		kinds += e.Kind + ":" + e.Node + ":" + e.Status + " "
	}
	if w := "created::api dispatched:: status:fetch:running status:other:success status:fetch:retrying status:fetch:running status:fetch:running status:fetch:retrying status:fetch:failed cancel_requested:: completion:fetch:failed "; kinds != w {
		t.Errorf("timeline\n%s\nwant\n%s", kinds, w)
	}
}

// TestFailureOfExecution: the banner shows the completion's reason, else a
// failed execution's failed node (a dead-lettered one before any
// completion), and nothing for one that did not fail.
func TestFailureOfExecution(t *testing.T) {
	runs := []*store.NodeRun{{NodeID: "a", Status: "success"}, {NodeID: "b", Status: "failed", Error: json.RawMessage(`{"code":"DEAD_LETTERED","message":"gave up"}`)}}
	if f := failureOfExecution(&store.Execution{Status: store.StatusFailed}, runs); f == nil || f.NodeID != "b" || f.Code != "DEAD_LETTERED" || f.Message != "gave up" {
		t.Errorf("without a completion: %+v", f)
	}
	c := json.RawMessage(`{"status":"failed","failure_reason":{"node_id":"z","code":"X","message":"m"}}`)
	if f := failureOfExecution(&store.Execution{Status: store.StatusFailed, Completion: c}, runs); f == nil || f.NodeID != "z" {
		t.Errorf("with a completion: %+v", f)
	}
	if f := failureOfExecution(&store.Execution{Status: store.StatusProcessing}, runs); f != nil {
		t.Errorf("a running execution: %+v", f)
	}
}
