package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/rune-org/rune/store"
)

// Issue 35: an execution created due takes a free slot of its key at once;
// one created while its key's slots are taken is created queued, held, so
// no claim takes it before the key's turn; another key's is created due,
// and the held one is promoted, in arrival order, when a slot frees.
func testFlowHoldAtCreate(ctx context.Context, t *testing.T, h *harness) {
	fs, ok := h.s.(store.FlowStore)
	if !ok {
		t.Skip("the store has no flow control")
	}
	h.workflow(ctx, t, "wf")
	create := func(id, key string, sec float64) *store.Execution {
		t.Helper()
		x, created, _, err := fs.CreateFlowExecution(ctx, store.ExecutionInput{ID: id, WorkflowID: "wf", At: at(sec)},
			store.FlowCreate{ConcurrencyKey: key, Limit: 2})
		if err != nil || !created {
			t.Fatalf("CreateFlowExecution(%s): %v (created %v)", id, err, created)
		}
		return x
	}
	admit := func(id string, sec float64) {
		t.Helper()
		a, err := fs.Admit(ctx, h.get(ctx, t, id), store.Admission{Key: "A", Limit: 2, Owner: "d1", Now: at(sec)})
		if err != nil || !a.Run {
			t.Fatalf("Admit(%s) = %+v, %v; want Run", id, a, err)
		}
	}
	for i, id := range []string{"a1", "a2"} {
		if x := create(id, "A", float64(1+i)); !x.AvailableAt.Equal(at(float64(1 + i))) {
			t.Fatalf("%s (free slots) available at %v, want its creation", id, x.AvailableAt)
		}
	}
	// The slots are taken at create, before any claim: a third is held.
	if x := create("c1", "C", 3); !x.AvailableAt.Equal(at(3)) {
		t.Fatalf("c1 available at %v, want its creation", x.AvailableAt)
	}
	create("c2", "C", 3)
	if x := create("c3", "C", 3); !x.AvailableAt.Equal(store.HeldUntil) {
		t.Fatalf("c3 (key C's two slots taken at create) available at %v, want held", x.AvailableAt)
	}
	if got := claim(ctx, t, h.s, "d1", at(5), time.Minute, 10); !slices.Equal(got, []string{"a1", "a2", "c1", "c2"}) {
		t.Fatalf("claimed %v, want a1 a2 c1 c2", got)
	}
	admit("a1", 5)
	admit("a2", 5)
	if x := create("a3", "A", 6); !x.AvailableAt.Equal(store.HeldUntil) {
		t.Fatalf("a3 (key A full) available at %v, want held", x.AvailableAt)
	}
	if x := create("b1", "B", 7); !x.AvailableAt.Equal(at(7)) {
		t.Fatalf("b1 (key B free) available at %v, want its creation", x.AvailableAt)
	}
	create("a4", "A", 8)
	st, err := fs.FlowState(ctx, "a4")
	if err != nil || !st.Queued || st.Key != "A" || st.Limit != 2 || st.Running != 2 || st.Position != 2 {
		t.Fatalf("FlowState(a4) = %+v, %v; want queued for A at position 2 behind a3, 2 running", st, err)
	}
	if got := claim(ctx, t, h.s, "d1", at(10), time.Minute, 10); !slices.Equal(got, []string{"b1"}) {
		t.Fatalf("claimed %v while key A is full, want only b1", got)
	}
	if n, err := fs.Promote(ctx, at(10), 10); err != nil || n != 0 {
		t.Fatalf("Promote with no free slot = %d, %v; want 0", n, err)
	}
	if err := h.s.MarkDispatched(ctx, "a1", "d1", at(5)); err != nil {
		t.Fatal(err)
	}
	h.append(ctx, t, completionOf("a1", store.StatusCompleted, 11))
	if n, err := fs.Promote(ctx, at(12), 10); err != nil || n != 1 {
		t.Fatalf("Promote after a1 ended = %d, %v; want 1", n, err)
	}
	if got := claim(ctx, t, h.s, "d1", at(12), time.Minute, 10); !slices.Equal(got, []string{"a3"}) {
		t.Fatalf("claimed %v after a1 ended, want a3 (arrival order)", got)
	}
	admit("a3", 12)
	if st, err := fs.FlowState(ctx, "a4"); err != nil || !st.Queued || st.Position != 1 {
		t.Fatalf("FlowState(a4) = %+v, %v; want queued at position 1", st, err)
	}
}

// Issue 35: Priorities reads the priorities other than the default of the
// executions asked about (the dispatcher's batch).
func testFlowPriorities(ctx context.Context, t *testing.T, h *harness) {
	fs, ok := h.s.(store.FlowStore)
	if !ok {
		t.Skip("the store has no flow control")
	}
	h.workflow(ctx, t, "wf")
	for id, p := range map[string]int{"hi": 9, "lo": 1, "def": 0} {
		if _, _, _, err := fs.CreateFlowExecution(ctx, store.ExecutionInput{ID: id, WorkflowID: "wf", At: at(1)}, store.FlowCreate{Priority: p}); err != nil {
			t.Fatalf("CreateFlowExecution(%s): %v", id, err)
		}
	}
	h.execution(ctx, t, store.ExecutionInput{ID: "plain", WorkflowID: "wf"})
	got, err := fs.Priorities(ctx, []string{"hi", "def", "plain", "lo", "nope"})
	if err != nil || len(got) != 2 || got["hi"] != 9 || got["lo"] != 1 {
		t.Fatalf("Priorities = %v, %v; want hi 9 and lo 1 only", got, err)
	}
	if got, err := fs.Priorities(ctx, nil); err != nil || len(got) != 0 {
		t.Fatalf("Priorities(none) = %v, %v; want empty", got, err)
	}
}
