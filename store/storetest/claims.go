package storetest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rune-org/rune/store"
)

func claim(ctx context.Context, t *testing.T, s store.Store, owner string, now time.Time, lease time.Duration, limit int) []string {
	t.Helper()
	xs, err := s.ClaimExecutions(ctx, store.Claim{Owner: owner, Now: now, Lease: lease, Limit: limit})
	if err != nil {
		t.Fatalf("ClaimExecutions(%s): %v", owner, err)
	}
	for _, x := range xs {
		if x.Status != store.StatusProcessing || x.ClaimedBy != owner || x.ClaimUntil == nil || !x.ClaimUntil.Equal(now.Add(lease)) {
			t.Errorf("claimed %s: %+v", x.ID, x)
		}
	}
	return ids(xs, execID)
}

// Due executions are claimed oldest available_at first, up to the limit;
// future ones wait.
func testClaimDue(ctx context.Context, t *testing.T, h *harness) {
	h.workflow(ctx, t, "wf")
	for i, avail := range []float64{30, 10, 20, 100} {
		h.execution(ctx, t, store.ExecutionInput{ID: name("x", i), WorkflowID: "wf", AvailableAt: at(avail)})
	}
	if got := claim(ctx, t, h.s, "d1", at(5), time.Minute, 10); len(got) != 0 {
		t.Fatalf("claimed %v before anything was due", got)
	}
	if got := claim(ctx, t, h.s, "d1", at(30), time.Minute, 2); !slices.Equal(got, []string{"x0001", "x0002"}) {
		t.Fatalf("claimed %v, want x0001 x0002 (oldest first, limit 2)", got)
	}
	if got := claim(ctx, t, h.s, "d1", at(30), time.Minute, 10); !slices.Equal(got, []string{"x0000"}) {
		t.Fatalf("claimed %v, want x0000", got)
	}
	if got := claim(ctx, t, h.s, "d2", at(40), time.Minute, 10); len(got) != 0 {
		t.Fatalf("claimed %v while their claims hold", got)
	}
	x := h.get(ctx, t, "x0001")
	if x.Status != store.StatusProcessing || x.ClaimedBy != "d1" || !equalTimePtr(x.ClaimUntil, at(90)) {
		t.Errorf("stored claim %+v", x)
	}
}

// Many claimers, through two handles where the store has them (two
// processes), claim each of 1,000 executions exactly once.
func testClaimConcurrent(ctx context.Context, t *testing.T, h *harness) {
	const n = 1000
	h.workflow(ctx, t, "wf")
	for i := range n {
		h.execution(ctx, t, store.ExecutionInput{ID: name("x", i), WorkflowID: "wf", AvailableAt: at(float64(i % 17))})
	}
	stores := []store.Store{h.s, h.twin(t)}
	var mu sync.Mutex
	count := map[string]int{}
	var wg sync.WaitGroup
	for g := range 8 {
		s := stores[g%2]
		wg.Go(func() {
			for {
				xs, err := s.ClaimExecutions(ctx, store.Claim{Owner: name("d", g), Now: at(60), Lease: time.Hour, Limit: 25})
				if err != nil {
					t.Error(err)
					return
				}
				if len(xs) == 0 {
					return
				}
				mu.Lock()
				for _, x := range xs {
					count[x.ID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(count) != n {
		t.Errorf("%d of %d executions claimed", len(count), n)
	}
	for id, c := range count {
		if c != 1 {
			t.Errorf("%s claimed %d times", id, c)
		}
	}
}

// A claim whose execution was never marked dispatched runs out and another
// dispatcher takes it; the first one's late MarkDispatched is then a conflict.
// Once dispatched, an execution is never claimed again.
func testClaimExpired(ctx context.Context, t *testing.T, h *harness) {
	h.workflow(ctx, t, "wf")
	h.execution(ctx, t, store.ExecutionInput{ID: "x1", WorkflowID: "wf"})
	other := h.twin(t)
	if got := claim(ctx, t, h.s, "d1", at(1), 10*time.Second, 10); !slices.Equal(got, []string{"x1"}) {
		t.Fatalf("claimed %v", got)
	}
	if got := claim(ctx, t, other, "d2", at(10), 10*time.Second, 10); len(got) != 0 {
		t.Fatalf("d2 took %v while d1's claim held", got)
	}
	if got := claim(ctx, t, other, "d2", at(12), 10*time.Second, 10); !slices.Equal(got, []string{"x1"}) {
		t.Fatalf("d2 claimed %v after d1's claim ended", got)
	}
	wantErr(t, "MarkDispatched by the stale owner", h.s.MarkDispatched(ctx, "x1", "d1", at(13)), store.ErrConflict, "x1")
	if err := other.MarkDispatched(ctx, "x1", "d2", at(13)); err != nil {
		t.Fatal(err)
	}
	if err := other.MarkDispatched(ctx, "x1", "d2", at(14)); err != nil {
		t.Fatalf("MarkDispatched twice: %v", err)
	}
	x := h.get(ctx, t, "x1")
	if !equalTimePtr(x.DispatchedAt, at(13)) || x.ClaimedBy != "d2" || x.Status != store.StatusProcessing {
		t.Errorf("stored %+v", x)
	}
	if got := claim(ctx, t, h.s, "d3", at(1000), time.Second, 10); len(got) != 0 {
		t.Fatalf("a dispatched execution was claimed again: %v", got)
	}
	wantErr(t, "MarkDispatched(unknown)", h.s.MarkDispatched(ctx, "nope", "d1", at(1)), store.ErrNotFound, "nope")
}

// MarkDispatchedAll marks the caller's claims in one call and names the ids
// it did not mark: another owner's claim and unknown executions.
func testMarkDispatchedAll(ctx context.Context, t *testing.T, h *harness) {
	h.workflow(ctx, t, "wf")
	for i := range 4 {
		h.execution(ctx, t, store.ExecutionInput{ID: name("x", i), WorkflowID: "wf", At: at(float64(i))})
	}
	if got := claim(ctx, t, h.s, "d1", at(10), time.Minute, 3); len(got) != 3 {
		t.Fatalf("claimed %v", got)
	}
	if got := claim(ctx, t, h.s, "d2", at(10), time.Minute, 3); !slices.Equal(got, []string{"x0003"}) {
		t.Fatalf("d2 claimed %v", got)
	}
	if err := h.s.MarkDispatched(ctx, "x0000", "d1", at(11)); err != nil {
		t.Fatal(err)
	}
	notMarked, err := h.s.MarkDispatchedAll(ctx, []string{"x0000", "x0001", "x0002", "x0003", "nope"}, "d1", at(12))
	if err != nil || !slices.Equal(notMarked, []string{"x0003", "nope"}) {
		t.Fatalf("MarkDispatchedAll = %v, %v; want [x0003 nope] not marked", notMarked, err)
	}
	for id, want := range map[string]time.Time{"x0000": at(11), "x0001": at(12), "x0002": at(12)} {
		if x := h.get(ctx, t, id); !equalTimePtr(x.DispatchedAt, want) {
			t.Errorf("%s dispatched at %v, want %v", id, x.DispatchedAt, want)
		}
	}
	if x := h.get(ctx, t, "x0003"); x.DispatchedAt != nil || x.ClaimedBy != "d2" {
		t.Errorf("another owner's claim was marked: %+v", x)
	}
	if notMarked, err := h.s.MarkDispatchedAll(ctx, nil, "d1", at(13)); err != nil || len(notMarked) != 0 {
		t.Errorf("MarkDispatchedAll(none) = %v, %v", notMarked, err)
	}
}

func testClaimInvalid(ctx context.Context, t *testing.T, h *harness) {
	for _, tc := range []struct {
		c       store.Claim
		mention string
	}{
		{store.Claim{Lease: time.Second, Limit: 1}, "owner"},
		{store.Claim{Owner: "d", Limit: 1}, "lease"},
		{store.Claim{Owner: "d", Lease: time.Second}, "limit"},
	} {
		_, err := h.s.ClaimExecutions(ctx, tc.c)
		wantErr(t, "ClaimExecutions without "+tc.mention, err, store.ErrInvalid, tc.mention)
	}
}
