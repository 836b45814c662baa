package sqlite

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rune-org/rune/coord"
)

// clock is a settable Options.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// manual is Options on clk whose background sweep never runs: the tests
// call sweep themselves.
func manual(clk *clock) Options {
	return Options{Now: clk.now, SweepEvery: time.Hour, Retain: time.Minute, BarrierRetain: time.Minute, SweepBatch: 7}
}

func sweep(t *testing.T, s *Store) {
	t.Helper()
	if err := s.sweep(context.Background()); err != nil {
		t.Fatalf("sweep: %v", err)
	}
}

// rows counts exec's rows in every table that has executions.
func rows(t *testing.T, s *Store, exec string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, table := range []string{"coord_exec", "coord_done", "coord_ctx", "coord_parked", "coord_bar", "coord_barval", "coord_blob"} {
		var n int
		if err := s.db.R.QueryRow("SELECT count(*) FROM "+table+" WHERE exec = ?", exec).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			out[table] = n
		}
	}
	return out
}

// TestExpiry: an ended execution and everything it holds goes Retain after
// its end, bounded writes at a time; a live one is never swept, however
// long it waits: its count, parked ids, open and closed barriers, blobs.
func TestExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := &clock{t: time.UnixMilli(1_760_000_000_000)}
	opts := manual(clk)
	s := newStore(t, nil, opts)
	c, bs, bl := s.Coordinator(), s.Barriers(), s.Blobs()
	// Each execution: 30 finished ids, a context, a parked id, an open and
	// a cancelled barrier, a blob. "ended" ends; "live" waits.
	for _, exec := range []string{"ended", "live"} {
		if err := c.Start(ctx, exec, 2); err != nil {
			t.Fatal(err)
		}
		for i := range 30 {
			if _, err := c.Finish(ctx, exec, fmt.Sprint("m", i), coord.Finish{Spawned: 1, Record: coord.Bytes("r"), End: map[string]any{fmt.Sprint("$", i): i}}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.Park(ctx, exec, "parked", time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if _, err := bs.Arrive(ctx, exec, "agg", coord.BarrierSpec{Total: 20, Need: 20, TTL: time.Second}, 3, []byte("v")); err != nil {
			t.Fatal(err)
		}
		if _, err := bs.Cancel(ctx, exec, "merge"); err != nil {
			t.Fatal(err)
		}
		if _, err := bl.Put(ctx, exec, []byte("blob of "+exec)); err != nil {
			t.Fatal(err)
		}
	}
	if o, err := c.Finish(ctx, "ended", "parked", coord.Finish{}); err != nil || o.Last() {
		t.Fatalf("Finish parked: %+v, %v", o, err)
	}
	if o, err := c.Finish(ctx, "ended", "end", coord.Finish{}); err != nil || !o.Last() {
		t.Fatalf("Finish end: %+v, %v; want Last", o, err)
	}

	clk.add(opts.Retain - time.Millisecond)
	sweep(t, s)
	if b, err := c.Begin(ctx, "ended", "m0"); err != nil || b.State != coord.Replay {
		t.Fatalf("Begin within Retain after the end: %+v, %v; want Replay", b, err)
	}
	clk.add(time.Millisecond)
	sweep(t, s)
	if left := rows(t, s, "ended"); len(left) != 0 {
		t.Fatalf("rows of the ended execution left after Retain: %v", left)
	}
	if b, err := c.Begin(ctx, "ended", "m0"); err != nil || b.State != coord.Drop {
		t.Fatalf("Begin after Retain: %+v, %v; want Drop", b, err)
	}
	if _, err := c.Finish(ctx, "ended", "m0", coord.Finish{}); !errors.Is(err, coord.ErrUnknownExecution) {
		t.Fatalf("Finish after Retain: %v, want ErrUnknownExecution", err)
	}

	// A year on, far past every TTL: the live execution is whole.
	before := rows(t, s, "live")
	clk.add(365 * 24 * time.Hour)
	sweep(t, s)
	after := rows(t, s, "live")
	// Only the cancelled barrier's value rows (none: nothing arrived) and
	// nothing else may go.
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("live execution's rows after a year: %v, were %v", after, before)
	}
	if ids, err := c.Parked(ctx, "live"); err != nil || len(ids) != 1 {
		t.Fatalf("Parked after a year: %v, %v", ids, err)
	}
	if a, err := bs.Arrive(ctx, "live", "agg", coord.BarrierSpec{Total: 20, Need: 20, TTL: time.Second}, 3, nil); err != nil || !a.Duplicate || a.Arrived != 1 {
		t.Fatalf("open barrier after a year: %+v, %v; want the first arrival kept", a, err)
	}
	if _, err := bs.Arrive(ctx, "live", "merge", coord.BarrierSpec{Total: 2, Need: 1}, 0, nil); !errors.Is(err, coord.ErrBarrierClosed) {
		t.Fatalf("cancelled barrier after a year: %v, want ErrBarrierClosed", err)
	}
	if o, err := c.Finish(ctx, "live", "m30", coord.Finish{}); err != nil || o.Last() || o.Case != coord.Recorded {
		t.Fatalf("Finish after a year: %+v, %v", o, err)
	}
	o, err := c.Finish(ctx, "live", "parked", coord.Finish{})
	if err != nil || !o.Last() || len(o.Completion.FinalContext) != 30 || o.Completion.FinalContext["$29"] != 29.0 {
		t.Fatalf("last Finish after a year: %+v, %v; want Last with 30 context keys", o, err)
	}
}

// TestExpiryAfterRestart: time the store was closed does not count towards
// Retain: an execution that ended before a long stop is kept Retain after
// the store opens again, for the redeliveries that follow a restart.
func TestExpiryAfterRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := &clock{t: time.UnixMilli(1_760_000_000_000)}
	opts := manual(clk)
	db := openDB(t, "")
	s := newStore(t, db, opts)
	c := s.Coordinator()
	if err := c.Start(ctx, "e", 1); err != nil {
		t.Fatal(err)
	}
	if o, err := c.Finish(ctx, "e", "last", coord.Finish{}); err != nil || !o.Last() {
		t.Fatalf("Finish: %+v, %v", o, err)
	}
	clk.add(time.Hour) // stopped for an hour
	s, _ = reopen(t, s, db, opts)
	c = s.Coordinator()
	sweep(t, s)
	clk.add(opts.Retain - time.Millisecond)
	sweep(t, s)
	if o, err := c.Finish(ctx, "e", "last", coord.Finish{}); err != nil || !o.Last() || o.Case == coord.Recorded {
		t.Fatalf("the completer redelivered after the restart: %+v, %v; want its Last again", o, err)
	}
	clk.add(time.Millisecond)
	sweep(t, s)
	if left := rows(t, s, "e"); len(left) != 0 {
		t.Fatalf("rows left Retain after the restart: %v", left)
	}
}

// TestBarrierExpiry: a completed barrier's values go BarrierRetain after
// its completion (then its winner's repeat is closed too), a cancelled
// one's at the next sweep; the closed markers stay with the execution. A
// barrier of an execution the store does not know lives its TTL after its
// last arrival.
func TestBarrierExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := &clock{t: time.UnixMilli(1_760_000_000_000)}
	opts := manual(clk)
	s := newStore(t, nil, opts)
	c, bs := s.Coordinator(), s.Barriers()
	if err := c.Start(ctx, "e", 1); err != nil {
		t.Fatal(err)
	}
	spec := coord.BarrierSpec{Total: 10, Need: 10, TTL: time.Second}
	for slot := range 10 {
		if _, err := bs.Arrive(ctx, "e", "done", spec, slot, []byte{byte(slot)}); err != nil {
			t.Fatal(err)
		}
	}
	for slot := range 5 {
		if _, err := bs.Arrive(ctx, "e", "cancelled", spec, slot, []byte{byte(slot)}); err != nil {
			t.Fatal(err)
		}
	}
	if was, err := bs.Cancel(ctx, "e", "cancelled"); err != nil || !was {
		t.Fatalf("Cancel: %v, %v", was, err)
	}
	values := func(key string) int {
		var n int
		if err := s.db.R.QueryRow("SELECT count(*) FROM coord_barval WHERE exec = 'e' AND key = ?", key).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	sweep(t, s)
	if n := values("cancelled"); n != 0 {
		t.Fatalf("a cancelled barrier keeps %d values after a sweep, want 0", n)
	}
	clk.add(opts.BarrierRetain - time.Millisecond)
	sweep(t, s)
	if a, err := bs.Arrive(ctx, "e", "done", spec, 9, nil); err != nil || !a.Complete || !a.Duplicate || len(a.Values) != 10 {
		t.Fatalf("winner's repeat within BarrierRetain: %+v, %v; want the completed Arrival", a, err)
	}
	clk.add(time.Millisecond)
	sweep(t, s)
	if n := values("done"); n != 0 {
		t.Fatalf("a completed barrier keeps %d values after BarrierRetain, want 0", n)
	}
	for _, slot := range []int{9, 0} {
		if _, err := bs.Arrive(ctx, "e", "done", spec, slot, nil); !errors.Is(err, coord.ErrBarrierClosed) {
			t.Fatalf("slot %d after BarrierRetain: %v, want ErrBarrierClosed", slot, err)
		}
	}

	// An unknown execution's barrier: its TTL from its last arrival.
	if _, err := bs.Arrive(ctx, "unknown", "agg", spec, 0, nil); err != nil {
		t.Fatal(err)
	}
	clk.add(spec.TTL / 2)
	if _, err := bs.Arrive(ctx, "unknown", "agg", spec, 1, nil); err != nil {
		t.Fatal(err)
	}
	clk.add(spec.TTL - time.Millisecond)
	sweep(t, s)
	if a, err := bs.Arrive(ctx, "unknown", "agg", spec, 1, nil); err != nil || !a.Duplicate || a.Arrived != 2 {
		t.Fatalf("unknown execution's barrier within its TTL: %+v, %v", a, err)
	}
	clk.add(spec.TTL)
	sweep(t, s)
	if left := rows(t, s, "unknown"); len(left) != 0 {
		t.Fatalf("rows of the unknown execution's barrier after its TTL: %v", left)
	}
	// The known execution's markers outlived every TTL.
	if _, err := bs.Arrive(ctx, "e", "cancelled", spec, 7, nil); !errors.Is(err, coord.ErrBarrierClosed) {
		t.Fatalf("cancelled barrier later: %v, want ErrBarrierClosed", err)
	}
}

// TestEffectsExpiry: a key unused for EffectsRetain is gone (a Begin acts
// anew) even before the sweep deletes it; one in use is kept.
func TestEffectsExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := &clock{t: time.UnixMilli(1_760_000_000_000)}
	opts := manual(clk)
	s := newStore(t, nil, opts)
	ef := s.Effects()
	for _, k := range []string{"old", "used"} {
		if err := ef.Record(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	clk.add(DefaultEffectsRetain - time.Minute)
	if e, err := ef.Begin(ctx, "used"); err != nil || !e.Done {
		t.Fatalf("Begin of a recorded key: %+v, %v", e, err)
	}
	clk.add(time.Minute)
	if e, err := ef.Begin(ctx, "old"); err != nil || e.Done || e.Intents != 1 {
		t.Fatalf("Begin of a key unused for EffectsRetain: %+v, %v; want a new effect", e, err)
	}
	clk.add(DefaultEffectsRetain)
	sweep(t, s)
	var n int
	if err := s.db.R.QueryRow("SELECT count(*) FROM coord_effect").Scan(&n); err != nil || n != 0 {
		t.Fatalf("effects left after the sweep: %d, %v", n, err)
	}
}

// TestNewerSchema: a file whose coordination tables a later version wrote
// is refused, naming both versions.
func TestNewerSchema(t *testing.T) {
	t.Parallel()
	db := openDB(t, "")
	newStore(t, db, Options{})
	if _, err := db.W.Exec("UPDATE coord_schema SET version = 99"); err != nil {
		t.Fatal(err)
	}
	_, err := New(context.Background(), db, Options{})
	if err == nil || !strings.Contains(err.Error(), "version 99") {
		t.Fatalf("New on a file of version 99: %v, want a refusal naming it", err)
	}
}

// TestOptions: invalid options are refused, naming the field.
func TestOptions(t *testing.T) {
	t.Parallel()
	db := openDB(t, "")
	for _, o := range []Options{{Retain: -1}, {EffectsRetain: time.Hour}, {SweepBatch: -1}, {BarrierRetain: -time.Second}} {
		if s, err := New(context.Background(), db, o); err == nil {
			s.Close()
			t.Fatalf("New(%+v): no error", o)
		}
	}
}

// TestSweeperRuns: the background sweep drops an ended execution after
// Retain on its own, and leaves a live one.
func TestSweeperRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, nil, Options{Retain: 50 * time.Millisecond})
	c := s.Coordinator()
	for _, exec := range []string{"ended", "live"} {
		if err := c.Start(ctx, exec, 1); err != nil {
			t.Fatal(err)
		}
	}
	if o, err := c.Finish(ctx, "ended", "a", coord.Finish{Record: coord.Bytes("r")}); err != nil || !o.Last() {
		t.Fatalf("Finish: %+v, %v; want Last", o, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := c.Begin(ctx, "ended", "a")
		if err != nil {
			t.Fatal(err)
		}
		if b.State == coord.Drop {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("ended execution still kept after 30s with Retain 50ms")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if b, err := c.Begin(ctx, "live", "x"); err != nil || b.State != coord.Run {
		t.Fatalf("live execution: Begin %+v, %v; want Run", b, err)
	}
}
