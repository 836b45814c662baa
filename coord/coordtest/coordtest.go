// Package coordtest is the conformance suite of coord.Coordinator: every
// implementation runs Run unchanged, so the embedded and distributed runtimes
// keep the same promises.
package coordtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/message"
)

// Run runs the suite. newCoord returns a coordinator isolated from every other
// call's (a fresh instance, or a fresh key prefix); it registers its own
// cleanup with t. Subtests run in parallel.
func Run(t *testing.T, newCoord func(t *testing.T) coord.Coordinator) {
	cases := []struct {
		name string
		fn   func(t *testing.T, c coord.Coordinator)
	}{
		{"LinearChain", testLinearChain},
		{"FanOutConcurrent", testFanOutConcurrent},
		{"DuplicateFinish", testDuplicateFinish},
		{"ConcurrentDuplicateFinish", testConcurrentDuplicateFinish},
		{"ReplayRecord", testReplayRecord},
		{"OptimisticFinish", testOptimisticFinish},
		{"FinishIfLast", testFinishIfLast},
		{"ModeByCase", testModeByCase},
		{"Park", testPark},
		{"Halt", testHalt},
		{"EndMerge", testEndMerge},
		{"StartIdempotent", testStartIdempotent},
		{"InvalidArguments", testInvalidArguments},
		{"UnknownExecution", testUnknownExecution},
		{"AfterEnd", testAfterEnd},
		{"Published", testPublished},
		{"InterleavedExecutions", testInterleavedExecutions},
		// Pauses (issue 34, pause.go).
		{"Pauses", testPauses},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newCoord(t))
		})
	}
}

// errorList collects the errors of concurrent goroutines. add never blocks:
// a goroutine reporting while it holds a lock the others wait on must not
// wait for room (a full channel there hangs the test instead of failing it).
type errorList struct {
	mu   sync.Mutex
	errs []error
}

func (l *errorList) add(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, err)
}

// check fails t with the errors collected: the first ten, and how many.
func (l *errorList) check(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, err := range l.errs[:min(len(l.errs), 10)] {
		t.Error(err)
	}
	if len(l.errs) > 0 {
		t.Fatalf("%d error(s)", len(l.errs))
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func start(t *testing.T, c coord.Coordinator, exec string, n int) {
	t.Helper()
	if err := c.Start(ctxFor(t), exec, n); err != nil {
		t.Fatalf("Start(%q, %d): %v", exec, n, err)
	}
}

func begin(t *testing.T, c coord.Coordinator, exec, id string, want coord.State) coord.Begin {
	t.Helper()
	b, err := c.Begin(ctxFor(t), exec, id)
	if err != nil {
		t.Fatalf("Begin(%q, %q): %v", exec, id, err)
	}
	if b.State != want {
		t.Fatalf("Begin(%q, %q) = %v, want %v", exec, id, b.State, want)
	}
	return b
}

func finish(t *testing.T, c coord.Coordinator, exec, id string, f coord.Finish) coord.Outcome {
	t.Helper()
	o, err := c.Finish(ctxFor(t), exec, id, f)
	if err != nil {
		t.Fatalf("Finish(%q, %q): %v", exec, id, err)
	}
	return o
}

// notLast fails unless o is a first, non-final Finish.
func notLast(t *testing.T, what string, o coord.Outcome) {
	t.Helper()
	if o.Case != coord.Recorded || o.Last() {
		t.Fatalf("%s: Outcome %v, want recorded, not last", what, o)
	}
}

// completed fails unless o is the Last Finish of an execution that completed
// with final context want.
func completed(t *testing.T, what string, o coord.Outcome, want map[string]any) {
	t.Helper()
	if !o.Last() {
		t.Fatalf("%s: Outcome %v, want Last", what, o)
	}
	if o.Completion.Status != message.CompletionCompleted || o.Completion.Failure != nil {
		t.Fatalf("%s: Status %q Failure %v, want %q and no failure", what, o.Completion.Status, o.Completion.Failure, message.CompletionCompleted)
	}
	if o.Completion.FinalContext == nil {
		t.Fatalf("%s: FinalContext is nil on Last", what)
	}
	if !reflect.DeepEqual(o.Completion.FinalContext, want) {
		t.Fatalf("%s: FinalContext %#v, want %#v", what, o.Completion.FinalContext, want)
	}
}

// testLinearChain: a chain of messages each spawning one successor completes
// on the last Finish and not before.
func testLinearChain(t *testing.T, c coord.Coordinator) {
	const exec, n = "exec-linear", 20
	start(t, c, exec, 1)
	for i := range n {
		id := fmt.Sprintf("m%d", i)
		begin(t, c, exec, id, coord.Run)
		f := coord.Finish{Spawned: 1, Record: coord.Bytes(id)}
		if i == n-1 {
			f = coord.Finish{End: map[string]any{"$last": id}}
		}
		o := finish(t, c, exec, id, f)
		if i < n-1 {
			notLast(t, "Finish "+id, o)
			continue
		}
		if o.Case != coord.Recorded {
			t.Fatalf("final Finish: Outcome %v, want recorded", o)
		}
		completed(t, "final Finish", o, map[string]any{"$last": id})
	}
	// Every message of the chain still replays after completion.
	for i := range n - 1 {
		id := fmt.Sprintf("m%d", i)
		if b := begin(t, c, exec, id, coord.Replay); string(b.Record) != id {
			t.Fatalf("Begin(%q) Record %q, want %q", id, b.Record, id)
		}
	}
}

// tree is a deterministic message tree: children[id] are the messages id
// spawns; roots are the first messages.
type tree struct {
	roots    []string
	children map[string][]string
	leaves   int
}

// newTree builds a tree of total messages starting from roots first
// messages, where message i spawns pattern[i%len(pattern)] children until
// total is reached.
func newTree(prefix string, roots, total int, pattern []int) tree {
	tr := tree{children: make(map[string][]string, total)}
	name := func(i int) string { return fmt.Sprintf("%s%d", prefix, i) }
	for i := range roots {
		tr.roots = append(tr.roots, name(i))
	}
	created := roots
	for i := 0; i < created; i++ {
		k := min(pattern[i%len(pattern)], total-created)
		for range k {
			tr.children[name(i)] = append(tr.children[name(i)], name(created))
			created++
		}
		if k == 0 {
			tr.leaves++
		}
	}
	return tr
}

type job struct{ exec, id string }

// runTrees drives the given executions' trees through c from workers
// goroutines, as the engine does: Begin, Finish with Spawned, then publish
// the children. Every leaf ends its branch with End {"leaf:<id>": id};
// messages in halt finish with that failure. It returns each execution's
// Outcomes that had Last set.
func runTrees(t *testing.T, c coord.Coordinator, trees map[string]tree, workers int, halt map[job]*message.Failure) map[string][]coord.Outcome {
	t.Helper()
	ctx := ctxFor(t)
	for exec, tr := range trees {
		if err := c.Start(ctx, exec, len(tr.roots)); err != nil {
			t.Fatalf("Start(%q): %v", exec, err)
		}
	}
	jobs := make(chan job, 1<<16)
	var pending sync.WaitGroup
	for exec, tr := range trees {
		for _, id := range tr.roots {
			pending.Add(1)
			jobs <- job{exec, id}
		}
	}
	var (
		mu      sync.Mutex
		lasts   = map[string][]coord.Outcome{}
		errOnce sync.Once
		failed  atomic.Bool
		firstEr error
	)
	fail := func(err error) {
		errOnce.Do(func() { firstEr = err })
		failed.Store(true)
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for j := range jobs {
				if !failed.Load() {
					if err := step(ctx, c, trees[j.exec], j, halt[j], &pending, jobs, &mu, lasts); err != nil {
						fail(err)
					}
				}
				pending.Done()
			}
		})
	}
	pending.Wait()
	close(jobs)
	wg.Wait()
	if firstEr != nil {
		t.Fatal(firstEr)
	}
	return lasts
}

func step(ctx context.Context, c coord.Coordinator, tr tree, j job, halt *message.Failure, pending *sync.WaitGroup, jobs chan<- job, mu *sync.Mutex, lasts map[string][]coord.Outcome) error {
	b, err := c.Begin(ctx, j.exec, j.id)
	if err != nil {
		return fmt.Errorf("Begin(%q, %q): %v", j.exec, j.id, err)
	}
	kids := tr.children[j.id]
	f := coord.Finish{Spawned: len(kids), Record: coord.Bytes(j.id), Halt: halt}
	switch b.State {
	case coord.Run:
	case coord.Drop:
		f = coord.Finish{}
		kids = nil
	default:
		return fmt.Errorf("Begin(%q, %q) = %v on a first delivery", j.exec, j.id, b.State)
	}
	if len(kids) == 0 && b.State == coord.Run {
		f.End = map[string]any{"leaf:" + j.id: j.id}
	}
	o, err := c.Finish(ctx, j.exec, j.id, f)
	if err != nil {
		return fmt.Errorf("Finish(%q, %q): %v", j.exec, j.id, err)
	}
	if o.Case != coord.Recorded {
		return fmt.Errorf("Finish(%q, %q): %v on the first Finish, want recorded", j.exec, j.id, o)
	}
	if o.Last() {
		mu.Lock()
		lasts[j.exec] = append(lasts[j.exec], o)
		mu.Unlock()
	}
	for _, k := range kids {
		pending.Add(1)
		jobs <- job{j.exec, k}
	}
	return nil
}

func leafContext(tr tree) map[string]any {
	want := map[string]any{}
	for _, id := range tr.roots {
		addLeaves(tr, id, want)
	}
	return want
}

func addLeaves(tr tree, id string, into map[string]any) {
	kids := tr.children[id]
	if len(kids) == 0 {
		into["leaf:"+id] = id
	}
	for _, k := range kids {
		addLeaves(tr, k, into)
	}
}

// testFanOutConcurrent: a tree of 2,000 messages run by 200 goroutines ends
// with exactly one Last, whose FinalContext holds every leaf's End (so no
// Finish can have come after it).
func testFanOutConcurrent(t *testing.T, c coord.Coordinator) {
	const exec = "exec-fan"
	tr := newTree("m", 3, 2000, []int{2, 0, 3, 1, 2, 0})
	lasts := runTrees(t, c, map[string]tree{exec: tr}, 200, nil)
	if len(lasts[exec]) != 1 {
		t.Fatalf("%d Finishes had Last, want exactly 1", len(lasts[exec]))
	}
	o := lasts[exec][0]
	want := leafContext(tr)
	if len(want) != tr.leaves {
		t.Fatalf("test tree: %d leaves in context, %d counted", len(want), tr.leaves)
	}
	completed(t, "Last Finish", o, want)
}

// testDuplicateFinish: a repeated Finish changes nothing, reports Duplicate,
// and repeats Last for the completer.
func testDuplicateFinish(t *testing.T, c coord.Coordinator) {
	const exec = "exec-dup"
	start(t, c, exec, 2) // a, b
	begin(t, c, exec, "a", coord.Run)
	notLast(t, "Finish a", finish(t, c, exec, "a", coord.Finish{Spawned: 1, Record: coord.Bytes("ra")})) // spawns c
	// Were this duplicate counted, the live count would drop to 1 and
	// Finish b would wrongly be Last.
	o := finish(t, c, exec, "a", coord.Finish{Spawned: 0, Record: coord.Bytes("other"), End: map[string]any{"$dup": true}})
	if o.Case != coord.Duplicate || o.Last() {
		t.Fatalf("duplicate Finish a: Outcome %v, want duplicate, not last", o)
	}
	if b := begin(t, c, exec, "a", coord.Replay); string(b.Record) != "ra" {
		t.Fatalf("Begin a after duplicate Finish: Record %q, want the first call's %q", b.Record, "ra")
	}
	notLast(t, "Finish b", finish(t, c, exec, "b", coord.Finish{}))
	want := map[string]any{"$c": "end"}
	o = finish(t, c, exec, "c", coord.Finish{End: map[string]any{"$c": "end"}})
	if o.Case != coord.Recorded {
		t.Fatalf("Finish c: Outcome %v on first Finish, want recorded", o)
	}
	completed(t, "Finish c", o, want)

	// The completer's duplicate is Last again with the same Outcome, and its
	// End does not change the final context.
	for i := range 2 {
		o = finish(t, c, exec, "c", coord.Finish{Spawned: 3, End: map[string]any{"$c": "changed", "$x": 1.0}})
		if o.Case != coord.Duplicate {
			t.Fatalf("duplicate Finish c #%d: Outcome %v, want duplicate", i, o)
		}
		completed(t, "duplicate Finish c", o, want)
	}
	o = finish(t, c, exec, "b", coord.Finish{})
	if o.Case != coord.Duplicate || o.Last() {
		t.Fatalf("duplicate Finish b after completion: Outcome %v, want duplicate, not last", o)
	}
}

// testConcurrentDuplicateFinish: of many simultaneous Finishes of one id,
// exactly one is not a Duplicate, and every one of the completer's reports
// Last.
func testConcurrentDuplicateFinish(t *testing.T, c coord.Coordinator) {
	const exec, callers, rounds = "exec-dup-concurrent", 50, 20
	ctx := ctxFor(t)
	start(t, c, exec, rounds+1)
	run := func(id string, f coord.Finish) []coord.Outcome {
		outs := make([]coord.Outcome, callers)
		errs := make([]error, callers)
		var wg sync.WaitGroup
		// Release every caller at once to widen any race.
		gate := make(chan struct{})
		for i := range callers {
			wg.Go(func() {
				<-gate
				outs[i], errs[i] = c.Finish(ctx, exec, id, f)
			})
		}
		close(gate)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("Finish(%q) caller %d: %v", id, i, err)
			}
		}
		firsts := 0
		for _, o := range outs {
			if o.Case == coord.Recorded {
				firsts++
			}
		}
		if firsts != 1 {
			t.Fatalf("Finish(%q) from %d callers: %d were recorded, want 1", id, callers, firsts)
		}
		return outs
	}
	for r := range rounds {
		id := fmt.Sprintf("r%d", r)
		for _, o := range run(id, coord.Finish{}) {
			if o.Last() {
				t.Fatalf("Finish %s: Last while b is live", id)
			}
		}
	}
	for _, o := range run("b", coord.Finish{End: map[string]any{"$b": 2.0}}) {
		completed(t, "Finish b", o, map[string]any{"$b": 2.0})
	}
}

// testReplayRecord: Begin after Finish returns Replay with the exact bytes
// Finish stored.
func testReplayRecord(t *testing.T, c coord.Coordinator) {
	const exec = "exec-replay"
	records := map[string][]byte{
		"bin":   {0x00, 0xff, 0xfe, '"', '\\', 0x00, 0x80, '\n'},
		"json":  []byte(`{"successors":[{"id":"x","node":"n2"}],"n":1.5}`),
		"empty": nil,
		"big":   bytes.Repeat([]byte("0123456789abcdef"), 4096),
	}
	start(t, c, exec, len(records)+1) // one more keeps the execution live
	for id, rec := range records {
		begin(t, c, exec, id, coord.Run)
		notLast(t, "Finish "+id, finish(t, c, exec, id, coord.Finish{Record: coord.Bytes(rec)}))
	}
	for id, rec := range records {
		b := begin(t, c, exec, id, coord.Replay)
		if !bytes.Equal(b.Record, rec) {
			t.Fatalf("Begin(%q) Record %q, want %q", id, b.Record, rec)
		}
	}
	begin(t, c, exec, "never-finished", coord.Run)
	// A Run Begin twice (a crash before Finish) is still Run.
	begin(t, c, exec, "never-finished", coord.Run)
}

// testOptimisticFinish: a Finish without Begin (FinishOptimistic) counts
// like any other; for a message that finished before it changes nothing and
// is Replayed with the stored record (not a Duplicate with the new one), and
// in a halted execution it changes nothing and is Dropped, after which the
// message is finished as Begin's Drop asks.
func testOptimisticFinish(t *testing.T, c coord.Coordinator) {
	const exec = "exec-optimistic"
	start(t, c, exec, 2) // a, b
	o := finish(t, c, exec, "a", coord.Finish{Mode: coord.FinishOptimistic, Spawned: 1, Record: coord.Bytes("ra")})
	notLast(t, "optimistic Finish a", o)
	// A redelivery of a, run again without Begin: the first record wins and
	// nothing is counted twice.
	o = finish(t, c, exec, "a", coord.Finish{Mode: coord.FinishOptimistic, Spawned: 5, Record: coord.Bytes("ra again")})
	if o.Case != coord.Replayed || string(o.Record) != "ra" || o.Last() {
		t.Fatalf("optimistic Finish a again: Outcome %v, want replayed %q", o, "ra")
	}
	// Replaying is a plain Finish of the stored record: a Duplicate.
	if o := finish(t, c, exec, "a", coord.Finish{Spawned: 1, Record: coord.Bytes("ra")}); o.Case != coord.Duplicate {
		t.Fatalf("Finish a (replay): Outcome %v, want duplicate", o)
	}
	// b halts; c (a's successor) then gets Drop and nothing changes.
	notLast(t, "Finish b (halt)", finish(t, c, exec, "b", coord.Finish{Mode: coord.FinishOptimistic, Halt: &message.Failure{NodeID: "b", Error: message.Error{Message: "boom", Code: "E"}}}))
	if o := finish(t, c, exec, "c", coord.Finish{Mode: coord.FinishOptimistic, Spawned: 3, Record: coord.Bytes("rc")}); o.Case != coord.Dropped || o.Last() {
		t.Fatalf("optimistic Finish c after the halt: Outcome %v, want dropped", o)
	}
	begin(t, c, exec, "c", coord.Drop) // not recorded by the Dropped Finish
	o = finish(t, c, exec, "c", coord.Finish{})
	if !o.Last() || o.Completion.Status != message.CompletionHalted {
		t.Fatalf("Finish c (dropped): Outcome %v, want the halted completion", o)
	}
	// After the end, an optimistic Finish of a finished message still
	// replays it; of a new one it is an unknown execution.
	if o := finish(t, c, exec, "a", coord.Finish{Mode: coord.FinishOptimistic}); o.Case != coord.Replayed || string(o.Record) != "ra" {
		t.Fatalf("optimistic Finish a after the end: Outcome %v, want replayed %q", o, "ra")
	}
	if _, err := c.Finish(ctxFor(t), exec, "late", coord.Finish{Mode: coord.FinishOptimistic}); !errors.Is(err, coord.ErrUnknownExecution) {
		t.Fatalf("optimistic Finish of a new message after the end: %v, want ErrUnknownExecution", err)
	}
	if _, err := c.Finish(ctxFor(t), "exec-never-started", "x", coord.Finish{Mode: coord.FinishOptimistic}); !errors.Is(err, coord.ErrUnknownExecution) {
		t.Fatalf("optimistic Finish in an unknown execution: %v, want ErrUnknownExecution", err)
	}
}

// testFinishIfLast: a Finish in FinishIfLast or FinishOptimisticIfLast
// records the message only when that ends the execution; otherwise it
// changes nothing and says NotLast. An optimistic one's Begin checks come
// first, and a finished message gets the answer it would get without
// IfLast.
func testFinishIfLast(t *testing.T, c coord.Coordinator) {
	const exec = "exec-iflast"
	start(t, c, exec, 2) // a, b
	ifLast := coord.Finish{Mode: coord.FinishOptimisticIfLast, Record: coord.Bytes("ra"), End: map[string]any{"$a": 1.0}}
	if o := finish(t, c, exec, "a", ifLast); o.Case != coord.NotLast || o.Last() {
		t.Fatalf("Finish a IfLast while b is live: Outcome %v, want not-last", o)
	}
	begin(t, c, exec, "a", coord.Run) // not recorded
	// Spawning, a message never ends the execution.
	if o := finish(t, c, exec, "b", coord.Finish{Mode: coord.FinishIfLast, Spawned: 1}); o.Case != coord.NotLast {
		t.Fatalf("Finish b IfLast spawning one: Outcome %v, want not-last", o)
	}
	notLast(t, "Finish b", finish(t, c, exec, "b", coord.Finish{Record: coord.Bytes("rb"), End: map[string]any{"$b": 2.0}}))
	o := finish(t, c, exec, "a", ifLast)
	completed(t, "Finish a IfLast, the last live message", o, map[string]any{"$a": 1.0, "$b": 2.0})
	// Finished before: the answers of a Finish without IfLast.
	if o := finish(t, c, exec, "a", ifLast); o.Case != coord.Replayed || string(o.Record) != "ra" {
		t.Fatalf("optimistic Finish a IfLast again: Outcome %v, want replayed %q", o, "ra")
	}
	if o := finish(t, c, exec, "b", coord.Finish{Mode: coord.FinishIfLast}); o.Case != coord.Duplicate || o.Last() {
		t.Fatalf("Finish b IfLast again: Outcome %v, want duplicate", o)
	}

	// In a halted execution an optimistic IfLast is dropped, as Begin
	// would drop it, before it is asked whether it is last.
	const halted = "exec-iflast-halted"
	start(t, c, halted, 2)
	notLast(t, "Finish x (halt)", finish(t, c, halted, "x", coord.Finish{Halt: &message.Failure{NodeID: "x", Error: message.Error{Message: "boom", Code: "E"}}}))
	if o := finish(t, c, halted, "y", coord.Finish{Mode: coord.FinishOptimisticIfLast}); o.Case != coord.Dropped {
		t.Fatalf("optimistic Finish y IfLast after the halt: Outcome %v, want dropped", o)
	}
}

// testModeByCase is Finish as a table: for each FinishMode and each state
// message "m" may find its execution in, the Outcome's case, whether it
// carries the completion, and (Replayed) the stored record.
func testModeByCase(t *testing.T, c coord.Coordinator) {
	type want struct {
		c    coord.Case
		last bool
	}
	modes := []coord.FinishMode{coord.FinishBegun, coord.FinishOptimistic, coord.FinishIfLast, coord.FinishOptimisticIfLast}
	halt := &message.Failure{NodeID: "h", Error: message.Error{Message: "boom", Code: "E"}}
	states := []struct {
		name string
		// prepare starts exec and brings it to the state; m is not yet
		// finished unless the state says so.
		prepare func(exec string)
		want    [4]want // by mode, in the order of modes
	}{
		{"live, not last", func(exec string) { start(t, c, exec, 2) },
			[4]want{{coord.Recorded, false}, {coord.Recorded, false}, {coord.NotLast, false}, {coord.NotLast, false}}},
		{"live, last", func(exec string) { start(t, c, exec, 1) },
			[4]want{{coord.Recorded, true}, {coord.Recorded, true}, {coord.Recorded, true}, {coord.Recorded, true}}},
		{"m finished", func(exec string) {
			start(t, c, exec, 2)
			notLast(t, exec+": first Finish m", finish(t, c, exec, "m", coord.Finish{Record: coord.Bytes("stored")}))
		}, [4]want{{coord.Duplicate, false}, {coord.Replayed, false}, {coord.Duplicate, false}, {coord.Replayed, false}}},
		{"m ended it, published", func(exec string) {
			start(t, c, exec, 1)
			completed(t, exec+": first Finish m", finish(t, c, exec, "m", coord.Finish{Record: coord.Bytes("stored")}), map[string]any{})
			if err := c.Published(ctxFor(t), exec); err != nil {
				t.Fatalf("Published(%q): %v", exec, err)
			}
		}, [4]want{{coord.DuplicatePublished, true}, {coord.Replayed, false}, {coord.DuplicatePublished, true}, {coord.Replayed, false}}},
		{"halted", func(exec string) {
			start(t, c, exec, 3)
			notLast(t, exec+": Finish h (halt)", finish(t, c, exec, "h", coord.Finish{Halt: halt}))
		}, [4]want{{coord.Recorded, false}, {coord.Dropped, false}, {coord.NotLast, false}, {coord.Dropped, false}}},
	}
	for _, st := range states {
		for i, mode := range modes {
			exec := fmt.Sprintf("exec-modes-%s-%s", st.name, mode)
			st.prepare(exec)
			o := finish(t, c, exec, "m", coord.Finish{Mode: mode, Record: coord.Bytes("new")})
			w := st.want[i]
			if o.Case != w.c || o.Last() != w.last {
				t.Errorf("%s, Finish m %s: Outcome %v, want %s (last %v)", st.name, mode, o, w.c, w.last)
			}
			if o.Case == coord.Replayed && string(o.Record) != "stored" {
				t.Errorf("%s, Finish m %s: Record %q, want the stored %q", st.name, mode, o.Record, "stored")
			}
		}
	}
}

// testPark: parked ids are listed until their Finish; once the execution is
// halted (or for an unknown one) Park records nothing and says to wake. The
// due times given say only how long a coordinator that expires state keeps
// it (coord/redis tests that).
func testPark(t *testing.T, c coord.Coordinator) {
	const exec = "exec-park"
	ctx := ctxFor(t)
	park := func(id string, wantWake bool) {
		t.Helper()
		wake, err := c.Park(ctx, exec, id, time.Now().Add(time.Hour))
		if err != nil || wake != wantWake {
			t.Fatalf("Park(%q) = %v, %v; want %v", id, wake, err, wantWake)
		}
	}
	parked := func(want ...string) {
		t.Helper()
		got, err := c.Parked(ctx, exec)
		if err != nil {
			t.Fatalf("Parked: %v", err)
		}
		slices.Sort(got)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("Parked = %v, want %v", got, want)
		}
	}
	parked()
	park("w0", true) // not started
	start(t, c, exec, 4)
	park("w1", false)
	park("w2", false)
	park("w2", false)
	parked("w1", "w2")
	// A Hold (a delayed successor, a barrier's deadline) changes no
	// accounting: at most how long the state is kept.
	notLast(t, "Finish w1", finish(t, c, exec, "w1", coord.Finish{Hold: time.Now().Add(time.Hour)}))
	parked("w2")
	notLast(t, "Finish h (halt)", finish(t, c, exec, "h", coord.Finish{Halt: &message.Failure{NodeID: "h", Error: message.Error{Message: "boom", Code: "E"}}}))
	park("w3", true) // halted: not recorded
	parked("w2")
	if wake, err := c.Park(ctx, "exec-never-started", "x", time.Now()); err != nil || !wake {
		t.Fatalf("Park in an unknown execution = %v, %v; want wake", wake, err)
	}
}

// testHalt: after a Halt, unfinished messages Drop, finished ones Replay, and
// the execution completes halted, with the first Halt's Failure, only when
// the count reaches zero.
func testHalt(t *testing.T, c coord.Coordinator) {
	const exec = "exec-halt"
	start(t, c, exec, 3) // a, b, c
	begin(t, c, exec, "a", coord.Run)
	begin(t, c, exec, "b", coord.Run)
	// c is still running when b halts; a spawns d.
	begin(t, c, exec, "c", coord.Run)
	notLast(t, "Finish a", finish(t, c, exec, "a", coord.Finish{Spawned: 1, Record: coord.Bytes("ra")}))
	failure := &message.Failure{NodeID: "b", Error: message.Error{
		Message: "boom", Code: "E_BOOM",
		Details: map[string]any{"status": 500.0, "path": []any{"x", 1.0}},
	}}
	notLast(t, "Finish b (halt)", finish(t, c, exec, "b", coord.Finish{Halt: failure, End: map[string]any{"$b": "partial"}}))

	begin(t, c, exec, "c", coord.Drop) // a redelivery of c
	begin(t, c, exec, "d", coord.Drop)
	if b := begin(t, c, exec, "a", coord.Replay); string(b.Record) != "ra" {
		t.Fatalf("Begin a after halt: Record %q, want %q", b.Record, "ra")
	}
	begin(t, c, exec, "b", coord.Replay)

	// c was running when b halted: its successors still count.
	notLast(t, "Finish c (ran before the halt)", finish(t, c, exec, "c", coord.Finish{Spawned: 2}))
	begin(t, c, exec, "e", coord.Drop)
	begin(t, c, exec, "f", coord.Drop)
	notLast(t, "Finish d (dropped)", finish(t, c, exec, "d", coord.Finish{}))
	// A second Halt does not replace the first's Failure.
	second := &message.Failure{NodeID: "e", Error: message.Error{Message: "second", Code: "E_2"}}
	notLast(t, "Finish e (dropped, second halt)", finish(t, c, exec, "e", coord.Finish{Halt: second}))
	o := finish(t, c, exec, "f", coord.Finish{})
	check := func(what string, o coord.Outcome) {
		t.Helper()
		if !o.Last() || o.Completion.Status != message.CompletionHalted {
			t.Fatalf("%s: Outcome %v, want Last with Status %q", what, o, message.CompletionHalted)
		}
		if !reflect.DeepEqual(o.Completion.Failure, failure) {
			t.Fatalf("%s: Failure %#v, want the first halt's %#v", what, o.Completion.Failure, failure)
		}
		if want := map[string]any{"$b": "partial"}; !reflect.DeepEqual(o.Completion.FinalContext, want) {
			t.Fatalf("%s: FinalContext %#v, want %#v", what, o.Completion.FinalContext, want)
		}
	}
	check("Finish f", o)
	o = finish(t, c, exec, "f", coord.Finish{})
	if o.Case != coord.Duplicate {
		t.Fatalf("duplicate Finish f: Outcome %v, want duplicate", o)
	}
	check("duplicate Finish f", o)
}

// testEndMerge: End contexts of several branches merge at the top level,
// later Finishes winning a key, and come back as JSON values.
func testEndMerge(t *testing.T, c coord.Coordinator) {
	const exec = "exec-merge"
	start(t, c, exec, 1)
	notLast(t, "Finish root", finish(t, c, exec, "root", coord.Finish{Spawned: 4}))
	notLast(t, "Finish b1", finish(t, c, exec, "b1", coord.Finish{End: map[string]any{
		"$trigger": map[string]any{"id": 7.0, "tags": []any{"a", "b"}},
		"$shared":  "b1",
		"$nums":    []any{1.0, 2.5, -3.0, 1e21},
	}}))
	notLast(t, "Finish b2", finish(t, c, exec, "b2", coord.Finish{End: map[string]any{
		"$http": map[string]any{
			"status": 200.0,
			"body":   map[string]any{"ok": true, "none": nil, "list": []any{map[string]any{"k": "v"}, []any{}}},
		},
		"$shared": "b2",
	}}))
	notLast(t, "Finish b3 (no End)", finish(t, c, exec, "b3", coord.Finish{}))
	o := finish(t, c, exec, "b4", coord.Finish{End: map[string]any{
		"$shared":  "b4",
		"$unicode": "héllo \u2603 \"quoted\"",
		"$empty":   map[string]any{},
		"$false":   false,
	}})
	completed(t, "Finish b4", o, map[string]any{
		"$trigger": map[string]any{"id": 7.0, "tags": []any{"a", "b"}},
		"$nums":    []any{1.0, 2.5, -3.0, 1e21},
		"$http": map[string]any{
			"status": 200.0,
			"body":   map[string]any{"ok": true, "none": nil, "list": []any{map[string]any{"k": "v"}, []any{}}},
		},
		"$shared":  "b4",
		"$unicode": "héllo \u2603 \"quoted\"",
		"$empty":   map[string]any{},
		"$false":   false,
	})
	// The caller owns FinalContext: changing it does not change what a
	// duplicate gets.
	o.Completion.FinalContext["$shared"] = "mutated"
	if d := finish(t, c, exec, "b4", coord.Finish{}); d.Completion.FinalContext["$shared"] != "b4" {
		t.Fatalf("duplicate Finish b4: $shared %v, want %q (FinalContext shared with an earlier caller)", d.Completion.FinalContext["$shared"], "b4")
	}

	// An execution without any End still gets a non-nil FinalContext.
	start(t, c, "exec-merge-empty", 1)
	completed(t, "Finish without End", finish(t, c, "exec-merge-empty", "only", coord.Finish{}), map[string]any{})
}

// testStartIdempotent: starting an existing execution again changes nothing,
// also after some messages finished and after it ended.
func testStartIdempotent(t *testing.T, c coord.Coordinator) {
	const exec = "exec-start"
	start(t, c, exec, 2)
	start(t, c, exec, 2)
	start(t, c, exec, 5)
	notLast(t, "Finish a", finish(t, c, exec, "a", coord.Finish{}))
	start(t, c, exec, 2) // would reset the count to 2 if not idempotent
	completed(t, "Finish b", finish(t, c, exec, "b", coord.Finish{}), map[string]any{})
	start(t, c, exec, 1) // ended: still changes nothing
	begin(t, c, exec, "a", coord.Replay)
	begin(t, c, exec, "new", coord.Drop)
}

// testInvalidArguments: Start needs at least one first message, Finish a
// Spawned of at least 0; a rejected call changes nothing.
func testInvalidArguments(t *testing.T, c coord.Coordinator) {
	ctx := ctxFor(t)
	for _, n := range []int{0, -1} {
		if err := c.Start(ctx, "exec-invalid", n); err == nil {
			t.Fatalf("Start(n=%d): no error", n)
		}
	}
	begin(t, c, "exec-invalid", "a", coord.Drop)

	const exec = "exec-invalid-spawned"
	start(t, c, exec, 1)
	if o, err := c.Finish(ctx, exec, "a", coord.Finish{Spawned: -1}); err == nil {
		t.Fatalf("Finish(Spawned -1): Outcome %v and no error", o)
	}
	begin(t, c, exec, "a", coord.Run)
	completed(t, "Finish a", finish(t, c, exec, "a", coord.Finish{}), map[string]any{})
}

// testUnknownExecution: Begin drops and Finish fails with ErrUnknownExecution.
func testUnknownExecution(t *testing.T, c coord.Coordinator) {
	begin(t, c, "exec-never-started", "a", coord.Drop)
	_, err := c.Finish(ctxFor(t), "exec-never-started", "a", coord.Finish{Spawned: 1})
	if !errors.Is(err, coord.ErrUnknownExecution) {
		t.Fatalf("Finish on unknown execution: %v, want ErrUnknownExecution", err)
	}
	// That Finish created nothing.
	begin(t, c, "exec-never-started", "a", coord.Drop)
}

// testAfterEnd: once an execution ended, messages that never finished in it
// Drop and their Finish fails with ErrUnknownExecution.
func testAfterEnd(t *testing.T, c coord.Coordinator) {
	const exec = "exec-after-end"
	start(t, c, exec, 1)
	completed(t, "Finish a", finish(t, c, exec, "a", coord.Finish{}), map[string]any{})
	begin(t, c, exec, "stray", coord.Drop)
	_, err := c.Finish(ctxFor(t), exec, "stray", coord.Finish{})
	if !errors.Is(err, coord.ErrUnknownExecution) {
		t.Fatalf("Finish of a new id after the end: %v, want ErrUnknownExecution", err)
	}
	o := finish(t, c, exec, "a", coord.Finish{})
	if o.Case != coord.Duplicate {
		t.Fatalf("duplicate Finish a after a stray Finish: Outcome %v, want duplicate", o)
	}
	completed(t, "duplicate Finish a", o, map[string]any{})
	// A branch suspending after the end is told to wake: nothing waits for it.
	if wake, err := c.Park(ctxFor(t), exec, "late-wait", time.Now().Add(time.Hour)); err != nil || !wake {
		t.Fatalf("Park after the end: wake %v, %v; want wake (the execution ended)", wake, err)
	}
}

// testInterleavedExecutions: many executions sharing message ids run through
// one worker pool at once, some halted, each ending once with its own
// context and status.
func testInterleavedExecutions(t *testing.T, c coord.Coordinator) {
	const execs = 40
	trees := map[string]tree{}
	halt := map[job]*message.Failure{}
	for i := range execs {
		exec := fmt.Sprintf("exec-inter-%d", i)
		// The same ids ("m0", "m1", ...) in every execution.
		trees[exec] = newTree("m", 1+i%3, 30+i, []int{1 + i%3, 0, 2, 1})
		if i%4 == 0 {
			halt[job{exec, "m1"}] = &message.Failure{NodeID: exec, Error: message.Error{Message: "halted", Code: "E_HALT"}}
		}
	}
	lasts := runTrees(t, c, trees, 32, halt)
	for exec, tr := range trees {
		got := lasts[exec]
		if len(got) != 1 {
			t.Fatalf("%s: %d Finishes had Last, want exactly 1", exec, len(got))
		}
		o := got[0]
		if f, halted := halt[job{exec, "m1"}]; halted {
			if o.Completion.Status != message.CompletionHalted || o.Completion.Failure == nil || o.Completion.Failure.NodeID != f.NodeID {
				t.Fatalf("%s: Status %q Failure %+v, want halted by %q", exec, o.Completion.Status, o.Completion.Failure, f.NodeID)
			}
			// Which leaves ran depends on timing; every one must be ours.
			leaves := leafContext(tr)
			for k := range o.Completion.FinalContext {
				if _, ok := leaves[k]; !ok {
					t.Fatalf("%s: FinalContext key %q is no leaf of this execution", exec, k)
				}
			}
			continue
		}
		completed(t, exec, o, leafContext(tr))
	}
}

// testPublished: once the completion is recorded published, duplicate
// Finishes of the ended execution's messages say so (its completer's among
// them, still Last with the same Outcome); before, and for a live execution,
// recording changes nothing.
func testPublished(t *testing.T, c coord.Coordinator) {
	const exec = "exec-published"
	ctx := ctxFor(t)
	if err := c.Published(ctx, "exec-never-started"); err != nil {
		t.Fatalf("Published of an unknown execution: %v", err)
	}
	start(t, c, exec, 2) // a, b
	notLast(t, "Finish a", finish(t, c, exec, "a", coord.Finish{End: map[string]any{"$a": 1.0}}))
	// Live: recording is ignored, so the completion is not suppressed later.
	if err := c.Published(ctx, exec); err != nil {
		t.Fatalf("Published of a live execution: %v", err)
	}
	if o := finish(t, c, exec, "a", coord.Finish{}); o.Case != coord.Duplicate || o.Last() {
		t.Fatalf("duplicate Finish a while live, after Published: Outcome %v, want duplicate, not last", o)
	}
	want := map[string]any{"$a": 1.0, "$b": 2.0}
	o := finish(t, c, exec, "b", coord.Finish{End: map[string]any{"$b": 2.0}})
	completed(t, "Finish b", o, want)
	if o.Case != coord.Recorded {
		t.Fatalf("Finish b: Outcome %v on the first Finish, want recorded", o)
	}
	// Ended, not yet published: the completer's duplicate must publish again.
	o = finish(t, c, exec, "b", coord.Finish{})
	completed(t, "duplicate Finish b before Published", o, want)
	if o.Case != coord.Duplicate {
		t.Fatalf("duplicate Finish b before Published: Outcome %v, want duplicate (not published)", o)
	}
	for range 2 {
		if err := c.Published(ctx, exec); err != nil {
			t.Fatalf("Published: %v", err)
		}
	}
	o = finish(t, c, exec, "b", coord.Finish{Spawned: 2})
	completed(t, "duplicate Finish b after Published", o, want)
	if o.Case != coord.DuplicatePublished {
		t.Fatalf("duplicate Finish b after Published: Outcome %v, want duplicate-published", o)
	}
	if o := finish(t, c, exec, "a", coord.Finish{}); o.Case != coord.DuplicatePublished || o.Last() {
		t.Fatalf("duplicate Finish a after Published: Outcome %v, want duplicate-published, not last", o)
	}
	// An optimistic Finish of a finished id still gets Replayed (then its
	// caller's plain Finish gets DuplicatePublished).
	if o := finish(t, c, exec, "a", coord.Finish{Mode: coord.FinishOptimistic}); o.Case != coord.Replayed {
		t.Fatalf("optimistic Finish a after Published: Outcome %v, want replayed", o)
	}
}
