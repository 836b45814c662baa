package memory

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rune-org/rune/coord"
)

// Timers implements coord.Timers in process, for the embedded runtime: a map
// of timers by id plus two heaps, the scheduled timers by due time and the
// claimed ones by lease deadline. Schedule, Claim (per timer) and Done are
// O(log n), so a million pending timers cost only their memory (about 150
// bytes each plus the payload).
//
// One mutex guards it all: every operation is short, and the scheduler that
// calls Claim is a single loop. Time is only what callers pass in (due, now):
// Timers starts no goroutine and needs no Close.
//
// Payloads are copied in Schedule and again in Claim, so callers may reuse or
// modify their slices.
type Timers struct {
	mu      sync.Mutex
	byID    map[string]*timer
	sched   timerHeap // by due
	claimed timerHeap // by lease deadline
}

var _ coord.Timers = (*Timers)(nil)

// timer is one stored timer. It is in exactly one heap, at index idx.
type timer struct {
	id       string
	due      int64 // Unix ms
	deadline int64 // Unix ms; the lease's end while claimed
	claims   int
	idx      int
	payload  []byte
}

// NewTimers returns an empty Timers.
func NewTimers() *Timers {
	return &Timers{
		byID:    make(map[string]*timer),
		sched:   timerHeap{key: func(t *timer) int64 { return t.due }},
		claimed: timerHeap{key: func(t *timer) int64 { return t.deadline }},
	}
}

// Schedule implements coord.Timers.
func (ts *Timers) Schedule(ctx context.Context, id string, due time.Time, payload []byte) error {
	if id == "" {
		return errors.New("coord/memory: Timers.Schedule: empty timer id")
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("coord/memory: Timers.Schedule %q: %w", id, err)
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if _, ok := ts.byID[id]; ok {
		return nil
	}
	t := &timer{id: id, due: due.UnixMilli(), payload: slices.Clone(payload)}
	ts.byID[id] = t
	heap.Push(&ts.sched, t)
	return nil
}

// Claim implements coord.Timers.
func (ts *Timers) Claim(ctx context.Context, now time.Time, limit int, lease time.Duration) ([]coord.Timer, error) {
	if limit < 1 || lease <= 0 {
		return nil, fmt.Errorf("coord/memory: Timers.Claim: max %d and lease %v, want max at least 1 and a positive lease", limit, lease)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("coord/memory: Timers.Claim: %w", err)
	}
	nowMs := now.UnixMilli()
	deadline := nowMs + max(lease.Milliseconds(), 1)

	ts.mu.Lock()
	defer ts.mu.Unlock()
	// Expired leases come off their heap by deadline, not by due: take up to
	// limit of them and merge them by due with the scheduled heap, whose top
	// is always its earliest due. Those not taken go back.
	var expired []*timer
	for len(expired) < limit && ts.claimed.Len() > 0 && ts.claimed.items[0].deadline <= nowMs {
		expired = append(expired, heap.Pop(&ts.claimed).(*timer))
	}
	slices.SortFunc(expired, func(a, b *timer) int { return cmp.Compare(a.due, b.due) })

	out := make([]coord.Timer, 0, min(limit, len(expired)+ts.sched.Len()))
	for len(out) < limit {
		var t *timer
		switch {
		case ts.sched.Len() > 0 && ts.sched.items[0].due <= nowMs &&
			(len(expired) == 0 || ts.sched.items[0].due < expired[0].due):
			t = heap.Pop(&ts.sched).(*timer)
		case len(expired) > 0:
			t, expired = expired[0], expired[1:]
		}
		if t == nil {
			break
		}
		t.claims++
		t.deadline = deadline
		heap.Push(&ts.claimed, t)
		out = append(out, coord.Timer{
			ID:      t.id,
			Due:     time.UnixMilli(t.due),
			Payload: slices.Clone(t.payload),
			Claims:  t.claims,
		})
	}
	for _, t := range expired {
		heap.Push(&ts.claimed, t)
	}
	return out, nil
}

// Extend implements coord.Timers.
func (ts *Timers) Extend(ctx context.Context, now time.Time, lease time.Duration, held ...coord.Timer) ([]string, error) {
	if lease <= 0 {
		return nil, fmt.Errorf("coord/memory: Timers.Extend: lease %v, want a positive lease", lease)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("coord/memory: Timers.Extend: %w", err)
	}
	deadline := now.UnixMilli() + max(lease.Milliseconds(), 1)
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var lost []string
	for _, h := range held {
		t, ok := ts.byID[h.ID]
		if !ok || t.claims == 0 || t.claims != h.Claims {
			lost = append(lost, h.ID)
			continue
		}
		t.deadline = deadline
		heap.Fix(&ts.claimed, t.idx)
	}
	return lost, nil
}

// Done implements coord.Timers.
func (ts *Timers) Done(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("coord/memory: Timers.Done %q: %w", id, err)
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t, ok := ts.byID[id]
	if !ok {
		return nil
	}
	delete(ts.byID, id)
	if t.claims > 0 {
		heap.Remove(&ts.claimed, t.idx)
	} else {
		heap.Remove(&ts.sched, t.idx)
	}
	return nil
}

// Wake implements coord.Timers.
func (ts *Timers) Wake(ctx context.Context, now time.Time, ids ...string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("coord/memory: Timers.Wake: %w", err)
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	at := now.UnixMilli()
	for _, id := range ids {
		if t, ok := ts.byID[id]; ok && t.claims == 0 && t.due > at {
			t.due = at
			heap.Fix(&ts.sched, t.idx)
		}
	}
	return nil
}

// Stats implements coord.Timers.
func (ts *Timers) Stats(ctx context.Context) (coord.TimerStats, error) {
	if err := ctx.Err(); err != nil {
		return coord.TimerStats{}, fmt.Errorf("coord/memory: Timers.Stats: %w", err)
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	s := coord.TimerStats{Scheduled: int64(ts.sched.Len()), Claimed: int64(ts.claimed.Len())}
	if ts.sched.Len() > 0 {
		s.NextDue = time.UnixMilli(ts.sched.items[0].due)
	}
	return s, nil
}

// timerHeap is a min-heap of timers by key, tracking each timer's index so
// that Done can remove it from the middle.
type timerHeap struct {
	items []*timer
	key   func(*timer) int64
}

func (h *timerHeap) Len() int { return len(h.items) }

func (h *timerHeap) Less(i, j int) bool {
	a, b := h.key(h.items[i]), h.key(h.items[j])
	if a != b {
		return a < b
	}
	// Ties by id, so that equal due times claim in a stable order.
	return h.items[i].id < h.items[j].id
}

func (h *timerHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].idx = i
	h.items[j].idx = j
}

func (h *timerHeap) Push(x any) {
	t := x.(*timer)
	t.idx = len(h.items)
	h.items = append(h.items, t)
}

func (h *timerHeap) Pop() any {
	n := len(h.items) - 1
	t := h.items[n]
	h.items[n] = nil // let the timer be collected once Done
	h.items = h.items[:n]
	return t
}
