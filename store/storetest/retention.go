package storetest

import (
	"context"
	"testing"

	"github.com/rune-org/rune/store"
)

// PruneHistory removes the node runs and events of executions finished
// before the cut-off, in batches of the limit, oldest first; running and
// newer executions keep theirs; the executions themselves stay.
func testPruneHistory(ctx context.Context, t *testing.T, h *harness) {
	for i, id := range []string{"old1", "old2", "old3", "new", "running"} {
		h.started(ctx, t, id)
		h.append(ctx, t, statusOf(id, "a", "running", 1, float64(i)), statusOf(id, "a", "success", 1, float64(i)+0.5))
	}
	h.append(ctx, t, completionOf("old1", "completed", 10), completionOf("old2", "failed", 11), completionOf("old3", "completed", 12))
	h.append(ctx, t, completionOf("new", "completed", 100))
	prune := func(limit, want int) {
		t.Helper()
		n, err := h.s.PruneHistory(ctx, at(50), limit)
		if err != nil || n != want {
			t.Fatalf("PruneHistory(limit %d) = %d, %v; want %d", limit, n, err, want)
		}
	}
	prune(2, 2)
	if runs := h.runs(ctx, t, "old1"); len(runs) != 0 {
		t.Errorf("old1 keeps %d node runs after the first batch (oldest first)", len(runs))
	}
	if runs := h.runs(ctx, t, "old3"); len(runs) != 1 {
		t.Errorf("old3 has %d node runs before its batch, want 1", len(runs))
	}
	prune(2, 1)
	prune(2, 0)
	for id, want := range map[string]int{"old1": 0, "old2": 0, "old3": 0, "new": 1, "running": 1} {
		if runs := h.runs(ctx, t, id); len(runs) != want {
			t.Errorf("%s: %d node runs, want %d", id, len(runs), want)
		}
		evs, err := h.s.Events(ctx, store.EventFilter{ExecutionID: id})
		if err != nil {
			t.Fatal(err)
		}
		if (want == 0) != (len(evs) == 0) {
			t.Errorf("%s: %d events left", id, len(evs))
		}
		if x := h.get(ctx, t, id); id != "running" && !store.Final(x.Status) {
			t.Errorf("%s: status %s after pruning, want it kept final", id, x.Status)
		}
	}
	if _, err := h.s.PruneHistory(ctx, at(50), 0); err == nil {
		t.Error("PruneHistory(limit 0): no error")
	}
}
