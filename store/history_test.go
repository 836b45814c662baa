package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/rune-org/rune/message"
)

var t0 = time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

func st(status string, attempt, sec int) *message.NodeStatus {
	return &message.NodeStatus{WorkflowID: "wf", ExecutionID: "x1", NodeID: "n", Status: status,
		Attempt: attempt, ExecutedAt: at(sec)}
}

func TestBranchKey(t *testing.T) {
	if k := BranchKey(nil); k != "" {
		t.Errorf("BranchKey(nil) = %q", k)
	}
	k := BranchKey([]message.Frame{{SplitNodeID: "split", ItemIndex: 3, TotalItems: 5}, {SplitNodeID: "split2", ItemIndex: 0, TotalItems: 2}})
	if k != "split:3/split2:0" {
		t.Errorf("BranchKey = %q", k)
	}
}

func TestApplyStatusSequences(t *testing.T) {
	retrying := func(attempt, sec, next int) *message.NodeStatus {
		s := st(message.StatusRetrying, attempt, sec)
		s.NextAttemptAt = new(at(next))
		s.Error = &message.Error{Message: "boom", Code: "X"}
		return s
	}
	waiting := func(sec, resume int) *message.NodeStatus {
		s := st(message.StatusWaiting, 1, sec)
		s.ResumeAt = new(at(resume))
		return s
	}
	success := func(attempt, sec int) *message.NodeStatus {
		s := st(message.StatusSuccess, attempt, sec)
		s.Output = map[string]any{"ok": true}
		s.DurationMS = 1000
		return s
	}
	tests := []struct {
		name    string
		seq     []*message.NodeStatus
		applied []bool
		status  string
		attempt int
		started time.Time
		done    *time.Time
	}{
		{"in order", []*message.NodeStatus{st("running", 1, 0), success(1, 1)}, []bool{true, true}, "success", 1, at(0), new(at(1))},
		{"late running after success changes nothing", []*message.NodeStatus{success(1, 1), st("running", 1, 0)}, []bool{true, false}, "success", 1, at(0), new(at(1))},
		{"duplicate running", []*message.NodeStatus{st("running", 1, 0), st("running", 1, 0)}, []bool{true, false}, "running", 1, at(0), nil},
		{"duplicate success", []*message.NodeStatus{st("running", 1, 0), success(1, 1), success(1, 1)}, []bool{true, true, false}, "success", 1, at(0), new(at(1))},
		{"a second final of one attempt is ignored", []*message.NodeStatus{success(1, 1), st("failed", 1, 2)}, []bool{true, false}, "success", 1, at(0), new(at(1))},
		{"retry then success", []*message.NodeStatus{st("running", 1, 0), retrying(1, 1, 5), st("running", 2, 5), success(2, 6)},
			[]bool{true, true, true, true}, "success", 2, at(0), new(at(6))},
		{"retry attempts out of order", []*message.NodeStatus{st("running", 2, 5), retrying(1, 1, 5), st("running", 1, 0), success(2, 6)},
			[]bool{true, false, false, true}, "success", 2, at(5), new(at(6))},
		{"wait then resume", []*message.NodeStatus{st("running", 1, 0), waiting(0, 60), success(1, 60)}, []bool{true, true, true}, "success", 1, at(0), new(at(60))},
		{"waiting after success is stale", []*message.NodeStatus{st("running", 1, 0), success(1, 60), waiting(0, 60)}, []bool{true, true, false}, "success", 1, at(0), new(at(60))},
		{"skipped alone", []*message.NodeStatus{st("skipped", 1, 3)}, []bool{true}, "skipped", 1, at(3), new(at(3))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			run := &NodeRun{}
			for i, s := range tc.seq {
				if got := ApplyStatus(run, s); got != tc.applied[i] {
					t.Errorf("status %d (%s attempt %d): applied = %v, want %v", i, s.Status, s.Attempt, got, tc.applied[i])
				}
			}
			if run.Status != tc.status || run.Attempt != tc.attempt {
				t.Errorf("run = %s attempt %d, want %s attempt %d", run.Status, run.Attempt, tc.status, tc.attempt)
			}
			if run.StartedAt == nil || !run.StartedAt.Equal(tc.started) {
				t.Errorf("StartedAt = %v, want %v", run.StartedAt, tc.started)
			}
			if !equalTime(run.FinishedAt, tc.done) {
				t.Errorf("FinishedAt = %v, want %v", run.FinishedAt, tc.done)
			}
			if run.ExecutionID != "x1" || run.NodeID != "n" {
				t.Errorf("key = %+v", run.Key())
			}
		})
	}
}

func TestApplyStatusTimes(t *testing.T) {
	run := &NodeRun{}
	ApplyStatus(run, st("running", 1, 0))
	r := st("retrying", 1, 2)
	r.NextAttemptAt = new(at(10))
	r.DurationMS = 2000
	r.Error = &message.Error{Message: "boom", Code: "HTTP_500"}
	ApplyStatus(run, r)
	if run.Status != "retrying" || run.NextAttemptAt == nil || !run.NextAttemptAt.Equal(at(10)) || run.FinishedAt != nil || run.DurationMS != 2000 {
		t.Fatalf("after retrying: %+v", run)
	}
	if string(run.Error) != `{"message":"boom","code":"HTTP_500"}` {
		t.Errorf("Error = %s", run.Error)
	}
	ApplyStatus(run, st("running", 2, 10))
	s := st("success", 2, 11)
	s.DurationMS = 1000
	s.Output = []int{1}
	ApplyStatus(run, s)
	if run.Error != nil || string(run.Output) != "[1]" || !run.StartedAt.Equal(at(0)) || !run.FinishedAt.Equal(at(11)) || run.DurationMS != 1000 {
		t.Errorf("after success: %+v", run)
	}
	if !run.NextAttemptAt.Equal(at(10)) {
		t.Errorf("NextAttemptAt not kept as history: %v", run.NextAttemptAt)
	}
}

func TestApplyStatusBarrierProgress(t *testing.T) {
	progress := func(attempt, sec, processed int) *message.NodeStatus {
		s := st("waiting", attempt, sec)
		s.Details = map[string]any{"processed": processed, "total": 10}
		return s
	}
	run := &NodeRun{}
	steps := []struct {
		s    *message.NodeStatus
		want bool
	}{
		{progress(1, 1, 1), true},
		{progress(1, 1, 1), false}, // duplicate
		// An arriving branch's attempt is not the barrier's: progress from a
		// retried branch (attempt 2) and then from a first attempt both count.
		{progress(2, 2, 2), true},
		{progress(1, 3, 3), true},
		{progress(1, 2, 4), false}, // older than the last report
		{st("running", 1, 4), true},
		{progress(1, 5, 9), false}, // the barrier fired: progress is late
		{st("success", 1, 5), true},
	}
	for i, s := range steps {
		if got := ApplyStatus(run, s.s); got != s.want {
			t.Errorf("step %d: applied = %v, want %v (run %+v)", i, got, s.want, run)
		}
		if i == 3 && string(run.Details) != `{"processed":3,"total":10}` {
			t.Errorf("Details = %s", run.Details)
		}
	}
	if run.Status != "success" || run.Attempt != 1 || !run.StartedAt.Equal(at(1)) {
		t.Errorf("run = %+v", run)
	}
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

func statusEvent(key string, s *message.NodeStatus) HistoryEvent {
	return HistoryEvent{ExecutionID: s.ExecutionID, DedupeKey: key, Status: s, ReceivedAt: s.ExecutedAt}
}

func TestApplyBatchExecution(t *testing.T) {
	x := &Execution{ID: "x1", Status: StatusProcessing, Attempts: 1, AvailableAt: at(0)}
	b := Batch{Executions: map[string]*Execution{"x1": x}, Runs: map[RunKey]*NodeRun{}, Now: at(100)}
	on := func(s *message.NodeStatus, node string, branch ...message.Frame) *message.NodeStatus {
		s.NodeID = node
		s.LineageStack = branch
		return s
	}
	f := func(i int) message.Frame { return message.Frame{SplitNodeID: "split", ItemIndex: i, TotalItems: 2} }

	type check struct {
		status   string
		cursor   []string
		attempts int
		avail    time.Time
	}
	expect := func(step string, c check) {
		t.Helper()
		if x.Status != c.status || !slices.Equal(x.Cursor, c.cursor) || x.Attempts != c.attempts || !x.AvailableAt.Equal(c.avail) {
			t.Errorf("%s: status %s cursor %v attempts %d available %v; want %+v", step, x.Status, x.Cursor, x.Attempts, x.AvailableAt, c)
		}
	}
	recorded := map[string]bool{}
	b.Recorded = func(_, key string) bool { return recorded[key] }
	apply := func(evs ...HistoryEvent) Applied {
		t.Helper()
		a := ApplyBatch(evs, b)
		for _, k := range a.DedupeKeys {
			recorded[k] = true
		}
		return a
	}

	a := apply(statusEvent("a", on(st("running", 1, 1), "fetch")))
	expect("running", check{StatusProcessing, []string{"fetch"}, 1, at(0)})
	if len(a.Events) != 1 || len(a.Runs) != 1 || len(a.Executions) != 1 || a.Events[0].Kind != "status" {
		t.Fatalf("applied = %+v", a)
	}

	r := on(st("retrying", 1, 2), "fetch")
	r.NextAttemptAt = new(at(30))
	apply(statusEvent("b", r))
	expect("retrying", check{StatusWaiting, []string{"fetch"}, 2, at(30)})

	// A duplicate (same key) and an event of an unknown execution change nothing.
	other := st("running", 1, 3)
	other.ExecutionID = "nope"
	a = apply(statusEvent("b", on(st("running", 2, 30), "fetch")), statusEvent("z", other))
	if len(a.Events) != 0 || len(a.Runs) != 0 {
		t.Fatalf("duplicate applied: %+v", a)
	}
	expect("duplicate", check{StatusWaiting, []string{"fetch"}, 2, at(30)})

	apply(statusEvent("c", on(st("running", 2, 30), "fetch")), statusEvent("d", on(st("success", 2, 31), "fetch")))
	expect("retried success", check{StatusProcessing, nil, 2, at(30)})

	// Two branches of a split: one waits, one runs.
	w := on(st("waiting", 1, 32), "wait", f(0))
	w.ResumeAt = new(at(90))
	apply(statusEvent("e", on(st("running", 1, 32), "wait", f(0))), statusEvent("f", w),
		statusEvent("g", on(st("running", 1, 32), "wait", f(1))))
	expect("one waits, one runs", check{StatusProcessing, []string{"wait"}, 2, at(90)})
	w2 := on(st("waiting", 1, 33), "wait", f(1))
	w2.ResumeAt = new(at(91))
	apply(statusEvent("h", w2))
	expect("both wait", check{StatusWaiting, []string{"wait"}, 2, at(91)})
	if got := x.Unfinished["wait"]["waiting"]; got != 2 {
		t.Errorf("Unfinished = %v", x.Unfinished)
	}

	// Vars merge; the completion is stored verbatim and ends the execution.
	apply(HistoryEvent{ExecutionID: "x1", DedupeKey: "i", Status: on(st("success", 1, 91), "wait", f(0)),
		Vars: map[string]json.RawMessage{"email_a": raw(`{"id":1}`)}})
	apply(HistoryEvent{ExecutionID: "x1", DedupeKey: "j", Status: on(st("success", 1, 91), "wait", f(1)),
		Vars: map[string]json.RawMessage{"email_b": raw(`{"id":2}`)}})
	body := raw(`{"workflow_id":"wf","execution_id":"x1","status":"completed","final_context":{},"completed_at":"2026-11-24T09:01:35Z","total_duration_ms":95000}`)
	c := &message.Completion{WorkflowID: "wf", ExecutionID: "x1", Status: "completed", CompletedAt: at(95)}
	a = apply(HistoryEvent{ExecutionID: "x1", DedupeKey: "done", Completion: c, Body: body})
	if x.Status != StatusCompleted || string(x.Completion) != string(body) || x.FinishedAt == nil || !x.FinishedAt.Equal(at(95)) || len(x.Cursor) != 0 {
		t.Errorf("after completion: %+v", x)
	}
	if len(a.Events) != 1 || a.Events[0].Kind != "completion" || string(a.Events[0].Body) != string(body) {
		t.Errorf("completion event = %+v", a.Events)
	}
	if !reflect.DeepEqual(x.Vars, map[string]json.RawMessage{"email_a": raw(`{"id":1}`), "email_b": raw(`{"id":2}`)}) {
		t.Errorf("Vars = %v", x.Vars)
	}
	// A repeated completion (other key) and a late status leave the execution as it is.
	c2 := *c
	c2.Status = "failed"
	a = apply(HistoryEvent{ExecutionID: "x1", DedupeKey: "done2", Completion: &c2},
		statusEvent("late", on(st("running", 1, 96), "late_node")))
	if x.Status != StatusCompleted || string(x.Completion) != string(body) || len(x.Cursor) != 0 {
		t.Errorf("after a second completion: %+v", x)
	}
	if len(a.Events) != 1 || len(a.Executions) != 0 {
		t.Errorf("late events: %+v", a)
	}
}

func TestApplyBatchCompletionStatus(t *testing.T) {
	tests := []struct {
		completion string
		cancel     bool
		want       string
	}{
		{"completed", false, StatusCompleted},
		{"failed", false, StatusFailed},
		{"halted", false, StatusHalted},
		{"halted", true, StatusCancelled},
		{"completed", true, StatusCompleted},
	}
	for _, tc := range tests {
		x := &Execution{ID: "x1", Status: StatusWaiting, CancelRequested: tc.cancel}
		ApplyBatch([]HistoryEvent{{ExecutionID: "x1", DedupeKey: "c",
			Completion: &message.Completion{ExecutionID: "x1", Status: tc.completion, CompletedAt: at(5)}}},
			Batch{Executions: map[string]*Execution{"x1": x}, Runs: map[RunKey]*NodeRun{}, Now: at(6)})
		if x.Status != tc.want {
			t.Errorf("%s (cancel %v) → %s, want %s", tc.completion, tc.cancel, x.Status, tc.want)
		}
		if len(x.Completion) == 0 || !x.FinishedAt.Equal(at(5)) {
			t.Errorf("completion not stored: %+v", x)
		}
	}
}

// An event naming one execution and carrying another's message, or no
// message, or two, is ignored.
func TestApplyBatchMalformed(t *testing.T) {
	x := &Execution{ID: "x1", Status: StatusProcessing}
	other := st("running", 1, 0)
	other.ExecutionID = "x2"
	a := ApplyBatch([]HistoryEvent{
		{ExecutionID: "x1", DedupeKey: "a", Status: other},
		{ExecutionID: "x1", DedupeKey: "b"},
		{ExecutionID: "x1", DedupeKey: "c", Status: st("running", 1, 0), Completion: &message.Completion{ExecutionID: "x1"}},
		{ExecutionID: "x1", DedupeKey: "d", Completion: &message.Completion{ExecutionID: "x2", Status: "completed"}},
	}, Batch{Executions: map[string]*Execution{"x1": x}, Runs: map[RunKey]*NodeRun{}, Now: at(1)})
	if len(a.Events) != 0 || len(a.Runs) != 0 || len(a.Executions) != 0 || x.Status != StatusProcessing {
		t.Errorf("malformed events applied: %+v, %+v", a, x)
	}
}

func TestApplyBatchRecorded(t *testing.T) {
	x := &Execution{ID: "x1", Status: StatusProcessing}
	b := Batch{Executions: map[string]*Execution{"x1": x}, Runs: map[RunKey]*NodeRun{}, Now: at(1),
		Recorded: func(id, key string) bool { return id == "x1" && key == "old" }}
	a := ApplyBatch([]HistoryEvent{statusEvent("old", st("running", 1, 0)), statusEvent("", st("running", 1, 0)),
		statusEvent("", st("running", 1, 0)), statusEvent("new", st("success", 1, 1))}, b)
	// Events without a key are always recorded (and then are duplicates by the rules).
	if len(a.Events) != 3 || !slices.Equal(a.DedupeKeys, []string{"", "", "new"}) {
		t.Errorf("events %+v keys %q", a.Events, a.DedupeKeys)
	}
	if x.Status != StatusProcessing || len(x.Cursor) != 0 || x.Unfinished["n"] != nil {
		t.Errorf("execution = %+v", x)
	}
}

func TestSplitsOf(t *testing.T) {
	f := func(split string, i, n int) message.Frame {
		return message.Frame{SplitNodeID: split, ItemIndex: i, TotalItems: n}
	}
	run := func(node, status string, lineage ...message.Frame) *NodeRun {
		return &NodeRun{NodeID: node, Status: status, Lineage: lineage, Branch: BranchKey(lineage)}
	}
	runs := []*NodeRun{
		run("split", "success"),
		run("a", "success", f("split", 0, 4)),
		run("b", "skipped", f("split", 0, 4)),
		run("a", "failed", f("split", 1, 4)),
		run("a", "skipped", f("split", 2, 4)),
		run("a", "running", f("split", 3, 4)),
		run("inner", "success", f("split", 3, 4), f("s2", 0, 2)),
		run("inner", "waiting", f("split", 3, 4), f("s2", 1, 2)),
	}
	got := SplitsOf(runs)
	want := []SplitProgress{
		{SplitNodeID: "split", Branch: "", Total: 4, Done: 1, Failed: 1, Skipped: 1},
		{SplitNodeID: "s2", Branch: "split:3", Total: 2, Done: 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("SplitsOf = %+v\nwant %+v", got, want)
	}
}

// Whatever order a run's statuses arrive in, and however they are split
// into batches, the run ends in its last status and the execution's
// cursor and counts end empty: stale statuses are dropped, never counted.
func TestApplyBatchAnyOrder(t *testing.T) {
	seqs := map[string][]*message.NodeStatus{
		"plain": {st("running", 1, 0), st("success", 1, 1)},
		"retried": {st("running", 1, 0), func() *message.NodeStatus {
			s := st("retrying", 1, 1)
			s.NextAttemptAt = new(at(5))
			return s
		}(), st("running", 2, 5), st("failed", 2, 6)},
		"waited": {st("running", 1, 0), func() *message.NodeStatus {
			s := st("waiting", 1, 1)
			s.ResumeAt = new(at(60))
			return s
		}(), st("success", 1, 60)},
	}
	want := map[string]string{"plain": "success", "retried": "failed", "waited": "success"}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		var evs []HistoryEvent
		for node, seq := range seqs {
			for i, s := range seq {
				c := *s
				c.NodeID = node
				evs = append(evs, statusEvent(fmt.Sprintf("%s/%d", node, i), &c))
			}
		}
		rng.Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
		x := &Execution{ID: "x1", Status: StatusProcessing}
		b := Batch{Executions: map[string]*Execution{"x1": x}, Runs: map[RunKey]*NodeRun{}, Now: at(100)}
		for len(evs) > 0 {
			n := 1 + rng.IntN(len(evs))
			ApplyBatch(evs[:n], b)
			evs = evs[n:]
		}
		for node, status := range want {
			r := b.Runs[RunKey{"x1", node, ""}]
			if r == nil || r.Status != status || r.FinishedAt == nil {
				t.Fatalf("round %d: run %s = %+v, want %s", round, node, r, status)
			}
		}
		if x.Status != StatusProcessing || len(x.Cursor) != 0 || len(x.Unfinished) != 0 {
			t.Fatalf("round %d: execution %s cursor %v unfinished %v", round, x.Status, x.Cursor, x.Unfinished)
		}
	}
}

// Two messages of an execution dead-lettered: it is failed (with the first
// one's reason) until both have been replayed, and a dead letter of an
// ended execution changes nothing.
func TestApplyBatchTwoDeadLetters(t *testing.T) {
	x := &Execution{ID: "x1", Status: StatusProcessing}
	b := Batch{Executions: map[string]*Execution{"x1": x}, Runs: map[RunKey]*NodeRun{}, Now: at(100)}
	n := 0
	apply := func(s *message.NodeStatus, node string) {
		t.Helper()
		s.NodeID = node
		n++
		ApplyBatch([]HistoryEvent{statusEvent(fmt.Sprint(n), s)}, b)
	}
	dead := func(sec int) *message.NodeStatus {
		s := st("failed", 1, sec)
		s.Error = &message.Error{Code: message.CodeDeadLettered, Message: fmt.Sprintf("refused at %d", sec)}
		return s
	}
	apply(st("running", 1, 1), "a")
	apply(dead(2), "a")
	apply(dead(3), "b")
	if x.Status != StatusFailed || !bytes.Contains(x.Completion, []byte("refused at 2")) {
		t.Fatalf("after two dead letters: %s %s", x.Status, x.Completion)
	}
	apply(st("running", 1, 4), "a")
	if x.Status != StatusFailed || !bytes.Contains(x.Completion, []byte("refused at 2")) {
		t.Fatalf("one of two replayed: %s %s, want still failed", x.Status, x.Completion)
	}
	apply(st("success", 1, 5), "b")
	if x.Status != StatusProcessing || x.Completion != nil || !slices.Equal(x.Cursor, []string{"a"}) {
		t.Fatalf("both replayed: %s %v %s, want processing on a", x.Status, x.Cursor, x.Completion)
	}
	apply(st("success", 1, 6), "a")
	ApplyBatch([]HistoryEvent{{ExecutionID: "x1", DedupeKey: "c", Completion: &message.Completion{ExecutionID: "x1", Status: "completed", CompletedAt: at(7)}}}, b)
	apply(dead(8), "z")
	if x.Status != StatusCompleted {
		t.Fatalf("a dead letter after the completion: %s, want completed", x.Status)
	}
}
