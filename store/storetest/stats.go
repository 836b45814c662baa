package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/rune-org/rune/store"
)

// Stats (the console's dashboard): counts per workflow and status in a
// window and its recent part, run times of finished executions, and the
// nodes ranked by failed runs.
func testStats(ctx context.Context, t *testing.T, h *harness) {
	st, ok := h.s.(store.Stats)
	if !ok {
		t.Fatalf("%T does not implement store.Stats", h.s)
	}
	for _, id := range []string{"a", "b", "c"} {
		h.started(ctx, t, id)
	}
	h.append(ctx, t, statusOf("a", "n", "running", 1, 1), statusOf("a", "n", "success", 1, 2), completionOf("a", "completed", 10))
	h.append(ctx, t, statusOf("b", "n", "failed", 1, 3), completionOf("b", "failed", 20))
	h.append(ctx, t, statusOf("c", "n", "failed", 1, 4), statusOf("c", "m", "failed", 1, 5))

	counts, err := st.StatusCounts(ctx, t0.Add(-time.Hour), t0.Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][2]int{}
	for _, c := range counts {
		got[c.WorkflowID+"/"+c.Status] = [2]int{c.Count, c.Recent}
	}
	c := h.get(ctx, t, "c").Status
	want := map[string][2]int{"wf/completed": {1, 1}, "wf/failed": {1, 1}, "wf/" + c: {1, 1}}
	if len(got) != len(want) {
		t.Errorf("status counts %v, want %v", got, want)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("status counts %v, want %v", got, want)
			break
		}
	}
	// Recent is a part of the window: none created in the last second
	// before t0.
	counts, err = st.StatusCounts(ctx, t0.Add(-time.Hour), t0.Add(time.Second))
	if err != nil || len(counts) == 0 || counts[0].Recent != 0 {
		t.Errorf("recent after every creation: %+v, %v", counts, err)
	}
	if counts, err := st.StatusCounts(ctx, t0.Add(time.Second), t0.Add(time.Second)); err != nil || len(counts) != 0 {
		t.Errorf("a window after every creation: %+v, %v", counts, err)
	}

	ds, err := st.Durations(ctx, t0.Add(-time.Hour), 100)
	if err != nil {
		t.Fatal(err)
	}
	var runs []time.Duration
	for _, d := range ds {
		if d.WorkflowID != "wf" {
			t.Errorf("duration of workflow %q", d.WorkflowID)
		}
		runs = append(runs, d.D)
	}
	slices.Sort(runs)
	if !slices.Equal(runs, []time.Duration{10 * time.Second, 20 * time.Second}) {
		t.Errorf("durations %v, want 10s and 20s (dispatch to finish)", runs)
	}
	if p50, p95 := store.Percentile(runs, 50), store.Percentile(runs, 95); p50 != 10*time.Second || p95 != 20*time.Second {
		t.Errorf("p50 %v p95 %v, want 10s and 20s", p50, p95)
	}
	if ds, err := st.Durations(ctx, t0.Add(-time.Hour), 1); err != nil || len(ds) != 1 {
		t.Errorf("durations limited to 1: %+v, %v", ds, err)
	}

	nodes, err := st.FailingNodes(ctx, t0.Add(-time.Hour), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 2 || nodes[0].NodeID != "n" || nodes[0].Failed != 2 || nodes[1].NodeID != "m" || nodes[1].Failed != 1 ||
		!nodes[0].Last.Equal(at(4)) {
		t.Errorf("failing nodes %+v, want n (2, last at %v) then m (1)", nodes, at(4))
	}
}
