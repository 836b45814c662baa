package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rune-org/rune/store"
)

func testExecutionCreate(ctx context.Context, t *testing.T, h *harness) {
	h.workflow(ctx, t, "wf")
	if _, err := h.s.UpdateWorkflow(ctx, store.WorkflowInput{ID: "wf", Definition: definition}); err != nil {
		t.Fatal(err)
	}
	x := h.execution(ctx, t, store.ExecutionInput{ID: "x1", WorkflowID: "wf", Input: json.RawMessage(`{"user_id":"u1"}`),
		Trigger: "api", At: at(1)})
	if x.Status != store.StatusEnqueued || x.Version != 2 || x.Attempts != 1 || !x.AvailableAt.Equal(at(1)) ||
		!x.CreatedAt.Equal(at(1)) || x.Trigger != "api" || x.ClaimedBy != "" || x.DispatchedAt != nil {
		t.Fatalf("created %+v", x)
	}
	got := h.get(ctx, t, "x1")
	if got.Status != x.Status || got.Version != 2 || !jsonEqual(got.Input, x.Input) || !got.AvailableAt.Equal(x.AvailableAt) ||
		got.Attempts != 1 || got.Trigger != "api" || got.WorkflowID != "wf" || len(got.Cursor) != 0 || got.Completion != nil {
		t.Errorf("GetExecution = %+v, want %+v", got, x)
	}
	// An explicit version and a later start.
	y := h.execution(ctx, t, store.ExecutionInput{ID: "x2", WorkflowID: "wf", Version: 1, AvailableAt: at(60), At: at(2)})
	if y.Version != 1 || !y.AvailableAt.Equal(at(60)) || !jsonEqual(y.Input, json.RawMessage(`{}`)) {
		t.Errorf("created %+v", y)
	}
	// Creation records no event (see store.Event.Kind).
	if es, err := h.s.Events(ctx, store.EventFilter{ExecutionID: "x1"}); err != nil || len(es) != 0 {
		t.Fatalf("Events = %+v, %v", es, err)
	}
	_, err := h.s.GetExecution(ctx, "nope")
	wantErr(t, "GetExecution(unknown)", err, store.ErrNotFound, "nope")
}

func testExecutionCreateErrors(ctx context.Context, t *testing.T, h *harness) {
	h.workflow(ctx, t, "wf")
	h.workflow(ctx, t, "gone")
	if err := h.s.DeleteWorkflow(ctx, "gone", t0); err != nil {
		t.Fatal(err)
	}
	h.execution(ctx, t, store.ExecutionInput{ID: "x1", WorkflowID: "wf"})
	for _, tc := range []struct {
		in      store.ExecutionInput
		want    error
		mention string
	}{
		{store.ExecutionInput{WorkflowID: "wf"}, store.ErrInvalid, "execution id"},
		{store.ExecutionInput{ID: "x2"}, store.ErrInvalid, "workflow id"},
		{store.ExecutionInput{ID: "x2", WorkflowID: "wf", Input: json.RawMessage(`{`)}, store.ErrInvalid, "input"},
		{store.ExecutionInput{ID: "x2", WorkflowID: "nope"}, store.ErrNotFound, "nope"},
		{store.ExecutionInput{ID: "x2", WorkflowID: "gone"}, store.ErrNotFound, "gone"},
		{store.ExecutionInput{ID: "x2", WorkflowID: "wf", Version: 2}, store.ErrNotFound, "version 2"},
		{store.ExecutionInput{ID: "x1", WorkflowID: "wf"}, store.ErrConflict, "x1"},
	} {
		_, _, err := h.s.CreateExecution(ctx, tc.in)
		wantErr(t, "CreateExecution("+tc.in.ID+", "+tc.in.WorkflowID+")", err, tc.want, tc.mention)
	}
}

// A repeated idempotency key returns the first execution, per workflow.
func testExecutionIdempotency(ctx context.Context, t *testing.T, h *harness) {
	h.workflow(ctx, t, "wf")
	h.workflow(ctx, t, "other")
	first := h.execution(ctx, t, store.ExecutionInput{ID: "x1", WorkflowID: "wf", IdempotencyKey: "order-7"})
	again, created, err := h.s.CreateExecution(ctx, store.ExecutionInput{ID: "x2", WorkflowID: "wf", IdempotencyKey: "order-7", At: at(5)})
	if err != nil || created || again.ID != "x1" || !again.CreatedAt.Equal(first.CreatedAt) || again.IdempotencyKey != "order-7" {
		t.Fatalf("repeated key: %+v, created %v, %v", again, created, err)
	}
	if _, err := h.s.GetExecution(ctx, "x2"); err == nil {
		t.Error("the repeated key created x2")
	}
	h.execution(ctx, t, store.ExecutionInput{ID: "x3", WorkflowID: "other", IdempotencyKey: "order-7"})
	page, err := h.s.ListExecutions(ctx, store.ExecutionFilter{IdempotencyKey: "order-7"})
	if err != nil || len(page.Items) != 2 {
		t.Fatalf("ListExecutions(key) = %v, %v", ids(page.Items, execID), err)
	}
}

// Concurrent creates with one key create one execution.
func testExecutionIdempotencyConcurrent(ctx context.Context, t *testing.T, h *harness) {
	h.workflow(ctx, t, "wf")
	other := h.twin(t)
	var createdN atomic.Int32
	got := make([]string, 16)
	var wg sync.WaitGroup
	for i := range got {
		s := h.s
		if i%2 == 1 {
			s = other
		}
		wg.Go(func() {
			x, created, err := s.CreateExecution(ctx, store.ExecutionInput{ID: name("x", i), WorkflowID: "wf", IdempotencyKey: "k", At: t0})
			if err != nil {
				t.Error(err)
				return
			}
			if created {
				createdN.Add(1)
			}
			got[i] = x.ID
		})
	}
	wg.Wait()
	if createdN.Load() != 1 {
		t.Errorf("%d executions created for one key", createdN.Load())
	}
	for _, id := range got {
		if id != got[0] {
			t.Fatalf("creates returned %v, want one id", got)
		}
	}
}

// Many concurrent creates, some of which fail (unknown workflow, taken id,
// a repeated key), each get their own answer: a store that commits
// concurrent creates together must not let one bad row fail or hide the
// others, and every created execution is readable once its create returned.
func testExecutionCreateConcurrentMixed(ctx context.Context, t *testing.T, h *harness) {
	h.workflow(ctx, t, "wf")
	h.execution(ctx, t, store.ExecutionInput{ID: "taken", WorkflowID: "wf"})
	const n = 60
	var wg sync.WaitGroup
	var keyed atomic.Int32
	for i := range n {
		wg.Go(func() {
			in := store.ExecutionInput{ID: name("x", i), WorkflowID: "wf", At: at(float64(i))}
			switch i % 6 {
			case 1:
				in.WorkflowID = "nope"
			case 2:
				in.ID = "taken"
			case 3:
				in.IdempotencyKey = "same"
			}
			x, created, err := h.s.CreateExecution(ctx, in)
			switch i % 6 {
			case 1:
				if !errors.Is(err, store.ErrNotFound) {
					t.Errorf("CreateExecution(unknown workflow): %v, want ErrNotFound", err)
				}
				return
			case 2:
				if !errors.Is(err, store.ErrConflict) {
					t.Errorf("CreateExecution(taken id): %v, want ErrConflict", err)
				}
				return
			}
			if err != nil {
				t.Errorf("CreateExecution(%s): %v", in.ID, err)
				return
			}
			if i%6 == 3 {
				if created {
					keyed.Add(1)
				}
				return
			}
			if !created || x.ID != in.ID || x.Version != 1 {
				t.Errorf("CreateExecution(%s) = %+v, created %v", in.ID, x, created)
				return
			}
			if got, err := h.s.GetExecution(ctx, in.ID); err != nil || got.Status != store.StatusEnqueued {
				t.Errorf("GetExecution(%s) right after its create = %+v, %v", in.ID, got, err)
			}
		})
	}
	wg.Wait()
	if keyed.Load() != 1 {
		t.Errorf("%d executions created for one key", keyed.Load())
	}
}

func testExecutionList(ctx context.Context, t *testing.T, h *harness) {
	h.workflow(ctx, t, "a")
	h.workflow(ctx, t, "b")
	for i := range 6 {
		wf := "a"
		if i%2 == 1 {
			wf = "b"
		}
		h.execution(ctx, t, store.ExecutionInput{ID: name("x", i), WorkflowID: wf, At: at(float64(i))})
	}
	if _, err := h.s.CancelExecution(ctx, "x0002", at(10)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		f    store.ExecutionFilter
		want []string
	}{
		{"all, newest first", store.ExecutionFilter{}, []string{"x0005", "x0004", "x0003", "x0002", "x0001", "x0000"}},
		{"by workflow", store.ExecutionFilter{WorkflowID: "b"}, []string{"x0005", "x0003", "x0001"}},
		{"by status", store.ExecutionFilter{Status: store.StatusCancelled}, []string{"x0002"}},
		{"by workflow and status", store.ExecutionFilter{WorkflowID: "a", Status: store.StatusEnqueued}, []string{"x0004", "x0000"}},
		{"created after", store.ExecutionFilter{CreatedAfter: at(3)}, []string{"x0005", "x0004"}},
		{"created before", store.ExecutionFilter{CreatedBefore: at(2)}, []string{"x0001", "x0000"}},
		{"between", store.ExecutionFilter{CreatedAfter: at(1), CreatedBefore: at(4)}, []string{"x0003", "x0002"}},
		{"nothing", store.ExecutionFilter{WorkflowID: "nope"}, nil},
	} {
		page, err := h.s.ListExecutions(ctx, tc.f)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := ids(page.Items, execID); !slices.Equal(got, tc.want) || page.Next != "" {
			t.Errorf("%s: %v (next %q), want %v", tc.name, got, page.Next, tc.want)
		}
	}
	_, err := h.s.ListExecutions(ctx, store.ExecutionFilter{Cursor: "%%%"})
	wantErr(t, "ListExecutions(bad cursor)", err, store.ErrInvalid, "cursor")
	_, err = h.s.ListExecutions(ctx, store.ExecutionFilter{Status: "done"})
	wantErr(t, "ListExecutions(bad status)", err, store.ErrInvalid, `status: "done"`)
}

// Pages hold every execution once, also among executions created at the same
// time, and a page boundary holds while executions are added.
func testExecutionListPages(ctx context.Context, t *testing.T, h *harness) {
	h.workflow(ctx, t, "wf")
	var want []string
	for i := range 23 {
		x := h.execution(ctx, t, store.ExecutionInput{ID: name("x", i), WorkflowID: "wf", At: at(float64(i / 5))})
		want = append(want, x.ID)
	}
	slices.Reverse(want) // newest first; ties by id, descending
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		page, err := h.s.ListExecutions(ctx, store.ExecutionFilter{WorkflowID: "wf", Limit: 4, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ids(page.Items, execID)...)
		if pages == 0 {
			// Newer executions do not shift the pages that follow.
			h.execution(ctx, t, store.ExecutionInput{ID: "newer", WorkflowID: "wf", At: at(100)})
		}
		if cursor = page.Next; cursor == "" {
			break
		}
		if pages > 10 {
			t.Fatal("pages do not end")
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("pages gave %v\nwant %v", got, want)
	}
	page, err := h.s.ListExecutions(ctx, store.ExecutionFilter{Limit: 1000})
	if err != nil || len(page.Items) != 24 {
		t.Errorf("limit 1000 (capped at %d) gave %d, %v", store.ListLimitMax, len(page.Items), err)
	}
}

func testExecutionCancel(ctx context.Context, t *testing.T, h *harness) {
	h.workflow(ctx, t, "wf")
	h.execution(ctx, t, store.ExecutionInput{ID: "queued", WorkflowID: "wf"})
	h.execution(ctx, t, store.ExecutionInput{ID: "running", WorkflowID: "wf"})
	x, err := h.s.CancelExecution(ctx, "queued", at(1))
	if err != nil || x.Status != store.StatusCancelled || !equalTimePtr(x.FinishedAt, at(1)) {
		t.Fatalf("cancel enqueued = %+v, %v", x, err)
	}
	if got := h.get(ctx, t, "queued"); got.Status != store.StatusCancelled || !equalTimePtr(got.FinishedAt, at(1)) {
		t.Errorf("stored %+v", got)
	}
	// A cancelled execution is never claimed.
	claimed, err := h.s.ClaimExecutions(ctx, store.Claim{Owner: "d1", Now: at(2), Lease: time.Minute, Limit: 10})
	if err != nil || !slices.Equal(ids(claimed, execID), []string{"running"}) {
		t.Fatalf("claimed %v, %v", ids(claimed, execID), err)
	}
	x, err = h.s.CancelExecution(ctx, "running", at(3))
	if err != nil || x.Status != store.StatusProcessing || !x.CancelRequested || x.FinishedAt != nil {
		t.Fatalf("cancel running = %+v, %v", x, err)
	}
	if x, err = h.s.CancelExecution(ctx, "running", at(4)); err != nil || !x.CancelRequested {
		t.Fatalf("cancel twice = %+v, %v", x, err)
	}
	if got := h.get(ctx, t, "running"); !got.CancelRequested || got.Status != store.StatusProcessing {
		t.Errorf("stored %+v", got)
	}
	x, err = h.s.CancelExecution(ctx, "queued", at(5))
	wantErr(t, "cancel cancelled", err, store.ErrConflict, "queued")
	if x == nil || x.ID != "queued" {
		t.Errorf("cancel of a finished execution returned %+v, want it", x)
	}
	_, err = h.s.CancelExecution(ctx, "nope", at(5))
	wantErr(t, "cancel unknown", err, store.ErrNotFound, "nope")
	// Each cancel is an event: cancelled / cancel requested (once).
	for id, want := range map[string][]string{"queued": {store.ChangeCancelled}, "running": {store.ChangeCancelRequested}} {
		es, err := h.s.Events(ctx, store.EventFilter{ExecutionID: id})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range es {
			var ch store.ExecutionChange
			if err := json.Unmarshal(e.Body, &ch); err != nil {
				t.Fatal(err)
			}
			got = append(got, ch.Change)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: changes %v, want %v", id, got, want)
		}
	}
}
