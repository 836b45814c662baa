package coordtest

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rune-org/rune/coord"
)

// RunTimers runs the conformance suite of coord.Timers. newTimers returns a
// store isolated from every other call's (a fresh instance, or a fresh key
// prefix); it registers its own cleanup with t. Subtests run in parallel.
//
// Time is only what the suite passes as due and now, so lease expiry is
// tested without sleeping.
func RunTimers(t *testing.T, newTimers func(t *testing.T) coord.Timers) {
	cases := []struct {
		name string
		fn   func(t *testing.T, ts coord.Timers)
	}{
		{"ClaimOnlyWhenDue", testTimersClaimOnlyWhenDue},
		{"EarliestFirstAndMax", testTimersEarliestFirstAndMax},
		{"DrainInBatches", testTimersDrainInBatches},
		{"IdempotentSchedule", testTimersIdempotentSchedule},
		{"Done", testTimersDone},
		{"Wake", testTimersWake},
		{"LeaseExpiry", testTimersLeaseExpiry},
		{"ExpiredLeaseOrderedByDue", testTimersExpiredLeaseOrderedByDue},
		{"ExtendFences", testTimersExtendFences},
		{"ConcurrentClaimers", testTimersConcurrentClaimers},
		{"PastDue", testTimersPastDue},
		{"Stats", testTimersStats},
		{"InvalidArguments", testTimersInvalidArguments},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newTimers(t))
		})
	}
}

// timersBase is the suite's "now": a realistic epoch time on a millisecond.
var timersBase = time.UnixMilli(1_760_000_000_000)

const timersLease = 30 * time.Second

func timersSchedule(t *testing.T, ts coord.Timers, id string, due time.Time, payload []byte) {
	t.Helper()
	if err := ts.Schedule(ctxFor(t), id, due, payload); err != nil {
		t.Fatalf("Schedule(%q, %v): %v", id, due, err)
	}
}

func timersClaim(t *testing.T, ts coord.Timers, now time.Time, max int) []coord.Timer {
	t.Helper()
	got, err := ts.Claim(ctxFor(t), now, max, timersLease)
	if err != nil {
		t.Fatalf("Claim(now %v, max %d): %v", now, max, err)
	}
	return got
}

func timersDone(t *testing.T, ts coord.Timers, id string) {
	t.Helper()
	if err := ts.Done(ctxFor(t), id); err != nil {
		t.Fatalf("Done(%q): %v", id, err)
	}
}

func timersStats(t *testing.T, ts coord.Timers) coord.TimerStats {
	t.Helper()
	s, err := ts.Stats(ctxFor(t))
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	return s
}

// timersWant fails unless got is the timers of ids, in that order, each with
// the given claim count.
func timersWant(t *testing.T, what string, got []coord.Timer, claims int, ids ...string) {
	t.Helper()
	gotIDs := make([]string, len(got))
	for i, tm := range got {
		gotIDs[i] = tm.ID
	}
	if fmt.Sprint(gotIDs) != fmt.Sprint(ids) {
		t.Fatalf("%s: claimed %v, want %v", what, gotIDs, ids)
	}
	for _, tm := range got {
		if tm.Claims != claims {
			t.Fatalf("%s: timer %q has Claims %d, want %d", what, tm.ID, tm.Claims, claims)
		}
	}
}

// timersScheduleMany schedules n timers "<prefix><i>" due at due from 16
// goroutines, so that a networked store fills quickly.
func timersScheduleMany(t *testing.T, ts coord.Timers, prefix string, n int, due time.Time) {
	t.Helper()
	ctx := ctxFor(t)
	var wg sync.WaitGroup
	var errs errorList
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < n; i += 16 {
				id := prefix + strconv.Itoa(i)
				if err := ts.Schedule(ctx, id, due, []byte(id)); err != nil {
					errs.add(fmt.Errorf("schedule %q: %w", id, err))
					return
				}
			}
		})
	}
	wg.Wait()
	errs.check(t)
}

// testTimersWake: Wake makes waiting timers due now (never later than they
// were), leaves claimed and unknown ids alone, and a woken timer is claimed
// like any other, with its payload.
func testTimersWake(t *testing.T, ts coord.Timers) {
	hour := timersBase.Add(time.Hour)
	timersSchedule(t, ts, "far", hour, []byte("far payload"))
	timersSchedule(t, ts, "soon", timersBase.Add(time.Second), nil)
	timersSchedule(t, ts, "leased", timersBase, nil)
	timersSchedule(t, ts, "other", hour, nil)
	timersWant(t, "first claim", timersClaim(t, ts, timersBase, 10), 1, "leased")
	if err := ts.Wake(ctxFor(t), timersBase.Add(10*time.Second), "far", "soon", "leased", "unknown"); err != nil {
		t.Fatalf("Wake: %v", err)
	}
	if err := ts.Wake(ctxFor(t), timersBase); err != nil {
		t.Fatalf("Wake of nothing: %v", err)
	}
	// soon stays due at +1s (earlier than the wake); far is due at +10s.
	timersWant(t, "claim at +1s", timersClaim(t, ts, timersBase.Add(time.Second), 10), 1, "soon")
	got := timersClaim(t, ts, timersBase.Add(10*time.Second), 10)
	timersWant(t, "claim at +10s", got, 1, "far")
	if string(got[0].Payload) != "far payload" || !got[0].Due.Equal(timersBase.Add(10*time.Second)) {
		t.Fatalf("woken timer: payload %q due %v, want %q due %v", got[0].Payload, got[0].Due, "far payload", timersBase.Add(10*time.Second))
	}
	// The leased timer was not woken into the schedule twice; other slept on.
	if s := timersStats(t, ts); s.Scheduled != 1 || s.Claimed != 3 || !s.NextDue.Equal(hour) {
		t.Fatalf("stats after the wake: %+v, want other still due in an hour and 3 claimed", s)
	}
}

// testTimersClaimOnlyWhenDue: a timer is not claimable a millisecond before
// it is due, and at its due time comes back with its exact payload and Due;
// once claimed it is not claimable again while leased.
func testTimersClaimOnlyWhenDue(t *testing.T, ts coord.Timers) {
	due := timersBase.Add(10 * time.Second)
	payload := []byte("{\"frozen\":true}\x00\xff\n binary")
	timersSchedule(t, ts, "a", due, payload)

	if got := timersClaim(t, ts, due.Add(-time.Millisecond), 10); len(got) != 0 {
		t.Fatalf("Claim 1ms before due: %v, want nothing", got)
	}
	got := timersClaim(t, ts, due, 10)
	timersWant(t, "Claim at due", got, 1, "a")
	if !got[0].Due.Equal(due) {
		t.Fatalf("Due %v, want %v", got[0].Due, due)
	}
	if !bytes.Equal(got[0].Payload, payload) {
		t.Fatalf("Payload %q, want %q", got[0].Payload, payload)
	}
	if again := timersClaim(t, ts, due.Add(time.Second), 10); len(again) != 0 {
		t.Fatalf("Claim while leased: %v, want nothing", again)
	}
}

// testTimersEarliestFirstAndMax: Claim returns the earliest due first and
// never more than max; timers not yet due stay.
func testTimersEarliestFirstAndMax(t *testing.T, ts coord.Timers) {
	for _, x := range []struct {
		id  string
		sec int
	}{{"d", 4}, {"b", 2}, {"later", 100}, {"e", 5}, {"a", 1}, {"c", 3}} {
		timersSchedule(t, ts, x.id, timersBase.Add(time.Duration(x.sec)*time.Second), nil)
	}
	now := timersBase.Add(10 * time.Second)
	timersWant(t, "first Claim, max 1", timersClaim(t, ts, now, 1), 1, "a")
	timersWant(t, "second Claim, max 2", timersClaim(t, ts, now, 2), 1, "b", "c")
	timersWant(t, "third Claim, max 10", timersClaim(t, ts, now, 10), 1, "d", "e")
	timersWant(t, "fourth Claim", timersClaim(t, ts, now, 10), 1)
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		timersDone(t, ts, id)
	}
	timersWant(t, "Claim when later is due", timersClaim(t, ts, timersBase.Add(100*time.Second), 10), 1, "later")
}

// testTimersDrainInBatches: no fixed cap per Claim; repeated Claims drain
// 10,000 due timers, each batch as large as asked while enough remain.
func testTimersDrainInBatches(t *testing.T, ts coord.Timers) {
	const n = 10_000
	timersScheduleMany(t, ts, "t", n, timersBase)
	seen := make(map[string]bool, n)
	take := func(max int) int {
		got := timersClaim(t, ts, timersBase, max)
		if want := min(max, n-len(seen)); len(got) != want {
			t.Fatalf("Claim(max %d) with %d due: got %d timers, want %d", max, n-len(seen), len(got), want)
		}
		for _, tm := range got {
			if seen[tm.ID] {
				t.Fatalf("timer %q claimed twice", tm.ID)
			}
			seen[tm.ID] = true
		}
		return len(got)
	}
	take(5_000) // one large batch: no hidden cap
	for take(700) > 0 {
	}
	if len(seen) != n {
		t.Fatalf("drained %d timers, want %d", len(seen), n)
	}
	if s := timersStats(t, ts); s.Scheduled != 0 || s.Claimed != n {
		t.Fatalf("Stats after draining: %+v, want 0 scheduled and %d claimed", s, n)
	}
}

// testTimersIdempotentSchedule: scheduling an id again, while waiting or
// while claimed, changes nothing; the first payload and due time stay.
func testTimersIdempotentSchedule(t *testing.T, ts coord.Timers) {
	due := timersBase.Add(time.Second)
	timersSchedule(t, ts, "a", due, []byte("first"))
	timersSchedule(t, ts, "a", timersBase.Add(time.Hour), []byte("second"))
	if s := timersStats(t, ts); s.Scheduled != 1 || s.Claimed != 0 || !s.NextDue.Equal(due) {
		t.Fatalf("Stats after scheduling twice: %+v, want 1 scheduled due %v", s, due)
	}
	got := timersClaim(t, ts, due, 10)
	timersWant(t, "Claim", got, 1, "a")
	if string(got[0].Payload) != "first" || !got[0].Due.Equal(due) {
		t.Fatalf("claimed payload %q due %v, want the first: %q due %v", got[0].Payload, got[0].Due, "first", due)
	}

	// A redelivered suspend while the timer is claimed adds nothing.
	timersSchedule(t, ts, "a", timersBase, []byte("third"))
	if s := timersStats(t, ts); s.Scheduled != 0 || s.Claimed != 1 {
		t.Fatalf("Stats after scheduling a claimed id: %+v, want 0 scheduled, 1 claimed", s)
	}
	if again := timersClaim(t, ts, due.Add(timersLease-time.Millisecond), 10); len(again) != 0 {
		t.Fatalf("Claim within the lease after rescheduling: %v, want nothing", again)
	}
	got = timersClaim(t, ts, due.Add(timersLease), 10)
	timersWant(t, "Claim after the lease", got, 2, "a")
	if string(got[0].Payload) != "first" {
		t.Fatalf("payload after rescheduling a claimed id: %q, want %q", got[0].Payload, "first")
	}
}

// testTimersDone: Done removes a claimed or a waiting timer for good; an
// unknown id is no error; a Done id may be scheduled anew.
func testTimersDone(t *testing.T, ts coord.Timers) {
	timersSchedule(t, ts, "a", timersBase, []byte("a"))
	timersSchedule(t, ts, "waiting", timersBase.Add(time.Minute), nil)
	timersWant(t, "Claim", timersClaim(t, ts, timersBase, 10), 1, "a")
	timersDone(t, ts, "a")
	timersDone(t, ts, "a")
	timersDone(t, ts, "unknown")
	timersDone(t, ts, "waiting")
	if got := timersClaim(t, ts, timersBase.Add(time.Hour), 10); len(got) != 0 {
		t.Fatalf("Claim long after Done: %v, want nothing", got)
	}
	if s := timersStats(t, ts); s != (coord.TimerStats{}) {
		t.Fatalf("Stats after Done: %+v, want zero", s)
	}

	timersSchedule(t, ts, "a", timersBase, []byte("again"))
	got := timersClaim(t, ts, timersBase, 10)
	timersWant(t, "Claim of a rescheduled Done id", got, 1, "a")
	if string(got[0].Payload) != "again" {
		t.Fatalf("payload of a rescheduled Done id: %q, want %q", got[0].Payload, "again")
	}
}

// testTimersLeaseExpiry: a claimed timer that is not Done (its claimer died,
// RFC 006 §7.1) is not claimable before its lease passes and is claimable
// again, by anyone, after, with the same payload and a higher Claims.
func testTimersLeaseExpiry(t *testing.T, ts coord.Timers) {
	timersSchedule(t, ts, "a", timersBase, []byte("frozen"))
	timersWant(t, "first Claim", timersClaim(t, ts, timersBase, 10), 1, "a")
	if got := timersClaim(t, ts, timersBase.Add(timersLease-time.Millisecond), 10); len(got) != 0 {
		t.Fatalf("Claim 1ms before the lease passes: %v, want nothing", got)
	}
	now := timersBase.Add(timersLease)
	got := timersClaim(t, ts, now, 10)
	timersWant(t, "Claim after the lease passed", got, 2, "a")
	if string(got[0].Payload) != "frozen" || !got[0].Due.Equal(timersBase) {
		t.Fatalf("re-claimed payload %q due %v, want %q due %v", got[0].Payload, got[0].Due, "frozen", timersBase)
	}
	// The new lease runs from the second Claim.
	if got := timersClaim(t, ts, now.Add(timersLease-time.Millisecond), 10); len(got) != 0 {
		t.Fatalf("Claim within the second lease: %v, want nothing", got)
	}
	timersWant(t, "third Claim", timersClaim(t, ts, now.Add(timersLease), 10), 3, "a")
	if s := timersStats(t, ts); s.Scheduled != 0 || s.Claimed != 1 {
		t.Fatalf("Stats with one re-leased timer: %+v, want 0 scheduled, 1 claimed", s)
	}
}

// timersExtend calls Extend and returns the lost ids, sorted.
func timersExtend(t *testing.T, ts coord.Timers, now time.Time, held ...coord.Timer) []string {
	t.Helper()
	lost, err := ts.Extend(ctxFor(t), now, timersLease, held...)
	if err != nil {
		t.Fatalf("Extend: %v", err)
	}
	slices.Sort(lost)
	return lost
}

// testTimersExtendFences: Extend keeps a live holder's timers its own past
// the first lease; once a timer is claimed again (its holder was frozen
// past the lease) or done, Extend reports it lost to the old holder, and
// does not move the new holder's lease.
func testTimersExtendFences(t *testing.T, ts coord.Timers) {
	for _, id := range []string{"kept", "taken", "done"} {
		timersSchedule(t, ts, id, timersBase, []byte(id))
	}
	held := timersClaim(t, ts, timersBase, 10)
	timersWant(t, "Claim", held, 1, "done", "kept", "taken")
	// Renewed just before the lease passes: nobody may claim them at its end.
	renewAt := timersBase.Add(timersLease - time.Second)
	if lost := timersExtend(t, ts, renewAt, held...); len(lost) != 0 {
		t.Fatalf("Extend of timers held: lost %v, want none", lost)
	}
	if got := timersClaim(t, ts, timersBase.Add(timersLease), 10); len(got) != 0 {
		t.Fatalf("Claim after the first lease, renewed: %v, want nothing", got)
	}
	// Both leases pass. "kept" is still its holder's, as no one claimed
	// it: renewing it keeps it. "taken" is claimed again meanwhile (its
	// holder froze), and "done" is done.
	timersDone(t, ts, "done")
	later := renewAt.Add(timersLease)
	byID := map[string]coord.Timer{}
	for _, h := range held {
		byID[h.ID] = h
	}
	if lost := timersExtend(t, ts, later, byID["kept"]); len(lost) != 0 {
		t.Fatalf("Extend of a timer past its lease that no one claimed: lost %v, want none", lost)
	}
	again := timersClaim(t, ts, later, 10)
	timersWant(t, "Claim after the lease passed", again, 2, "taken")
	if lost := timersExtend(t, ts, later, held...); !slices.Equal(lost, []string{"done", "taken"}) {
		t.Fatalf("Extend by the frozen holder: lost %v, want done and taken", lost)
	}
	// The new holder renews; the old holder's attempt did not move its
	// lease, and "kept" was renewed with the rest of held.
	if lost := timersExtend(t, ts, later, again...); len(lost) != 0 {
		t.Fatalf("Extend by the new holder: lost %v, want none", lost)
	}
	if got := timersClaim(t, ts, later.Add(timersLease-time.Millisecond), 10); len(got) != 0 {
		t.Fatalf("Claim within the renewed leases: %v, want nothing", got)
	}
	if _, err := ts.Extend(ctxFor(t), later, 0, again...); err == nil {
		t.Fatal("Extend with a zero lease: no error")
	}
}

// testTimersExpiredLeaseOrderedByDue: a timer whose lease passed competes
// with newly due ones by its due time, so recovery is not starved.
func testTimersExpiredLeaseOrderedByDue(t *testing.T, ts coord.Timers) {
	timersSchedule(t, ts, "old", timersBase, nil)
	timersWant(t, "Claim", timersClaim(t, ts, timersBase, 10), 1, "old")
	for i := range 5 {
		timersSchedule(t, ts, "new"+strconv.Itoa(i), timersBase.Add(time.Duration(i+1)*time.Second), nil)
	}
	now := timersBase.Add(time.Hour)
	got := timersClaim(t, ts, now, 2)
	if len(got) != 2 || got[0].ID != "old" || got[0].Claims != 2 || got[1].ID != "new0" || got[1].Claims != 1 {
		t.Fatalf("Claim(max 2) with an expired lease and newer due timers: %+v, want old (Claims 2) then new0", got)
	}
	timersWant(t, "next Claim", timersClaim(t, ts, now, 10), 1, "new1", "new2", "new3", "new4")
}

// testTimersConcurrentClaimers: 8 schedulers claim and finish 10,000 due
// timers at once (RFC 006 §7.3); each timer is claimed exactly once.
func testTimersConcurrentClaimers(t *testing.T, ts coord.Timers) {
	const n, workers = 10_000, 8
	timersScheduleMany(t, ts, "c", n, timersBase)
	ctx := ctxFor(t)
	counts := make([]atomic.Int32, n)
	var wg sync.WaitGroup
	var errs errorList
	for range workers {
		wg.Go(func() {
			for {
				got, err := ts.Claim(ctx, timersBase, 100, time.Hour)
				if err != nil {
					errs.add(fmt.Errorf("claim: %w", err))
					return
				}
				if len(got) == 0 {
					return
				}
				for _, tm := range got {
					i, err := strconv.Atoi(tm.ID[1:])
					if err != nil || i < 0 || i >= n || tm.ID[0] != 'c' {
						errs.add(fmt.Errorf("claimed unknown timer %q", tm.ID))
						return
					}
					counts[i].Add(1)
					if err := ts.Done(ctx, tm.ID); err != nil {
						errs.add(fmt.Errorf("done %q: %w", tm.ID, err))
						return
					}
				}
			}
		})
	}
	wg.Wait()
	errs.check(t)
	for i := range counts {
		if c := counts[i].Load(); c != 1 {
			t.Fatalf("timer c%d claimed %d times, want exactly 1", i, c)
		}
	}
	if s := timersStats(t, ts); s != (coord.TimerStats{}) {
		t.Fatalf("Stats after all Done: %+v, want zero", s)
	}
}

// testTimersPastDue: a timer due in the past (an `until` already gone) is
// claimable at once and keeps its due time.
func testTimersPastDue(t *testing.T, ts coord.Timers) {
	past := timersBase.Add(-72 * time.Hour)
	timersSchedule(t, ts, "past", past, []byte("p"))
	timersSchedule(t, ts, "epoch", time.UnixMilli(0), []byte("e"))
	got := timersClaim(t, ts, timersBase, 10)
	timersWant(t, "Claim", got, 1, "epoch", "past")
	if !got[0].Due.Equal(time.UnixMilli(0)) || !got[1].Due.Equal(past) {
		t.Fatalf("due times %v and %v, want %v and %v", got[0].Due, got[1].Due, time.UnixMilli(0), past)
	}
}

// testTimersStats: Stats counts waiting and claimed timers and gives the
// earliest waiting due time.
func testTimersStats(t *testing.T, ts coord.Timers) {
	if s := timersStats(t, ts); s != (coord.TimerStats{}) || !s.NextDue.IsZero() {
		t.Fatalf("Stats of an empty store: %+v, want zero", s)
	}
	d1, d2, d3 := timersBase, timersBase.Add(time.Second), timersBase.Add(time.Minute)
	timersSchedule(t, ts, "c", d3, nil)
	timersSchedule(t, ts, "a", d1, nil)
	timersSchedule(t, ts, "b", d2, nil)
	check := func(what string, scheduled, claimed int64, next time.Time) {
		t.Helper()
		s := timersStats(t, ts)
		if s.Scheduled != scheduled || s.Claimed != claimed || !s.NextDue.Equal(next) {
			t.Fatalf("Stats %s: %+v, want %d scheduled, %d claimed, next due %v", what, s, scheduled, claimed, next)
		}
	}
	check("after 3 Schedules", 3, 0, d1)
	timersWant(t, "Claim", timersClaim(t, ts, d1, 10), 1, "a")
	check("after a Claim", 2, 1, d2)
	timersDone(t, ts, "a")
	check("after Done", 2, 0, d2)
	timersWant(t, "Claim", timersClaim(t, ts, d3, 10), 1, "b", "c")
	check("with all claimed", 0, 2, time.Time{})
	timersDone(t, ts, "b")
	timersDone(t, ts, "c")
	check("at the end", 0, 0, time.Time{})
}

// testTimersInvalidArguments: an empty id, a max below 1 and a lease that is
// not positive are errors.
func testTimersInvalidArguments(t *testing.T, ts coord.Timers) {
	ctx := ctxFor(t)
	if err := ts.Schedule(ctx, "", timersBase, nil); err == nil {
		t.Error("Schedule with an empty id: no error")
	}
	timersSchedule(t, ts, "a", timersBase, nil)
	for _, c := range []struct {
		max   int
		lease time.Duration
	}{{0, time.Second}, {-1, time.Second}, {1, 0}, {1, -time.Second}} {
		if got, err := ts.Claim(ctx, timersBase, c.max, c.lease); err == nil {
			t.Errorf("Claim(max %d, lease %v): %v and no error, want an error", c.max, c.lease, got)
		}
	}
	// The refused Claims leased nothing.
	timersWant(t, "Claim", timersClaim(t, ts, timersBase, 10), 1, "a")
}

// BenchTimersScheduleClaim measures one timer's life as the scheduler sees it:
// Schedule (due at once), Claim in batches of 100, Done. newTimers returns an
// empty store.
func BenchTimersScheduleClaim(b *testing.B, newTimers func(b *testing.B) coord.Timers) {
	ts := newTimers(b)
	ctx := context.Background()
	payload := bytes.Repeat([]byte("x"), 300)
	const batch = 100
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += batch {
		n := min(batch, b.N-i)
		for j := range n {
			if err := ts.Schedule(ctx, "b"+strconv.Itoa(i+j), timersBase, payload); err != nil {
				b.Fatal(err)
			}
		}
		got, err := ts.Claim(ctx, timersBase, batch, time.Hour)
		if err != nil || len(got) != n {
			b.Fatalf("Claim: %d timers, %v; want %d", len(got), err, n)
		}
		for _, tm := range got {
			if err := ts.Done(ctx, tm.ID); err != nil {
				b.Fatal(err)
			}
		}
	}
}
