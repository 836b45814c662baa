package sqlite

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/internal/sqlitedb"
)

// reopen closes s and db and opens the file again, with a new Store.
func reopen(t *testing.T, s *Store, db *sqlitedb.DB, opts Options) (*Store, *sqlitedb.DB) {
	t.Helper()
	path := db.Path()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openDB(t, path)
	return newStore(t, db, opts), db
}

// TestReopen: everything the seams hold survives closing the file and
// opening it again: a started execution, its finished ids and Records, a
// parked id, an ended one (Published); an open barrier with arrivals and
// its state, a cancelled one; scheduled and claimed timers (the claimed
// one claimable again after its lease, with its Claims count going on);
// blobs; effects recorded and intents counted.
func TestReopen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := openDB(t, "")
	s := newStore(t, db, Options{})
	c, bs, ts, bl, ef := s.Coordinator(), s.Barriers(), s.Timers(), s.Blobs(), s.Effects()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	must(c.Start(ctx, "live", 3))
	if o, err := c.Finish(ctx, "live", "a", coord.Finish{Spawned: 1, Record: coord.Bytes("ra"), End: map[string]any{"$a": 1.0}}); err != nil || o.Last() {
		t.Fatalf("Finish a: %+v, %v", o, err)
	}
	if wake, err := c.Park(ctx, "live", "w", time.Now().Add(time.Hour)); err != nil || wake {
		t.Fatalf("Park: %v, %v", wake, err)
	}
	must(c.Start(ctx, "ended", 1))
	if o, err := c.Finish(ctx, "ended", "x", coord.Finish{End: map[string]any{"$x": "done"}}); err != nil || !o.Last() {
		t.Fatalf("Finish x: %+v, %v", o, err)
	}
	must(c.Published(ctx, "ended"))

	spec := coord.BarrierSpec{Total: 3, Need: 3}
	must(bs.Open(ctx, "live", "agg", coord.BarrierSpec{Total: 3, Need: 3, State: []byte("st")}))
	for _, slot := range []int{0, 2} {
		if _, err := bs.Arrive(ctx, "live", "agg", spec, slot, []byte{byte('a' + slot)}); err != nil {
			t.Fatal(err)
		}
	}
	if was, err := bs.Cancel(ctx, "live", "merge"); err != nil || !was {
		t.Fatalf("Cancel: %v, %v", was, err)
	}

	base := time.UnixMilli(1_760_000_000_000)
	const lease = 30 * time.Second
	must(ts.Schedule(ctx, "t-wait", base.Add(90*24*time.Hour), []byte("waits 90 days")))
	must(ts.Schedule(ctx, "t-claimed", base, []byte("claimed")))
	if got, err := ts.Claim(ctx, base, 10, lease); err != nil || len(got) != 1 || got[0].ID != "t-claimed" {
		t.Fatalf("Claim: %+v, %v", got, err)
	}

	blob := bytes.Repeat([]byte("large value "), 10_000)
	ref, err := bl.Put(ctx, "live", blob)
	must(err)
	if _, err := ef.Begin(ctx, "sent"); err != nil {
		t.Fatal(err)
	}
	must(ef.Record(ctx, "sent", []byte(`{"message_id":"<1@x>"}`)))
	if _, err := ef.Begin(ctx, "intent"); err != nil {
		t.Fatal(err)
	}

	s, _ = reopen(t, s, db, Options{})
	c, bs, ts, bl, ef = s.Coordinator(), s.Barriers(), s.Timers(), s.Blobs(), s.Effects()

	if b, err := c.Begin(ctx, "live", "a"); err != nil || b.State != coord.Replay || string(b.Record) != "ra" {
		t.Fatalf("Begin a after reopening: %+v, %v; want Replay of ra", b, err)
	}
	if b, err := c.Begin(ctx, "live", "b"); err != nil || b.State != coord.Run {
		t.Fatalf("Begin b after reopening: %+v, %v; want Run", b, err)
	}
	if ids, err := c.Parked(ctx, "live"); err != nil || !slices.Equal(ids, []string{"w"}) {
		t.Fatalf("Parked after reopening: %v, %v; want [w]", ids, err)
	}
	if o, err := c.Finish(ctx, "ended", "x", coord.Finish{}); err != nil || o.Case != coord.DuplicatePublished || !o.Last() ||
		!reflect.DeepEqual(o.Completion.FinalContext, map[string]any{"$x": "done"}) {
		t.Fatalf("duplicate Finish x after reopening: %+v, %v; want the published Last again", o, err)
	}

	if a, err := bs.Arrive(ctx, "live", "agg", spec, 0, []byte("a")); err != nil || !a.Duplicate || a.Arrived != 2 {
		t.Fatalf("repeat of slot 0 after reopening: %+v, %v; want Duplicate with 2 arrived", a, err)
	}
	a, err := bs.Arrive(ctx, "live", "agg", spec, 1, []byte("b"))
	if err != nil || !a.Complete || string(a.State) != "st" || !reflect.DeepEqual(a.Values, [][]byte{[]byte("a"), []byte("b"), []byte("c")}) {
		t.Fatalf("completing Arrive after reopening: %+v, %v", a, err)
	}
	if _, err := bs.Arrive(ctx, "live", "merge", coord.BarrierSpec{Total: 2, Need: 1}, 0, nil); !errors.Is(err, coord.ErrBarrierClosed) {
		t.Fatalf("Arrive at the cancelled barrier after reopening: %v, want ErrBarrierClosed", err)
	}

	if st, err := ts.Stats(ctx); err != nil || st.Scheduled != 1 || st.Claimed != 1 || !st.NextDue.Equal(base.Add(90*24*time.Hour)) {
		t.Fatalf("timer Stats after reopening: %+v, %v", st, err)
	}
	if got, err := ts.Claim(ctx, base.Add(lease-time.Millisecond), 10, lease); err != nil || len(got) != 0 {
		t.Fatalf("Claim within the lease after reopening: %+v, %v; want nothing", got, err)
	}
	got, err := ts.Claim(ctx, base.Add(lease), 10, lease)
	if err != nil || len(got) != 1 || got[0].ID != "t-claimed" || got[0].Claims != 2 || string(got[0].Payload) != "claimed" {
		t.Fatalf("Claim after the lease, reopened: %+v, %v; want t-claimed with Claims 2", got, err)
	}
	must(ts.Done(ctx, "t-claimed"))
	got, err = ts.Claim(ctx, base.Add(90*24*time.Hour), 10, lease)
	if err != nil || len(got) != 1 || got[0].ID != "t-wait" || string(got[0].Payload) != "waits 90 days" {
		t.Fatalf("Claim of the 90-day timer: %+v, %v", got, err)
	}

	if data, err := bl.Get(ctx, "live", ref); err != nil || !bytes.Equal(data, blob) {
		t.Fatalf("Get blob after reopening: %d bytes, %v", len(data), err)
	}
	if e, err := ef.Begin(ctx, "sent"); err != nil || !e.Done || string(e.Result) != `{"message_id":"<1@x>"}` {
		t.Fatalf("Effects.Begin of the recorded key after reopening: %+v, %v", e, err)
	}
	if e, err := ef.Begin(ctx, "intent"); err != nil || e.Done || e.Intents != 2 {
		t.Fatalf("Effects.Begin of the intended key after reopening: %+v, %v; want 2 intents", e, err)
	}

	// The execution goes on and completes once, with the context of before.
	for _, id := range []string{"b", "w"} {
		if o, err := c.Finish(ctx, "live", id, coord.Finish{}); err != nil || o.Last() {
			t.Fatalf("Finish %s: %+v, %v", id, o, err)
		}
	}
	o, err := c.Finish(ctx, "live", "c", coord.Finish{End: map[string]any{"$c": true}})
	if err != nil || !o.Last() || !reflect.DeepEqual(o.Completion.FinalContext, map[string]any{"$a": 1.0, "$c": true}) {
		t.Fatalf("last Finish: %+v, %v", o, err)
	}
	if ids, err := c.Parked(ctx, "live"); err != nil || len(ids) != 0 {
		t.Fatalf("Parked after w finished: %v, %v", ids, err)
	}
}

// The kill test's child: TestHelperChild runs only with childEnv set to the
// file's path, and drives executions there until it is killed, printing a
// line for every call that returned nil.
const childEnv = "RUNE_COORD_SQLITE_CHILD"

// killStep is one message of the kill test's executions, in the order
// they run (parents before their children).
type killStep struct {
	id      string
	spawned int
	end     map[string]any
	arrive  int  // barrier slot, or -1
	park    bool // Park and Schedule a timer first
	effect  bool // Record an effect first
}

// killSteps is every execution's tree: r0 spawns c0 and c1, r1 and the
// leaves end their branch; the leaves arrive at a barrier, c0 waits on a
// timer first, c1 records a side effect.
func killSteps(exec string) []killStep {
	return []killStep{
		{id: "r0", spawned: 2, arrive: -1},
		{id: "r1", end: map[string]any{"$r1": exec}, arrive: -1},
		{id: "c0", end: map[string]any{"$c0": 1.0}, arrive: 0, park: true},
		{id: "c1", end: map[string]any{"$c1": "x"}, arrive: 1, effect: true},
	}
}

var killBarrier = coord.BarrierSpec{Total: 2, Need: 2}

func TestHelperChild(t *testing.T) {
	path := os.Getenv(childEnv)
	if path == "" {
		t.Skip("the kill test's child process")
	}
	ctx := context.Background()
	db, err := sqlitedb.Open(ctx, path, sqlitedb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(ctx, db, Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, bs, ts, ef := s.Coordinator(), s.Barriers(), s.Timers(), s.Effects()
	var mu sync.Mutex
	say := func(format string, a ...any) {
		mu.Lock()
		fmt.Printf("op "+format+"\n", a...)
		mu.Unlock()
	}
	fail := func(err error) {
		mu.Lock()
		fmt.Printf("error %v\n", err)
		mu.Unlock()
		os.Exit(3)
	}
	// Until killed; three minutes at most, should the parent be gone.
	deadline := time.Now().Add(3 * time.Minute)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline); i++ {
				exec := fmt.Sprintf("exec-%d-%d", w, i)
				if err := c.Start(ctx, exec, 2); err != nil {
					fail(err)
				}
				say("start %s", exec)
				for _, st := range killSteps(exec) {
					if st.arrive >= 0 {
						if _, err := bs.Arrive(ctx, exec, "agg", killBarrier, st.arrive, []byte(st.id)); err != nil {
							fail(err)
						}
						say("arrive %s %d", exec, st.arrive)
					}
					if st.park {
						if _, err := c.Park(ctx, exec, st.id, time.Now().Add(time.Hour)); err != nil {
							fail(err)
						}
						say("park %s %s", exec, st.id)
						if err := ts.Schedule(ctx, "t/"+exec, time.Now().Add(time.Hour), []byte(exec)); err != nil {
							fail(err)
						}
						say("timer %s", exec)
					}
					if st.effect {
						if err := ef.Record(ctx, "eff/"+exec, []byte(exec)); err != nil {
							fail(err)
						}
						say("effect %s", exec)
					}
					o, err := c.Finish(ctx, exec, st.id, coord.Finish{Spawned: st.spawned, Record: coord.Bytes(st.id), End: st.end})
					if err != nil {
						fail(err)
					}
					say("fin %s %s %t", exec, st.id, o.Last())
				}
			}
		})
	}
	wg.Wait()
}

// TestKill9: a child process driving executions on the file is killed with
// SIGKILL mid-stream. Reopened, the file holds every call the child saw
// return nil (starts, finishes with their Records, parks, barrier arrivals,
// timers, effects), and driving every execution to its end again closes
// the accounting to exactly one Last each, with the whole final context.
func TestKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a child process")
	}
	t.Parallel()
	path := filepath.Join(t.TempDir(), "rune.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	type key struct{ exec, id string }
	var (
		started    = map[string]bool{}
		fins       = map[key]bool{}
		lasts      = map[string]string{} // the id the child saw Last
		parks      = map[key]bool{}
		arrivals   = map[key]bool{} // id is the slot
		timers     = map[string]bool{}
		effects    = map[string]bool{}
		finCount   int
		killed     bool
		childError string
	)
	// Killed once it has finished this many messages: mid-stream, with
	// eight goroutines' writes in flight.
	const killAfter = 400
	timeout := time.AfterFunc(4*time.Minute, func() { _ = cmd.Process.Kill() })
	defer timeout.Stop()
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 && f[0] == "error" {
			childError = sc.Text()
		}
		if len(f) < 3 || f[0] != "op" {
			continue
		}
		switch f[1] {
		case "start":
			started[f[2]] = true
		case "fin":
			fins[key{f[2], f[3]}] = true
			if f[4] == "true" {
				if prev, ok := lasts[f[2]]; ok && prev != f[3] {
					t.Fatalf("%s: the child saw both %s and %s Last", f[2], prev, f[3])
				}
				lasts[f[2]] = f[3]
			}
			finCount++
		case "park":
			parks[key{f[2], f[3]}] = true
		case "arrive":
			arrivals[key{f[2], f[3]}] = true
		case "timer":
			timers[f[2]] = true
		case "effect":
			effects[f[2]] = true
		}
		if finCount >= killAfter && !killed {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	werr := cmd.Wait()
	if childError != "" {
		t.Fatalf("child failed: %s\n%s", childError, stderr.String())
	}
	if !killed {
		t.Fatalf("child ended after %d finishes without being killed (%v):\n%s", finCount, werr, stderr.String())
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child's end: %v, want killed by SIGKILL", werr)
	}
	t.Logf("child killed after %d executions started, %d finishes reported", len(started), finCount)

	ctx := context.Background()
	db := openDB(t, path)
	s := newStore(t, db, Options{})
	c, bs, ts, ef := s.Coordinator(), s.Barriers(), s.Timers(), s.Effects()

	for exec := range started {
		// r0 runs first: it replays once finished, and runs before; an
		// execution lost would drop it.
		if b, err := c.Begin(ctx, exec, "r0"); err != nil || b.State == coord.Drop {
			t.Fatalf("Begin(%s, r0), reported started: %+v, %v; want Run or Replay", exec, b, err)
		}
	}
	for k := range fins {
		if b, err := c.Begin(ctx, k.exec, k.id); err != nil || b.State != coord.Replay || string(b.Record) != k.id {
			t.Fatalf("Begin(%s, %s), reported finished: %+v, %v; want Replay of its Record", k.exec, k.id, b, err)
		}
	}
	for k := range parks {
		ids, err := c.Parked(ctx, k.exec)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(ids, k.id) {
			// Forgotten only by its Finish, which may have committed unreported.
			if b, err := c.Begin(ctx, k.exec, k.id); err != nil || b.State != coord.Replay {
				t.Fatalf("parked %s of %s is neither parked nor finished: %v, %+v, %v", k.id, k.exec, ids, b, err)
			}
		}
	}
	for k := range arrivals {
		slot, _ := strconv.Atoi(k.id)
		a, err := bs.Arrive(ctx, k.exec, "agg", killBarrier, slot, []byte("again"))
		if err != nil && !errors.Is(err, coord.ErrBarrierClosed) || err == nil && !a.Duplicate {
			t.Fatalf("repeat of reported arrival %s slot %d: %+v, %v; want Duplicate (or closed, completed)", k.exec, slot, a, err)
		}
	}
	held := map[string]bool{}
	claimed, err := ts.Claim(ctx, time.Now().Add(2*time.Hour), 100_000, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, tm := range claimed {
		held[tm.ID] = true
		if tm.ID != "t/"+string(tm.Payload) {
			t.Fatalf("timer %s has payload %q", tm.ID, tm.Payload)
		}
	}
	for exec := range timers {
		if !held["t/"+exec] {
			t.Fatalf("reported timer t/%s is gone", exec)
		}
	}
	for exec := range effects {
		if e, err := ef.Begin(ctx, "eff/"+exec); err != nil || !e.Done || string(e.Result) != exec {
			t.Fatalf("reported effect of %s: %+v, %v; want recorded", exec, e, err)
		}
	}

	// Every started execution, driven again from its start: the child's
	// finishes are Duplicates, and exactly one message ends each (the
	// child's completer, when it saw one, whose Finish is then a Duplicate).
	for exec := range started {
		var completers []string
		if err := c.Start(ctx, exec, 2); err != nil {
			t.Fatal(err)
		}
		for _, st := range killSteps(exec) {
			o, err := c.Finish(ctx, exec, st.id, coord.Finish{Spawned: st.spawned, Record: coord.Bytes(st.id), End: st.end})
			if err != nil {
				t.Fatalf("Finish(%s, %s) after the kill: %v", exec, st.id, err)
			}
			if fins[key{exec, st.id}] && o.Case == coord.Recorded {
				t.Fatalf("Finish(%s, %s), reported finished by the child: not a Duplicate", exec, st.id)
			}
			if o.Last() {
				completers = append(completers, st.id)
				if id, ok := lasts[exec]; ok && (id != st.id || o.Case == coord.Recorded) {
					t.Fatalf("%s: Finish(%s) is Last (%v) after the child saw %s Last", exec, st.id, o, id)
				}
				want := map[string]any{"$r1": exec, "$c0": 1.0, "$c1": "x"}
				if !reflect.DeepEqual(o.Completion.FinalContext, want) {
					t.Fatalf("%s: FinalContext %v, want %v", exec, o.Completion.FinalContext, want)
				}
			}
		}
		if len(completers) != 1 {
			t.Fatalf("%s: %v ended the execution, want exactly one message", exec, completers)
		}
	}
}
