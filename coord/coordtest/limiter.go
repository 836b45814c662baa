package coordtest

import (
	"sync"
	"testing"
	"time"

	"github.com/rune-org/rune/coord"
)

// RunLimiter is the conformance suite of coord.Limiter. newLimiter returns a
// limiter isolated from every other call's.
func RunLimiter(t *testing.T, newLimiter func(t *testing.T) coord.Limiter) {
	cases := []struct {
		name string
		fn   func(t *testing.T, l coord.Limiter)
	}{
		{"ReserveSpacing", testReserveSpacing},
		{"ReserveIdempotent", testReserveIdempotent},
		{"ReserveBurst", testReserveBurst},
		{"ReserveIdle", testReserveIdle},
		{"ReserveKeysIndependent", testReserveKeysIndependent},
		{"ReserveConcurrent", testReserveConcurrent},
		{"AdmitWindow", testAdmitWindow},
		{"AdmitConcurrent", testAdmitConcurrent},
		{"BadArguments", testLimiterBadArguments},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newLimiter(t))
		})
	}
}

// limiterT0 is a round time: stores keep microseconds.
var limiterT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

var tenPerSecond = coord.Rate{Limit: 10, Per: time.Second}

func mustReserve(t *testing.T, l coord.Limiter, key, id string, r coord.Rate, now time.Time) time.Duration {
	t.Helper()
	at, err := l.Reserve(ctxFor(t), key, id, r, now)
	if err != nil {
		t.Fatalf("Reserve(%q, %q): %v", key, id, err)
	}
	return at.Sub(limiterT0)
}

// Reservations made at once start Per/Limit apart, the first now.
func testReserveSpacing(t *testing.T, l coord.Limiter) {
	for i := range 20 {
		if got, want := mustReserve(t, l, "k", string(rune('a'+i)), tenPerSecond, limiterT0), time.Duration(i)*100*time.Millisecond; got != want {
			t.Fatalf("reservation %d starts at +%v, want +%v", i, got, want)
		}
	}
	// Later, the queue is what is left of it.
	if got := mustReserve(t, l, "k", "late", tenPerSecond, limiterT0.Add(time.Second)); got != 2*time.Second {
		t.Fatalf("a reservation at +1s starts at +%v, want +2s (after the 20 before it)", got)
	}
}

// An id gets its reservation again and takes no second slot.
func testReserveIdempotent(t *testing.T, l coord.Limiter) {
	mustReserve(t, l, "k", "a", tenPerSecond, limiterT0)
	if got := mustReserve(t, l, "k", "b", tenPerSecond, limiterT0); got != 100*time.Millisecond {
		t.Fatalf("b starts at +%v, want +100ms", got)
	}
	for _, now := range []time.Time{limiterT0, limiterT0.Add(100 * time.Millisecond), limiterT0.Add(time.Hour)} {
		if got := mustReserve(t, l, "k", "b", tenPerSecond, now); got != 100*time.Millisecond {
			t.Fatalf("b reserved again at %v starts at +%v, want its first time, +100ms", now, got)
		}
	}
	if got := mustReserve(t, l, "k", "c", tenPerSecond, limiterT0); got != 200*time.Millisecond {
		t.Fatalf("c starts at +%v, want +200ms (b took one slot)", got)
	}
}

// Burst runs start at once, then the spacing holds.
func testReserveBurst(t *testing.T, l coord.Limiter) {
	r := coord.Rate{Limit: 10, Per: time.Second, Burst: 3}
	want := []time.Duration{0, 0, 0, 100 * time.Millisecond, 200 * time.Millisecond}
	for i, w := range want {
		if got := mustReserve(t, l, "k", string(rune('a'+i)), r, limiterT0); got != w {
			t.Fatalf("reservation %d starts at +%v, want +%v", i, got, w)
		}
	}
}

// An idle key starts the next run now, without a burst of the time unused
// (Burst 1).
func testReserveIdle(t *testing.T, l coord.Limiter) {
	mustReserve(t, l, "k", "a", tenPerSecond, limiterT0)
	for i, id := range []string{"b", "c"} {
		if got, want := mustReserve(t, l, "k", id, tenPerSecond, limiterT0.Add(time.Minute)), time.Minute+time.Duration(i)*100*time.Millisecond; got != want {
			t.Fatalf("%s starts at +%v, want +%v", id, got, want)
		}
	}
}

func testReserveKeysIndependent(t *testing.T, l coord.Limiter) {
	mustReserve(t, l, "k1", "a", tenPerSecond, limiterT0)
	if got := mustReserve(t, l, "k2", "a", tenPerSecond, limiterT0); got != 0 {
		t.Fatalf("a on another key starts at +%v, want now", got)
	}
}

// Concurrent reservations each get a slot of their own.
func testReserveConcurrent(t *testing.T, l coord.Limiter) {
	const n = 40
	var wg sync.WaitGroup
	got := make([]time.Duration, n)
	for i := range n {
		wg.Go(func() {
			at, err := l.Reserve(ctxFor(t), "k", string(rune('A'+i)), tenPerSecond, limiterT0)
			if err != nil {
				t.Error(err)
			}
			got[i] = at.Sub(limiterT0)
		})
	}
	wg.Wait()
	seen := map[time.Duration]bool{}
	for _, d := range got {
		if d%(100*time.Millisecond) != 0 || d < 0 || d >= n*100*time.Millisecond || seen[d] {
			t.Fatalf("starts %v: want each of 0, 100ms … %v once", got, (n-1)*100*time.Millisecond)
		}
		seen[d] = true
	}
}

func mustAdmit(t *testing.T, l coord.Limiter, key, id string, r coord.Rate, now time.Time) coord.Admission {
	t.Helper()
	a, err := l.Admit(ctxFor(t), key, id, r, now)
	if err != nil {
		t.Fatalf("Admit(%q, %q): %v", key, id, err)
	}
	return a
}

// At most Limit ids in any window of Per; an admitted id is admitted again.
func testAdmitWindow(t *testing.T, l coord.Limiter) {
	r := coord.Rate{Limit: 3, Per: time.Hour}
	for i, id := range []string{"a", "b", "c"} {
		if a := mustAdmit(t, l, "u", id, r, limiterT0.Add(time.Duration(i)*time.Minute)); !a.OK {
			t.Fatalf("%s refused: %+v", id, a)
		}
	}
	a := mustAdmit(t, l, "u", "d", r, limiterT0.Add(3*time.Minute))
	if a.OK || !a.RetryAt.Equal(limiterT0.Add(time.Hour)) {
		t.Fatalf("d over the limit = %+v, want refused until %v", a, limiterT0.Add(time.Hour))
	}
	if a := mustAdmit(t, l, "u", "b", r, limiterT0.Add(4*time.Minute)); !a.OK {
		t.Fatalf("b again = %+v, want admitted (it is counted)", a)
	}
	if a := mustAdmit(t, l, "other", "d", r, limiterT0.Add(3*time.Minute)); !a.OK {
		t.Fatalf("d on another key = %+v, want admitted", a)
	}
	if a := mustAdmit(t, l, "u", "d", r, limiterT0.Add(time.Hour+time.Millisecond)); !a.OK {
		t.Fatalf("d once a left the window = %+v, want admitted", a)
	}
	a = mustAdmit(t, l, "u", "e", r, limiterT0.Add(time.Hour+2*time.Millisecond))
	if a.OK || !a.RetryAt.Equal(limiterT0.Add(time.Hour+time.Minute)) {
		t.Fatalf("e = %+v, want refused until b leaves the window at %v", a, limiterT0.Add(time.Hour+time.Minute))
	}
}

// Concurrent admissions never exceed the limit.
func testAdmitConcurrent(t *testing.T, l coord.Limiter) {
	const n, limit = 30, 5
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for i := range n {
		wg.Go(func() {
			a, err := l.Admit(ctxFor(t), "u", string(rune('A'+i)), coord.Rate{Limit: limit, Per: time.Minute}, limiterT0)
			if err != nil {
				t.Error(err)
			}
			if a.OK {
				mu.Lock()
				ok++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if ok != limit {
		t.Fatalf("%d of %d admitted, want %d", ok, n, limit)
	}
}

func testLimiterBadArguments(t *testing.T, l coord.Limiter) {
	bad := []struct {
		key, id string
		r       coord.Rate
	}{
		{"", "a", tenPerSecond},
		{"k", "", tenPerSecond},
		{"k", "a", coord.Rate{Limit: 0, Per: time.Second}},
		{"k", "a", coord.Rate{Limit: 1, Per: 0}},
		{"k", "a", coord.Rate{Limit: 2, Per: time.Second, Burst: 3}},
	}
	for _, b := range bad {
		if _, err := l.Reserve(ctxFor(t), b.key, b.id, b.r, limiterT0); err == nil {
			t.Errorf("Reserve(%q, %q, %+v): no error", b.key, b.id, b.r)
		}
		if _, err := l.Admit(ctxFor(t), b.key, b.id, b.r, limiterT0); err == nil && b.r.Burst == 0 {
			t.Errorf("Admit(%q, %q, %+v): no error", b.key, b.id, b.r)
		}
	}
}
