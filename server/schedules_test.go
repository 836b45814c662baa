package server

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/store/storetest"
)

// fakeClock is the schedules' clock in unit tests.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// scheduleHarness is a server's cron triggers on a SQLite store with a
// fake clock: no broker, no engine (fired slots are enqueued executions).
type scheduleHarness struct {
	t     *testing.T
	c     *crons
	st    store.Store
	clock *fakeClock
}

func newScheduleHarness(t *testing.T, start time.Time) *scheduleHarness {
	t.Helper()
	st := storetest.SQLite(t)
	clock := &fakeClock{t: start}
	c := newCrons(CronConfig{}.withDefaults(), st, discardLogger(), clock.Now, "test", func() {})
	if _, err := st.CreateWorkflow(context.Background(), store.WorkflowInput{ID: "wf", Name: "wf",
		Definition: json.RawMessage(`{"id":"wf","nodes":[{"id":"start","type":"trigger","trigger":true}],"edges":[]}`), At: start}); err != nil {
		t.Fatal(err)
	}
	return &scheduleHarness{t: t, c: c, st: st, clock: clock}
}

// schedule creates a schedule as the API does, at the clock's time.
func (h *scheduleHarness) schedule(id string, cfg scheduleSettings) {
	h.t.Helper()
	p, err := parsePlan(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	settings, _ := json.Marshal(p.cfg)
	now := h.clock.Now()
	if err := h.st.CreateSchedule(context.Background(), &store.Schedule{ID: id, WorkflowID: "wf", Settings: settings,
		NextAt: p.first(now), CreatedAt: now}); err != nil {
		h.t.Fatal(err)
	}
}

// run steps the clock from its time to until by step, firing due slots at
// each step as a scheduler started at started would.
func (h *scheduleHarness) run(started, until time.Time, step time.Duration) {
	h.t.Helper()
	for now := h.clock.Now(); !now.After(until); now = now.Add(step) {
		h.clock.Set(now)
		if _, err := h.c.fire(context.Background(), started); err != nil {
			h.t.Fatal(err)
		}
	}
}

// fired returns the slots of schedule id's executions (their keys), in
// order, failing on a slot enqueued twice or an execution enqueued before
// its slot came due.
func (h *scheduleHarness) fired(id string) []string {
	h.t.Helper()
	page, err := h.st.ListExecutions(context.Background(), store.ExecutionFilter{WorkflowID: "wf", Limit: 500})
	if err != nil {
		h.t.Fatal(err)
	}
	var slots []string
	for _, x := range page.Items {
		if x.Trigger != "schedule:"+id {
			continue
		}
		var in struct{ Slot time.Time }
		if err := json.Unmarshal(x.Input, &in); err != nil {
			h.t.Fatal(err)
		}
		if x.IdempotencyKey != slotKey(id, in.Slot) {
			h.t.Errorf("execution %s: key %q, want the slot's %q", x.ID, x.IdempotencyKey, slotKey(id, in.Slot))
		}
		if x.CreatedAt.Before(in.Slot) {
			h.t.Errorf("slot %s enqueued early, at %s", in.Slot, x.CreatedAt)
		}
		slots = append(slots, in.Slot.UTC().Format(time.RFC3339))
	}
	slices.Sort(slots)
	if c := slices.Compact(slices.Clone(slots)); len(c) != len(slots) {
		h.t.Errorf("a slot fired twice: %v", slots)
	}
	return slots
}

func utcTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// DST in America/New_York, 2026: clocks skip 02:00–03:00 on March 8 and
// repeat 01:00–02:00 on November 1. Documented in docs/triggers.md.
func TestScheduleDST(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, cron, from, until string
		want                    []string
	}{
		// A daily slot in the skipped hour fires once, shifted by the gap
		// (02:30 EST does not exist: 03:30 EDT); the next day at 02:30 EDT.
		{"skipped hour daily", "30 2 * * *", "2026-03-07T17:00:00Z", "2026-03-10T05:00:00Z",
			[]string{"2026-03-08T07:30:00Z", "2026-03-09T06:30:00Z"}},
		// A daily slot in the repeated hour fires once, at its first
		// occurrence (01:30 EDT), not again at 01:30 EST.
		{"repeated hour daily", "30 1 * * *", "2026-10-31T16:00:00Z", "2026-11-02T12:00:00Z",
			[]string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}},
		// An hourly expression follows elapsed hours: no 02:00 on the
		// spring night, both 01:00s on the fall night.
		{"skipped hour hourly", "0 * * * *", "2026-03-08T05:30:00Z", "2026-03-08T09:30:00Z",
			[]string{"2026-03-08T06:00:00Z", "2026-03-08T07:00:00Z", "2026-03-08T08:00:00Z", "2026-03-08T09:00:00Z"}},
		{"repeated hour hourly", "0 * * * *", "2026-11-01T03:30:00Z", "2026-11-01T07:30:00Z",
			[]string{"2026-11-01T04:00:00Z", "2026-11-01T05:00:00Z", "2026-11-01T06:00:00Z", "2026-11-01T07:00:00Z"}},
		// @daily is local midnight: 23 and 25 hours apart across DST.
		{"daily descriptor", "@daily", "2026-03-07T12:00:00Z", "2026-03-09T12:00:00Z",
			[]string{"2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z"}},
		// @every is elapsed time, whatever the zone does.
		{"every", "@every 40m", "2026-11-01T04:50:00Z", "2026-11-01T07:00:00Z",
			[]string{"2026-11-01T05:30:00Z", "2026-11-01T06:10:00Z", "2026-11-01T06:50:00Z"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			from := utcTime(t, tc.from)
			h := newScheduleHarness(t, from)
			h.schedule("sch", scheduleSettings{Cron: tc.cron, Timezone: "America/New_York"})
			h.run(from, utcTime(t, tc.until), 5*time.Minute)
			if got := h.fired("sch"); !slices.Equal(got, tc.want) {
				t.Fatalf("fired %v, want %v", got, tc.want)
			}
		})
	}
}

// Slots that came due before the scheduler started (less the grace) were
// missed: skip fires none of them, catch_up the newest catch_up_max, and
// both fire every slot after the start, however late the tick.
func TestScheduleMissedSlots(t *testing.T) {
	t.Parallel()
	t0 := utcTime(t, "2026-11-24T09:00:00Z")
	for _, tc := range []struct {
		policy string
		max    int
		want   []string
	}{
		{PolicySkip, 0, []string{"09:10", "09:11"}},
		{PolicyCatchUp, 0, []string{"09:00", "09:01", "09:02", "09:03", "09:04", "09:05", "09:06", "09:07", "09:08", "09:09", "09:10", "09:11"}},
		{PolicyCatchUp, 3, []string{"09:07", "09:08", "09:09", "09:10", "09:11"}},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			t.Parallel()
			h := newScheduleHarness(t, t0)
			h.schedule("sch", scheduleSettings{Cron: "* * * * *", Policy: tc.policy, CatchUpMax: tc.max})
			// The server was down from before 09:00 to 09:09:30 (slots 09:00–09:09); it ticks late, at
			// 09:10:40 (its 09:10 slot is late, not missed), then 09:11:05.
			started := t0.Add(9*time.Minute + 30*time.Second)
			h.clock.Set(started.Add(70 * time.Second))
			h.run(started, started.Add(95*time.Second), 25*time.Second)
			var want []string
			for _, hm := range tc.want {
				want = append(want, "2026-11-24T"+hm+":00Z")
			}
			if got := h.fired("sch"); !slices.Equal(got, want) {
				t.Fatalf("fired %v, want %v", got, want)
			}
		})
	}
}

// A window (start, end), jitter and the shown next fire times.
func TestSchedulePlan(t *testing.T) {
	t.Parallel()
	start, end := utcTime(t, "2026-12-01T09:00:00Z"), utcTime(t, "2026-12-03T09:00:00Z")
	p, err := parsePlan(scheduleSettings{Cron: "0 9 * * *", StartAt: &start, EndAt: &end, Jitter: "10m"})
	if err != nil {
		t.Fatal(err)
	}
	got := p.upcoming(p.first(utcTime(t, "2026-11-24T00:00:00Z")), 5)
	want := []time.Time{start, start.Add(24 * time.Hour), end}
	if !slices.EqualFunc(got, want, time.Time.Equal) {
		t.Fatalf("slots %v, want %v (start and end inclusive)", got, want)
	}
	seen := map[time.Duration]bool{}
	for i := range 50 {
		j := p.jitterOf("sch", start.Add(time.Duration(i)*time.Hour))
		if j < 0 || j >= 10*time.Minute || j != p.jitterOf("sch", start.Add(time.Duration(i)*time.Hour)) {
			t.Fatalf("jitter %v: not in [0, 10m) or not the same for the same slot", j)
		}
		seen[j] = true
	}
	if len(seen) < 40 {
		t.Fatalf("%d distinct jitters in 50 slots: not spread", len(seen))
	}
	for _, bad := range []scheduleSettings{{Cron: ""}, {Cron: "* * * *"}, {Cron: "0 0 * * * *"}, {Cron: "61 * * * *"},
		{Cron: "@every 1m", Timezone: "Mars/Olympus"}, {Cron: "@daily", Policy: "all"}, {Cron: "@daily", Jitter: "soon"},
		{Cron: "CRON_TZ=UTC @daily"}} {
		if _, err := parsePlan(bad); err == nil {
			t.Errorf("parsePlan(%+v) accepted", bad)
		}
	}
}
