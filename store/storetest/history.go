package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/store"
)

// statusOf builds a status event; its dedupe key is node/branch/status/attempt
// (the server's choice does not matter to the store).
func statusOf(exec, node, status string, attempt int, sec float64, lineage ...message.Frame) store.HistoryEvent {
	st := &message.NodeStatus{WorkflowID: "wf", ExecutionID: exec, NodeID: node, Status: status, Attempt: attempt,
		ExecutedAt: at(sec), LineageStack: lineage}
	return store.HistoryEvent{ExecutionID: exec, DedupeKey: fmt.Sprintf("%s/%s/%s/%d", node, store.BranchKey(lineage), status, attempt),
		Status: st, ReceivedAt: at(sec)}
}

func completionOf(exec, status string, sec float64) store.HistoryEvent {
	c := &message.Completion{WorkflowID: "wf", ExecutionID: exec, Status: status, CompletedAt: at(sec),
		FinalContext: map[string]any{"$trigger": map[string]any{"n": 1.0}}, TotalDurationMS: int64(sec * 1000)}
	body, _ := json.Marshal(c)
	return store.HistoryEvent{ExecutionID: exec, DedupeKey: "completion", Completion: c, Body: body, ReceivedAt: at(sec)}
}

func (h *harness) started(ctx context.Context, t *testing.T, id string) {
	t.Helper()
	if _, err := h.s.GetWorkflow(ctx, "wf", 0); err != nil {
		h.workflow(ctx, t, "wf")
	}
	h.execution(ctx, t, store.ExecutionInput{ID: id, WorkflowID: "wf"})
	if got := claim(ctx, t, h.s, "d1", t0, time.Minute, 1); !slices.Equal(got, []string{id}) {
		t.Fatalf("claimed %v, want %s", got, id)
	}
	if err := h.s.MarkDispatched(ctx, id, "d1", t0); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) runs(ctx context.Context, t *testing.T, id string) map[string]*store.NodeRun {
	t.Helper()
	runs, err := h.s.NodeRuns(ctx, id)
	if err != nil {
		t.Fatalf("NodeRuns(%s): %v", id, err)
	}
	out := map[string]*store.NodeRun{}
	for _, r := range runs {
		out[r.NodeID+"@"+r.Branch] = r
	}
	return out
}

// A node retried to success, then a completion: the node run, the
// execution's attempts, available_at, cursor and status along the way.
func testHistoryRetry(ctx context.Context, t *testing.T, h *harness) {
	h.started(ctx, t, "x1")
	h.append(ctx, t, statusOf("x1", "start", "running", 1, 1), statusOf("x1", "start", "success", 1, 1),
		statusOf("x1", "email", "running", 1, 2))
	x := h.get(ctx, t, "x1")
	if x.Status != store.StatusProcessing || !slices.Equal(x.Cursor, []string{"email"}) || x.Attempts != 1 {
		t.Fatalf("running: %+v", x)
	}
	retry := statusOf("x1", "email", "retrying", 1, 3)
	retry.Status.NextAttemptAt = new(at(33))
	retry.Status.Error = &message.Error{Message: "smtp 451", Code: "SMTP_TEMP"}
	retry.Status.DurationMS = 1000
	h.append(ctx, t, retry)
	x = h.get(ctx, t, "x1")
	if x.Status != store.StatusWaiting || x.Attempts != 2 || !x.AvailableAt.Equal(at(33)) || !slices.Equal(x.Cursor, []string{"email"}) {
		t.Fatalf("retrying: status %s attempts %d available %v cursor %v", x.Status, x.Attempts, x.AvailableAt, x.Cursor)
	}
	ok := statusOf("x1", "email", "success", 2, 34)
	ok.Status.Output = map[string]any{"message_id": "m-1"}
	ok.Status.DurationMS = 500
	ok.Vars = map[string]json.RawMessage{"email_email": json.RawMessage(`{"message_id":"m-1"}`)}
	h.append(ctx, t, statusOf("x1", "email", "running", 2, 33.5), ok)
	runs := h.runs(ctx, t, "x1")
	r := runs["email@"]
	if r == nil || r.Status != "success" || r.Attempt != 2 || !equalTimePtr(r.StartedAt, at(2)) || !equalTimePtr(r.FinishedAt, at(34)) ||
		!equalTimePtr(r.NextAttemptAt, at(33)) || r.DurationMS != 500 || !jsonEqual(r.Output, json.RawMessage(`{"message_id":"m-1"}`)) || r.Error != nil {
		t.Fatalf("email run: %+v", r)
	}
	done := completionOf("x1", "completed", 35)
	h.append(ctx, t, done)
	x = h.get(ctx, t, "x1")
	if x.Status != store.StatusCompleted || !jsonEqual(x.Completion, done.Body) || !equalTimePtr(x.FinishedAt, at(35)) ||
		len(x.Cursor) != 0 || x.Attempts != 2 || !jsonEqual(x.Vars["email_email"], json.RawMessage(`{"message_id":"m-1"}`)) {
		t.Fatalf("completed: %+v", x)
	}
	// Node runs come in the order they were first reported.
	got, err := h.s.NodeRuns(ctx, "x1")
	if err != nil || len(got) != 2 || got[0].NodeID != "start" || got[1].NodeID != "email" {
		t.Errorf("NodeRuns order: %v", got)
	}
}

// Duplicates and out-of-order statuses, within a batch and across batches,
// never regress a run; a duplicate event is not recorded twice.
func testHistoryOutOfOrder(ctx context.Context, t *testing.T, h *harness) {
	h.started(ctx, t, "x1")
	out := h.append(ctx, t, statusOf("x1", "a", "success", 1, 2), statusOf("x1", "a", "running", 1, 1),
		statusOf("x1", "a", "success", 1, 2))
	if len(out) != 2 {
		t.Errorf("recorded %d events, want 2 (the third is the first again)", len(out))
	}
	if out := h.append(ctx, t, statusOf("x1", "a", "running", 1, 1), statusOf("x1", "a", "success", 1, 2)); len(out) != 0 {
		t.Errorf("recorded %d duplicates", len(out))
	}
	late := statusOf("x1", "a", "running", 1, 5)
	late.DedupeKey = "another-key"
	h.append(ctx, t, late)
	r := h.runs(ctx, t, "x1")["a@"]
	if r.Status != "success" || !equalTimePtr(r.FinishedAt, at(2)) {
		t.Errorf("run after a late running: %+v", r)
	}
	x := h.get(ctx, t, "x1")
	if x.Status != store.StatusProcessing || len(x.Cursor) != 0 {
		t.Errorf("execution after out-of-order statuses: %+v", x)
	}
	// A second completion (another key) changes nothing.
	h.append(ctx, t, completionOf("x1", "completed", 10))
	second := completionOf("x1", "failed", 11)
	second.DedupeKey = "completion-2"
	if out := h.append(ctx, t, second); len(out) != 0 {
		t.Errorf("a second completion was recorded: %+v", out)
	}
	if x := h.get(ctx, t, "x1"); x.Status != store.StatusCompleted {
		t.Errorf("status after a second completion: %s", x.Status)
	}
}

// Each split branch has its own node run; fan-out progress counts branches.
func testHistorySplit(ctx context.Context, t *testing.T, h *harness) {
	h.started(ctx, t, "x1")
	f := func(i int) message.Frame {
		return message.Frame{SplitNodeID: "split", BranchID: fmt.Sprint(i), ItemIndex: i, TotalItems: 3}
	}
	h.append(ctx, t, statusOf("x1", "split", "success", 1, 1),
		statusOf("x1", "work", "running", 1, 2, f(0)), statusOf("x1", "work", "running", 1, 2, f(1)),
		statusOf("x1", "work", "running", 1, 2, f(2)), statusOf("x1", "work", "success", 1, 3, f(0)),
		statusOf("x1", "work", "failed", 1, 3, f(1)))
	runs := h.runs(ctx, t, "x1")
	if len(runs) != 4 || runs["work@split:0"].Status != "success" || runs["work@split:1"].Status != "failed" ||
		runs["work@split:2"].Status != "running" || !slices.Equal(runs["work@split:2"].Lineage, []message.Frame{f(2)}) {
		t.Fatalf("runs: %v", runs)
	}
	x := h.get(ctx, t, "x1")
	if x.Status != store.StatusProcessing || !slices.Equal(x.Cursor, []string{"work"}) {
		t.Errorf("execution: %+v", x)
	}
	splits, err := h.s.Splits(ctx, "x1")
	want := []store.SplitProgress{{SplitNodeID: "split", Total: 3, Done: 1, Failed: 1}}
	if err != nil || !slices.Equal(splits, want) {
		t.Errorf("Splits = %+v, %v; want %+v", splits, err, want)
	}
	h.append(ctx, t, statusOf("x1", "work", "skipped", 1, 4, f(2)))
	splits, _ = h.s.Splits(ctx, "x1")
	if want[0].Skipped = 1; !slices.Equal(splits, want) {
		t.Errorf("Splits = %+v; want %+v", splits, want)
	}
	_, err = h.s.Splits(ctx, "nope")
	wantErr(t, "Splits(unknown)", err, store.ErrNotFound, "nope")
}

// A wait: the execution waits with available_at at the resume time; a
// barrier's progress updates its run.
func testHistoryWait(ctx context.Context, t *testing.T, h *harness) {
	h.started(ctx, t, "x1")
	w := statusOf("x1", "wait", "waiting", 1, 2)
	w.Status.ResumeAt = new(at(3600))
	h.append(ctx, t, statusOf("x1", "wait", "running", 1, 1), w)
	x := h.get(ctx, t, "x1")
	if x.Status != store.StatusWaiting || !x.AvailableAt.Equal(at(3600)) || !slices.Equal(x.Cursor, []string{"wait"}) {
		t.Fatalf("waiting: %+v", x)
	}
	progress := func(n int, sec float64) store.HistoryEvent {
		e := statusOf("x1", "agg", "waiting", 1, sec)
		e.DedupeKey = fmt.Sprintf("agg/progress/%d", n)
		e.Status.Details = map[string]any{"processed": n, "total": 10}
		return e
	}
	h.append(ctx, t, progress(1, 3), progress(5, 4))
	r := h.runs(ctx, t, "x1")["agg@"]
	if r.Status != "waiting" || !jsonEqual(r.Details, json.RawMessage(`{"processed":5,"total":10}`)) {
		t.Errorf("barrier run: %+v (details %s)", r, r.Details)
	}
	h.append(ctx, t, statusOf("x1", "wait", "success", 1, 3600))
	x = h.get(ctx, t, "x1")
	if x.Status != store.StatusWaiting || !slices.Equal(x.Cursor, []string{"agg"}) {
		t.Errorf("after the wait: %+v", x)
	}
	if r := h.runs(ctx, t, "x1")["wait@"]; !equalTimePtr(r.ResumeAt, at(3600)) || r.Status != "success" {
		t.Errorf("wait run: %+v", r)
	}
}

// A cancel requested while running ends as cancelled when the halted
// completion arrives.
func testHistoryCancel(ctx context.Context, t *testing.T, h *harness) {
	h.started(ctx, t, "x1")
	h.append(ctx, t, statusOf("x1", "a", "running", 1, 1))
	if _, err := h.s.CancelExecution(ctx, "x1", at(2)); err != nil {
		t.Fatal(err)
	}
	h.append(ctx, t, statusOf("x1", "a", "success", 1, 2), statusOf("x1", "b", "skipped", 1, 3), completionOf("x1", "halted", 3))
	if x := h.get(ctx, t, "x1"); x.Status != store.StatusCancelled || !x.CancelRequested {
		t.Errorf("after a cancel and a halted completion: %+v", x)
	}
}

// A dead-lettered message (its worker's failed status with code
// DEAD_LETTERED) ends its execution failed at once, with a completion the
// history makes; other branches' statuses do not take it up again, its
// replay does (processing, then waiting), and the real completion ends it
// completed. Listed by ?status= in each state.
func testHistoryDeadLetter(ctx context.Context, t *testing.T, h *harness) {
	h.started(ctx, t, "x1")
	h.append(ctx, t, statusOf("x1", "a", "running", 1, 1), statusOf("x1", "b", "running", 1, 1))
	dl := statusOf("x1", "a", "failed", 1, 2)
	dl.Status.Error = &message.Error{Code: message.CodeDeadLettered, Message: "definition d1 is not in the definition store"}
	dl.DedupeKey = "dl"
	h.append(ctx, t, dl)
	failed := func(what string) {
		t.Helper()
		x := h.get(ctx, t, "x1")
		var c message.Completion
		if x.Status != store.StatusFailed || x.FinishedAt == nil || json.Unmarshal(x.Completion, &c) != nil ||
			c.Status != message.CompletionFailed || c.FailureReason == nil || c.FailureReason.NodeID != "a" ||
			c.FailureReason.Code != message.CodeDeadLettered || c.FailureReason.Message != dl.Status.Error.Message {
			t.Fatalf("%s: %+v (completion %s), want failed with a's DEAD_LETTERED reason", what, x, x.Completion)
		}
		if got := listIDs(ctx, t, h.s, store.ExecutionFilter{Status: store.StatusFailed}); !slices.Contains(got, "x1") {
			t.Fatalf("%s: ?status=failed lists %v", what, got)
		}
	}
	failed("dead-lettered")
	// Another branch goes on (and is recorded), the execution stays failed.
	h.append(ctx, t, statusOf("x1", "b", "success", 1, 3), statusOf("x1", "c", "running", 1, 3))
	failed("after another branch's statuses")
	if r := h.runs(ctx, t, "x1")["b@"]; r.Status != "success" {
		t.Fatalf("b: %+v", r)
	}
	// The replay: a runs again, then waits. (Its statuses are new events:
	// the server's dedupe key of a status hashes its body, which differs.)
	replay := func(ev store.HistoryEvent) store.HistoryEvent { ev.DedupeKey += "/replay"; return ev }
	h.append(ctx, t, replay(statusOf("x1", "a", "running", 1, 10)))
	x := h.get(ctx, t, "x1")
	if x.Status != store.StatusProcessing || x.Completion != nil || x.FinishedAt != nil || !slices.Equal(x.Cursor, []string{"a", "c"}) {
		t.Fatalf("replayed: %+v, want processing on a and c, no completion", x)
	}
	if r := h.runs(ctx, t, "x1")["a@"]; r.Status != "running" || r.Error != nil || r.FinishedAt != nil {
		t.Fatalf("replayed run a: %+v", r)
	}
	if got := listIDs(ctx, t, h.s, store.ExecutionFilter{Status: store.StatusFailed}); slices.Contains(got, "x1") {
		t.Fatalf("?status=failed still lists the replayed execution: %v", got)
	}
	h.append(ctx, t, statusOf("x1", "c", "success", 1, 11), replay(statusOf("x1", "a", "waiting", 1, 11)))
	if x := h.get(ctx, t, "x1"); x.Status != store.StatusWaiting {
		t.Fatalf("replayed and waiting: %+v", x)
	}
	h.append(ctx, t, replay(statusOf("x1", "a", "success", 1, 12)), completionOf("x1", "completed", 12))
	if x := h.get(ctx, t, "x1"); x.Status != store.StatusCompleted || x.FinishedAt == nil || !x.FinishedAt.Equal(at(12)) {
		t.Fatalf("replayed to its completion: %+v", x)
	}

	// A completion straight after the dead letter (its statuses lost)
	// replaces the history's.
	h.started(ctx, t, "x2")
	dl2 := statusOf("x2", "a", "failed", 1, 2)
	dl2.Status.Error = dl.Status.Error
	h.append(ctx, t, dl2)
	h.append(ctx, t, completionOf("x2", "completed", 5))
	if x := h.get(ctx, t, "x2"); x.Status != store.StatusCompleted {
		t.Fatalf("completion after a dead letter: %+v", x)
	}
}

// Events of executions the store does not have are ignored.
func testHistoryUnknownExecution(ctx context.Context, t *testing.T, h *harness) {
	h.started(ctx, t, "x1")
	out := h.append(ctx, t, statusOf("nope", "a", "running", 1, 1), statusOf("x1", "a", "running", 1, 1), completionOf("nope", "completed", 2))
	if len(out) != 1 || out[0].ExecutionID != "x1" {
		t.Errorf("recorded %+v", out)
	}
	_, err := h.s.NodeRuns(ctx, "nope")
	wantErr(t, "NodeRuns(unknown)", err, store.ErrNotFound, "nope")
	if out, err := h.s.AppendHistory(ctx, nil); err != nil || len(out) != 0 {
		t.Errorf("AppendHistory(nil) = %v, %v", out, err)
	}
}

// A batch of many events (more than a store's multi-row insert takes at
// once), with duplicates inside it: each distinct event is recorded once,
// in the batch's order, and the ids AppendHistory returns are those Events
// reads back with the same bodies.
func testEventsLargeBatch(ctx context.Context, t *testing.T, h *harness) {
	h.started(ctx, t, "x1")
	h.started(ctx, t, "x2")
	var evs []store.HistoryEvent
	for n := range 75 {
		for _, x := range []string{"x1", "x2"} {
			evs = append(evs, statusOf(x, fmt.Sprintf("n%02d", n), "running", 1, float64(n)))
		}
		if n%10 == 0 {
			evs = append(evs, statusOf("x1", fmt.Sprintf("n%02d", n), "running", 1, float64(n)))
		}
	}
	out := h.append(ctx, t, evs...)
	if len(out) != 150 {
		t.Fatalf("recorded %d events of %d (8 duplicates), want 150", len(out), len(evs))
	}
	all, err := h.s.Events(ctx, store.EventFilter{Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(out) {
		t.Fatalf("Events() = %d events, AppendHistory returned %d", len(all), len(out))
	}
	for i := range all {
		var st message.NodeStatus
		if err := json.Unmarshal(all[i].Body, &st); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("n%02d", i/2)
		if all[i].ID != out[i].ID || all[i].ExecutionID != out[i].ExecutionID || string(all[i].Body) != string(out[i].Body) || st.NodeID != want {
			t.Fatalf("event %d: stored %d %s %s, returned %d %s %s; want node %s", i, all[i].ID, all[i].ExecutionID, all[i].Body,
				out[i].ID, out[i].ExecutionID, out[i].Body, want)
		}
	}
}

// Events ascend; filters by execution and id; limits; bodies verbatim.
func testEventsOrder(ctx context.Context, t *testing.T, h *harness) {
	h.started(ctx, t, "x1")
	h.started(ctx, t, "x2")
	out := h.append(ctx, t, statusOf("x1", "a", "running", 1, 1), statusOf("x2", "a", "running", 1, 1),
		statusOf("x1", "a", "success", 1, 2))
	out = append(out, h.append(ctx, t, completionOf("x1", "completed", 3))...)
	if len(out) != 4 || out[3].Kind != "completion" {
		t.Fatalf("recorded %+v", out)
	}
	for i := 1; i < len(out); i++ {
		if out[i].ID <= out[i-1].ID {
			t.Fatalf("ids do not ascend: %+v", out)
		}
	}
	all, err := h.s.Events(ctx, store.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 4 || all[3].ID != out[3].ID {
		t.Fatalf("Events() = %d events %+v", len(all), all)
	}
	for i := 1; i < len(all); i++ {
		if all[i].ID <= all[i-1].ID {
			t.Fatalf("Events ids do not ascend: %+v", all)
		}
	}
	x1, err := h.s.Events(ctx, store.EventFilter{ExecutionID: "x1", AfterID: out[0].ID})
	if err != nil || len(x1) != 2 || x1[0].ID != out[2].ID || x1[1].ID != out[3].ID {
		t.Fatalf("Events(x1 after %d) = %+v, %v", out[0].ID, x1, err)
	}
	if !jsonEqual(x1[1].Body, completionOf("x1", "completed", 3).Body) || x1[1].ExecutionID != "x1" || !x1[1].At.Equal(at(3)) {
		t.Errorf("completion event %+v", x1[1])
	}
	var st message.NodeStatus
	if err := json.Unmarshal(x1[0].Body, &st); err != nil || st.Status != "success" || st.NodeID != "a" || x1[0].Kind != "status" {
		t.Errorf("status event %s (%v)", x1[0].Body, err)
	}
	two, err := h.s.Events(ctx, store.EventFilter{AfterID: all[0].ID, Limit: 2})
	if err != nil || len(two) != 2 || two[0].ID != all[1].ID || two[1].ID != all[2].ID {
		t.Errorf("Events(after, limit 2) = %+v, %v", two, err)
	}
	if none, err := h.s.Events(ctx, store.EventFilter{AfterID: all[3].ID}); err != nil || len(none) != 0 {
		t.Errorf("Events after the last = %+v, %v", none, err)
	}
}

// Events appended concurrently, through two handles where the store has
// them, are read back by a follower polling after its last id with no gap
// and no duplicate: ids ascend in commit order.
func testEventsConcurrent(ctx context.Context, t *testing.T, h *harness) {
	const writers, batches, per = 4, 10, 5
	stores := []store.Store{h.s, h.twin(t)}
	for w := range writers {
		h.started(ctx, t, name("x", w))
	}
	var last int64
	var wg sync.WaitGroup
	for w := range writers {
		s := stores[w%2]
		wg.Go(func() {
			for b := range batches {
				var evs []store.HistoryEvent
				for i := range per {
					evs = append(evs, statusOf(name("x", w), name("n", b*per+i), "running", 1, 1))
				}
				if _, err := s.AppendHistory(ctx, evs); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	seen := map[int64]bool{}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	deadline := time.Now().Add(60 * time.Second)
	for finished := false; ; {
		select {
		case <-done:
			finished = true
		default:
		}
		es, err := h.s.Events(ctx, store.EventFilter{AfterID: last})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if seen[e.ID] || e.ID <= last {
				t.Fatalf("event %d read twice or out of order (after %d)", e.ID, last)
			}
			seen[e.ID] = true
			last = e.ID
		}
		if finished && len(es) == 0 {
			break
		}
		if len(es) == 0 {
			time.Sleep(time.Millisecond) // poll, as a stream does between events
		}
		if time.Now().After(deadline) {
			t.Fatalf("follower saw %d of %d events in 60 s", len(seen), writers*batches*per)
		}
	}
	if len(seen) != writers*batches*per {
		t.Errorf("follower saw %d events, want %d (a gap: an id committed after a later one was read)", len(seen), writers*batches*per)
	}
}

// Batches for one execution appended at once, through two handles where the
// store has them (two servers consuming one queue), lose no update: the
// execution's cursor and counts end where the statuses say.
func testHistoryConcurrent(ctx context.Context, t *testing.T, h *harness) {
	const writers, nodes = 4, 25
	h.started(ctx, t, "x1")
	stores := []store.Store{h.s, h.twin(t)}
	var wg sync.WaitGroup
	for w := range writers {
		s := stores[w%2]
		wg.Go(func() {
			for n := range nodes {
				node := name(fmt.Sprintf("w%d_n", w), n)
				for _, status := range []string{"running", "success"} {
					if _, err := s.AppendHistory(ctx, []store.HistoryEvent{statusOf("x1", node, status, 1, float64(n))}); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	// Meanwhile a node that stays running.
	h.append(ctx, t, statusOf("x1", "slow", "running", 1, 0))
	wg.Wait()
	x := h.get(ctx, t, "x1")
	if !slices.Equal(x.Cursor, []string{"slow"}) || x.Status != store.StatusProcessing || len(x.Unfinished) != 1 || x.Unfinished["slow"]["running"] != 1 {
		t.Errorf("after concurrent batches: status %s cursor %v unfinished %v", x.Status, x.Cursor, x.Unfinished)
	}
	runs, err := h.s.NodeRuns(ctx, "x1")
	if err != nil || len(runs) != writers*nodes+1 {
		t.Fatalf("%d runs, %v", len(runs), err)
	}
}

// listIDs lists the ids of the executions f selects (one page).
func listIDs(ctx context.Context, t *testing.T, s store.Store, f store.ExecutionFilter) []string {
	t.Helper()
	f.Limit = store.ListLimitMax
	page, err := s.ListExecutions(ctx, f)
	if err != nil {
		t.Fatalf("ListExecutions(%+v): %v", f, err)
	}
	var out []string
	for _, x := range page.Items {
		out = append(out, x.ID)
	}
	return out
}
