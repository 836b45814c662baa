package coordtest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/rune-org/rune/coord"
)

// RunBarriers runs the conformance suite of coord.Barriers. newBarriers
// returns an instance isolated from every other call's (a fresh instance, or
// a fresh key prefix); it registers its own cleanup with t. Subtests run in
// parallel.
func RunBarriers(t *testing.T, newBarriers func(t *testing.T) coord.Barriers) {
	cases := []struct {
		name string
		fn   func(t *testing.T, b coord.Barriers)
	}{
		{"AggregatorConcurrent", testAggregatorConcurrent},
		{"RepeatAfterComplete", testRepeatAfterComplete},
		{"WaitForAny", testWaitForAny},
		{"OpenState", testOpenState},
		{"OpenIdempotent", testOpenIdempotent},
		{"ArriveWithoutOpen", testArriveWithoutOpen},
		{"Cancel", testCancel},
		{"CancelUnknown", testCancelUnknown},
		{"CancelAfterComplete", testCancelAfterComplete},
		{"KeysIsolated", testKeysIsolated},
		{"InvalidArguments", testBarrierInvalidArguments},
		{"BigValues", testBigValues},
		{"EmptyValue", testEmptyValue},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newBarriers(t))
		})
	}
}

func arrive(t *testing.T, b coord.Barriers, exec, key string, spec coord.BarrierSpec, slot int, value []byte) coord.Arrival {
	t.Helper()
	a, err := b.Arrive(ctxFor(t), exec, key, spec, slot, value)
	if err != nil {
		t.Fatalf("Arrive(%q, %q, slot %d): %v", exec, key, slot, err)
	}
	return a
}

func arriveClosed(t *testing.T, b coord.Barriers, exec, key string, spec coord.BarrierSpec, slot int) {
	t.Helper()
	a, err := b.Arrive(ctxFor(t), exec, key, spec, slot, []byte("late"))
	if !errors.Is(err, coord.ErrBarrierClosed) {
		t.Fatalf("Arrive(%q, %q, slot %d) on a closed barrier: %+v, %v; want ErrBarrierClosed", exec, key, slot, brief(a), err)
	}
}

func open(t *testing.T, b coord.Barriers, exec, key string, spec coord.BarrierSpec) {
	t.Helper()
	if err := b.Open(ctxFor(t), exec, key, spec); err != nil {
		t.Fatalf("Open(%q, %q): %v", exec, key, err)
	}
}

func cancel(t *testing.T, b coord.Barriers, exec, key string, want bool) {
	t.Helper()
	was, err := b.Cancel(ctxFor(t), exec, key)
	if err != nil {
		t.Fatalf("Cancel(%q, %q): %v", exec, key, err)
	}
	if was != want {
		t.Fatalf("Cancel(%q, %q) = %v, want %v", exec, key, was, want)
	}
}

// brief prints an Arrival without its (possibly huge) Values.
func brief(a coord.Arrival) string {
	return fmt.Sprintf("{Duplicate:%v Arrived:%d Complete:%v Values:%d State:%q}", a.Duplicate, a.Arrived, a.Complete, len(a.Values), a.State)
}

// pending fails unless a is an incomplete arrival with the given flags.
func pending(t *testing.T, what string, a coord.Arrival, dup bool, arrived int) {
	t.Helper()
	if a.Complete || a.Duplicate != dup || a.Arrived != arrived || a.Values != nil {
		t.Fatalf("%s: %s, want pending with Duplicate %v and Arrived %d", what, brief(a), dup, arrived)
	}
}

// complete fails unless a completed the barrier with values want (nil
// entries for slots that never arrived) and state.
func complete(t *testing.T, what string, a coord.Arrival, dup bool, arrived int, want [][]byte, state []byte) {
	t.Helper()
	if !a.Complete || a.Duplicate != dup || a.Arrived != arrived {
		t.Fatalf("%s: %s, want Complete with Duplicate %v and Arrived %d", what, brief(a), dup, arrived)
	}
	if !bytes.Equal(a.State, state) {
		t.Fatalf("%s: State %q, want %q", what, a.State, state)
	}
	if len(a.Values) != len(want) {
		t.Fatalf("%s: %d Values, want %d", what, len(a.Values), len(want))
	}
	for i := range want {
		if (want[i] == nil) != (a.Values[i] == nil) || !bytes.Equal(a.Values[i], want[i]) {
			t.Fatalf("%s: Values[%d] = %.40q (nil %v), want %.40q (nil %v)", what, i, a.Values[i], a.Values[i] == nil, want[i], want[i] == nil)
		}
	}
}

// itemValue is a distinct value per slot, of varying length and with bytes
// that are not valid UTF-8, so any mix-up or re-encoding shows.
func itemValue(slot int) []byte {
	v := []byte(fmt.Sprintf(`{"item":%d,"pad":"%s"}`, slot, strings.Repeat("x", slot%17)))
	return append(v, 0, 0xff, byte(slot))
}

// testAggregatorConcurrent: 1,000 slots arrive from 50 goroutines, with
// duplicates of random slots interleaved; exactly one arrival completes it,
// with every value in slot order, and each duplicate is flagged.
func testAggregatorConcurrent(t *testing.T, b coord.Barriers) {
	const exec, key, total, workers = "exec-agg", "agg", 1000, 50
	spec := coord.BarrierSpec{Total: total, Need: total}
	open(t, b, exec, key, coord.BarrierSpec{Total: total, Need: total, State: []byte("split-ctx")})

	// Each slot once, plus 300 duplicates of random slots sent after their
	// first arrival by the same goroutine (a redelivery), in a random order.
	type job struct {
		slot int
		dup  bool
	}
	rng := rand.New(rand.NewPCG(1, 2))
	queues := make([][]job, workers)
	for _, slot := range rng.Perm(total) {
		w := rng.IntN(workers)
		queues[w] = append(queues[w], job{slot: slot})
	}
	for range 300 {
		w := rng.IntN(workers)
		if len(queues[w]) == 0 {
			continue
		}
		j := queues[w][rng.IntN(len(queues[w]))]
		if !j.dup {
			queues[w] = append(queues[w], job{slot: j.slot, dup: true})
		}
	}

	ctx := ctxFor(t)
	var (
		mu        sync.Mutex
		completes []coord.Arrival
		firsts    = map[int]int{} // slot -> Arrived reported on first arrival
		dups      int
		wg        sync.WaitGroup
		errs      errorList
	)
	for w := range workers {
		wg.Go(func() {
			for _, j := range queues[w] {
				a, err := b.Arrive(ctx, exec, key, spec, j.slot, itemValue(j.slot))
				if err != nil {
					// The duplicate of a slot that arrived before completion
					// may come after it: then the barrier is closed to it.
					if j.dup && errors.Is(err, coord.ErrBarrierClosed) {
						continue
					}
					errs.add(fmt.Errorf("arrive slot %d (duplicate %v): %v", j.slot, j.dup, err))
					return
				}
				mu.Lock()
				if a.Complete && !a.Duplicate {
					completes = append(completes, a)
				}
				if j.dup {
					dups++
					if !a.Duplicate {
						errs.add(fmt.Errorf("repeated Arrive slot %d: %s, want Duplicate", j.slot, brief(a)))
					}
				} else {
					firsts[j.slot] = a.Arrived
					if a.Duplicate {
						errs.add(fmt.Errorf("first Arrive slot %d: Duplicate set", j.slot))
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	errs.check(t)
	if len(completes) != 1 {
		t.Fatalf("%d arrivals completed the barrier, want exactly 1", len(completes))
	}
	want := make([][]byte, total)
	for i := range want {
		want[i] = itemValue(i)
	}
	complete(t, "completing Arrive", completes[0], false, total, want, []byte("split-ctx"))
	// Arrived counts distinct slots: the first arrivals saw 1..total, once each.
	seen := make([]bool, total+1)
	for slot, n := range firsts {
		if n < 1 || n > total || seen[n] {
			t.Fatalf("first Arrive slot %d: Arrived %d, not a distinct count in 1..%d", slot, n, total)
		}
		seen[n] = true
	}
	if dups == 0 {
		t.Fatalf("test sent no duplicates")
	}
}

// testRepeatAfterComplete: the completing slot's repeat gets the complete
// Arrival again (Duplicate); any other slot, earlier arrived or not, gets
// ErrBarrierClosed.
func testRepeatAfterComplete(t *testing.T, b coord.Barriers) {
	const exec, key = "exec-repeat", "agg"
	spec := coord.BarrierSpec{Total: 4, Need: 4}
	open(t, b, exec, key, coord.BarrierSpec{Total: 4, Need: 4, State: []byte("st")})
	for i, slot := range []int{2, 0, 3} {
		pending(t, fmt.Sprintf("Arrive slot %d", slot), arrive(t, b, exec, key, spec, slot, itemValue(slot)), false, i+1)
	}
	want := [][]byte{itemValue(0), itemValue(1), itemValue(2), itemValue(3)}
	complete(t, "Arrive slot 1", arrive(t, b, exec, key, spec, 1, itemValue(1)), false, 4, want, []byte("st"))
	// A redelivery may carry different bytes (a re-run): the first value stays.
	complete(t, "repeat slot 1", arrive(t, b, exec, key, spec, 1, []byte("other")), true, 4, want, []byte("st"))
	complete(t, "second repeat slot 1", arrive(t, b, exec, key, spec, 1, itemValue(1)), true, 4, want, []byte("st"))
	arriveClosed(t, b, exec, key, spec, 0)
	arriveClosed(t, b, exec, key, spec, 3)
}

// testWaitForAny: Need 1 of 3; the first arrival wins with nil for the
// others, the winner's repeat is a complete Duplicate, everyone else is
// closed out.
func testWaitForAny(t *testing.T, b coord.Barriers) {
	const exec, key = "exec-any", "merge"
	spec := coord.BarrierSpec{Total: 3, Need: 1}
	won := arrive(t, b, exec, key, spec, 1, []byte("fast"))
	want := [][]byte{nil, []byte("fast"), nil}
	complete(t, "first Arrive", won, false, 1, want, nil)
	arriveClosed(t, b, exec, key, spec, 0)
	arriveClosed(t, b, exec, key, spec, 2)
	complete(t, "winner's repeat", arrive(t, b, exec, key, spec, 1, []byte("fast")), true, 1, want, nil)

	// Raced: exactly one of many concurrent parents wins.
	const raced = "merge-raced"
	spec = coord.BarrierSpec{Total: 20, Need: 1}
	ctx := ctxFor(t)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []int
		errs    errorList
	)
	for slot := range spec.Total {
		wg.Go(func() {
			a, err := b.Arrive(ctx, exec, raced, spec, slot, itemValue(slot))
			switch {
			case errors.Is(err, coord.ErrBarrierClosed):
			case err != nil:
				errs.add(fmt.Errorf("arrive slot %d: %v", slot, err))
			case !a.Complete || a.Duplicate:
				errs.add(fmt.Errorf("arrive slot %d: %s, want Complete or ErrBarrierClosed", slot, brief(a)))
			default:
				mu.Lock()
				winners = append(winners, slot)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	errs.check(t)
	if len(winners) != 1 {
		t.Fatalf("winners %v, want exactly one", winners)
	}
}

// testOpenState: the state given to Open comes back with the completion and
// its repeats; the spec of a later Arrive does not replace it.
func testOpenState(t *testing.T, b coord.Barriers) {
	const exec, key = "exec-state", "agg"
	state := []byte(`{"$split":{"users":[1,2]}}` + "\x00\xff")
	open(t, b, exec, key, coord.BarrierSpec{Total: 2, Need: 2, State: state})
	spec := coord.BarrierSpec{Total: 2, Need: 2, State: []byte("ignored")}
	pending(t, "Arrive slot 0", arrive(t, b, exec, key, spec, 0, []byte("a")), false, 1)
	want := [][]byte{[]byte("a"), []byte("b")}
	complete(t, "Arrive slot 1", arrive(t, b, exec, key, spec, 1, []byte("b")), false, 2, want, state)
	complete(t, "repeat slot 1", arrive(t, b, exec, key, spec, 1, []byte("b")), true, 2, want, state)
}

// testOpenIdempotent: opening again, even with another spec, changes
// nothing: neither the arrivals, nor Total and Need, nor the state.
func testOpenIdempotent(t *testing.T, b coord.Barriers) {
	const exec, key = "exec-open", "agg"
	spec := coord.BarrierSpec{Total: 3, Need: 3, State: []byte("first")}
	open(t, b, exec, key, spec)
	pending(t, "Arrive slot 0", arrive(t, b, exec, key, spec, 0, []byte("a")), false, 1)
	pending(t, "Arrive slot 2", arrive(t, b, exec, key, spec, 2, []byte("c")), false, 2)
	open(t, b, exec, key, spec)
	open(t, b, exec, key, coord.BarrierSpec{Total: 3, Need: 1, State: []byte("second")})
	pending(t, "repeat slot 0 after reopening", arrive(t, b, exec, key, spec, 0, []byte("a")), true, 2)
	want := [][]byte{[]byte("a"), []byte("b"), []byte("c")}
	complete(t, "Arrive slot 1", arrive(t, b, exec, key, spec, 1, []byte("b")), false, 3, want, []byte("first"))
	// Opening a completed barrier does not reopen it.
	open(t, b, exec, key, spec)
	arriveClosed(t, b, exec, key, spec, 0)
}

// testArriveWithoutOpen: the first Arrive creates the barrier from its spec,
// without state.
func testArriveWithoutOpen(t *testing.T, b coord.Barriers) {
	const exec, key = "exec-noopen", "merge"
	spec := coord.BarrierSpec{Total: 2, Need: 2, State: []byte("ignored")}
	pending(t, "Arrive slot 1", arrive(t, b, exec, key, spec, 1, []byte("b")), false, 1)
	// Open after the first arrival changes nothing.
	open(t, b, exec, key, coord.BarrierSpec{Total: 5, Need: 5, State: []byte("late")})
	complete(t, "Arrive slot 0", arrive(t, b, exec, key, spec, 0, []byte("a")), false, 2,
		[][]byte{[]byte("a"), []byte("b")}, nil)
}

// testCancel: Cancel closes an open barrier once; arrivals then fail, the
// barrier cannot be reopened, and it never completes.
func testCancel(t *testing.T, b coord.Barriers) {
	const exec, key = "exec-cancel", "agg"
	spec := coord.BarrierSpec{Total: 2, Need: 2}
	open(t, b, exec, key, spec)
	pending(t, "Arrive slot 0", arrive(t, b, exec, key, spec, 0, []byte("a")), false, 1)
	cancel(t, b, exec, key, true)
	cancel(t, b, exec, key, false)
	arriveClosed(t, b, exec, key, spec, 1)
	arriveClosed(t, b, exec, key, spec, 0)
	open(t, b, exec, key, spec)
	arriveClosed(t, b, exec, key, spec, 1)
	cancel(t, b, exec, key, false)

	// Concurrent cancellers: exactly one learns it was open.
	const raced = "agg-raced"
	open(t, b, exec, raced, spec)
	ctx := ctxFor(t)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins int
	)
	for range 20 {
		wg.Go(func() {
			was, err := b.Cancel(ctx, exec, raced)
			if err != nil {
				t.Errorf("Cancel: %v", err)
			}
			if was {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d concurrent Cancels reported wasOpen, want 1", wins)
	}
}

// testCancelUnknown: cancelling a barrier nobody opened or reached closes
// it, so a late first arrival cannot complete it.
func testCancelUnknown(t *testing.T, b coord.Barriers) {
	const exec, key = "exec-cancel-unknown", "merge"
	cancel(t, b, exec, key, true)
	cancel(t, b, exec, key, false)
	arriveClosed(t, b, exec, key, coord.BarrierSpec{Total: 2, Need: 1}, 0)
	arriveClosed(t, b, exec, key, coord.BarrierSpec{Total: 5, Need: 5}, 4)
	open(t, b, exec, key, coord.BarrierSpec{Total: 2, Need: 1})
	arriveClosed(t, b, exec, key, coord.BarrierSpec{Total: 2, Need: 1}, 1)
}

// testCancelAfterComplete: a completed barrier cannot be cancelled, and its
// winner still repeats.
func testCancelAfterComplete(t *testing.T, b coord.Barriers) {
	const exec, key = "exec-cancel-done", "agg"
	spec := coord.BarrierSpec{Total: 1, Need: 1}
	complete(t, "Arrive slot 0", arrive(t, b, exec, key, spec, 0, []byte("a")), false, 1, [][]byte{[]byte("a")}, nil)
	cancel(t, b, exec, key, false)
	complete(t, "repeat slot 0", arrive(t, b, exec, key, spec, 0, []byte("a")), true, 1, [][]byte{[]byte("a")}, nil)
}

// testKeysIsolated: the same key in two executions, and different keys in
// one, are different barriers, including keys that prefix each other or
// contain separators and braces.
func testKeysIsolated(t *testing.T, b coord.Barriers) {
	execs := []string{"exec-iso-a", "exec-iso-b", "exec-iso-a:bar", "exec-iso-{x}"}
	keys := []string{"agg", "agg:0", "agg:meta", "ag", "{agg}", "merge/split_1/3", "agg:vals"}
	spec := coord.BarrierSpec{Total: 2, Need: 2}
	for _, exec := range execs {
		for _, key := range keys {
			open(t, b, exec, key, coord.BarrierSpec{Total: 2, Need: 2, State: []byte(exec + "|" + key)})
			pending(t, exec+" "+key, arrive(t, b, exec, key, spec, 0, []byte(exec+"|"+key+"|0")), false, 1)
		}
	}
	// Cancelling one touches no other.
	cancel(t, b, execs[1], keys[0], true)
	arriveClosed(t, b, execs[1], keys[0], spec, 1)
	for _, exec := range execs {
		for _, key := range keys {
			if exec == execs[1] && key == keys[0] {
				continue
			}
			a := arrive(t, b, exec, key, spec, 1, []byte(exec+"|"+key+"|1"))
			want := [][]byte{[]byte(exec + "|" + key + "|0"), []byte(exec + "|" + key + "|1")}
			complete(t, exec+" "+key, a, false, 2, want, []byte(exec+"|"+key))
		}
	}
}

// testBarrierInvalidArguments: a slot out of range or an invalid spec is an error
// naming the bad value, and changes nothing.
func testBarrierInvalidArguments(t *testing.T, b coord.Barriers) {
	const exec, key = "exec-invalid", "agg"
	ctx := ctxFor(t)
	spec := coord.BarrierSpec{Total: 3, Need: 3}
	for _, slot := range []int{-1, 3, 1000} {
		a, err := b.Arrive(ctx, exec, key, spec, slot, []byte("x"))
		if err == nil {
			t.Fatalf("Arrive slot %d of 3: %s and no error", slot, brief(a))
		}
		if !strings.Contains(err.Error(), strconv.Itoa(slot)) {
			t.Fatalf("Arrive slot %d of 3: error %q does not name the slot", slot, err)
		}
		if errors.Is(err, coord.ErrBarrierClosed) {
			t.Fatalf("Arrive slot %d of 3: %v, want an argument error, not ErrBarrierClosed", slot, err)
		}
	}
	for _, bad := range []coord.BarrierSpec{{Total: 0, Need: 0}, {Total: -1, Need: 1}, {Total: 2, Need: 0}, {Total: 2, Need: 3}, {Total: 2, Need: -1}} {
		if err := b.Open(ctx, exec, "bad", bad); err == nil {
			t.Fatalf("Open with %+v: no error", bad)
		}
		if a, err := b.Arrive(ctx, exec, "bad", bad, 0, []byte("x")); err == nil {
			t.Fatalf("Arrive with %+v: %s and no error", bad, brief(a))
		}
	}
	// Nothing was recorded: the barrier still needs all three.
	pending(t, "Arrive slot 0", arrive(t, b, exec, key, spec, 0, []byte("a")), false, 1)
	pending(t, "Arrive slot 1", arrive(t, b, exec, key, spec, 1, []byte("b")), false, 2)
	complete(t, "Arrive slot 2", arrive(t, b, exec, key, spec, 2, []byte("c")), false, 3,
		[][]byte{[]byte("a"), []byte("b"), []byte("c")}, nil)
	// Nor by the bad Opens: "bad" is created by a valid Arrive.
	pending(t, "Arrive bad slot 0", arrive(t, b, exec, "bad", spec, 0, []byte("a")), false, 1)

	// The slot is checked against the barrier's own Total, not the caller's.
	open(t, b, exec, "small", coord.BarrierSpec{Total: 2, Need: 2})
	if a, err := b.Arrive(ctx, exec, "small", coord.BarrierSpec{Total: 10, Need: 10}, 5, []byte("x")); err == nil || !strings.Contains(err.Error(), "5") {
		t.Fatalf("Arrive slot 5 of a barrier of 2 opened with a spec of 10: %s, %v; want an error naming slot 5", brief(a), err)
	}
}

// testBigValues: values and state of 1 MiB round-trip exactly.
func testBigValues(t *testing.T, b coord.Barriers) {
	const exec, key = "exec-big", "agg"
	rng := rand.New(rand.NewPCG(3, 4))
	big := func() []byte {
		v := make([]byte, 1<<20)
		for i := range v {
			v[i] = byte(rng.Uint32())
		}
		return v
	}
	state := big()
	want := [][]byte{big(), big(), big()}
	spec := coord.BarrierSpec{Total: 3, Need: 3}
	open(t, b, exec, key, coord.BarrierSpec{Total: 3, Need: 3, State: state})
	pending(t, "Arrive slot 2", arrive(t, b, exec, key, spec, 2, want[2]), false, 1)
	pending(t, "Arrive slot 0", arrive(t, b, exec, key, spec, 0, want[0]), false, 2)
	complete(t, "Arrive slot 1", arrive(t, b, exec, key, spec, 1, want[1]), false, 3, want, state)
}

// testEmptyValue: an empty value is an arrival, distinct from a slot that
// never arrived (nil).
func testEmptyValue(t *testing.T, b coord.Barriers) {
	const exec, key = "exec-empty", "merge"
	spec := coord.BarrierSpec{Total: 3, Need: 2}
	pending(t, "Arrive slot 0", arrive(t, b, exec, key, spec, 0, []byte{}), false, 1)
	complete(t, "Arrive slot 2", arrive(t, b, exec, key, spec, 2, nil), false, 2, [][]byte{{}, nil, {}}, nil)
}

// RunBlobs runs the conformance suite of coord.Blobs. newBlobs returns an
// instance isolated from every other call's; it registers its own cleanup
// with t. Subtests run in parallel.
func RunBlobs(t *testing.T, newBlobs func(t *testing.T) coord.Blobs) {
	cases := []struct {
		name string
		fn   func(t *testing.T, b coord.Blobs)
	}{
		{"RoundTrip", testBlobRoundTrip},
		{"ContentAddressed", testBlobContentAddressed},
		{"ExecutionsIsolated", testBlobIsolated},
		{"Release", testBlobRelease},
		{"Unknown", testBlobUnknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newBlobs(t))
		})
	}
}

func put(t *testing.T, b coord.Blobs, exec string, data []byte) string {
	t.Helper()
	ref, err := b.Put(ctxFor(t), exec, data)
	if err != nil {
		t.Fatalf("Put(%q, %d bytes): %v", exec, len(data), err)
	}
	if ref == "" {
		t.Fatalf("Put(%q, %d bytes): empty ref", exec, len(data))
	}
	return ref
}

func get(t *testing.T, b coord.Blobs, exec, ref string, want []byte) {
	t.Helper()
	got, err := b.Get(ctxFor(t), exec, ref)
	if err != nil {
		t.Fatalf("Get(%q, %q): %v", exec, ref, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Get(%q, %q): %d bytes %.40q, want %d bytes %.40q", exec, ref, len(got), got, len(want), want)
	}
}

func getMissing(t *testing.T, b coord.Blobs, exec, ref string) {
	t.Helper()
	got, err := b.Get(ctxFor(t), exec, ref)
	if !errors.Is(err, coord.ErrBlobNotFound) {
		t.Fatalf("Get(%q, %q): %d bytes, %v; want ErrBlobNotFound", exec, ref, len(got), err)
	}
}

// testBlobRoundTrip: data of every size, binary included, comes back
// exactly, and the caller may reuse its buffers.
func testBlobRoundTrip(t *testing.T, b coord.Blobs) {
	const exec = "exec-blob"
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 100, 64 << 10, 3 << 20} {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		want := bytes.Clone(data)
		ref := put(t, b, exec, data)
		clear(data) // the store must not keep the caller's buffer
		get(t, b, exec, ref, want)
		got, _ := b.Get(ctxFor(t), exec, ref)
		clear(got) // nor hand out its own
		get(t, b, exec, ref, want)
	}
}

// testBlobContentAddressed: the same data gives the same ref, different data
// a different one.
func testBlobContentAddressed(t *testing.T, b coord.Blobs) {
	const exec = "exec-blob-ca"
	r1 := put(t, b, exec, []byte("hello"))
	r2 := put(t, b, exec, []byte("hello"))
	if r1 != r2 {
		t.Fatalf("same data, refs %q and %q", r1, r2)
	}
	r3 := put(t, b, exec, []byte("hello!"))
	if r3 == r1 {
		t.Fatalf("different data, same ref %q", r1)
	}
	// The same data in another execution has the same ref but its own copy.
	if r4 := put(t, b, "exec-blob-ca-2", []byte("hello")); r4 != r1 {
		t.Fatalf("same data in another execution, refs %q and %q", r1, r4)
	}
	get(t, b, exec, r1, []byte("hello"))
	get(t, b, exec, r3, []byte("hello!"))
}

// testBlobIsolated: a ref of one execution is unknown in another.
func testBlobIsolated(t *testing.T, b coord.Blobs) {
	ref := put(t, b, "exec-blob-a", []byte("only in a"))
	getMissing(t, b, "exec-blob-b", ref)
	getMissing(t, b, "exec-blob-a:x", ref)
	get(t, b, "exec-blob-a", ref, []byte("only in a"))
}

// testBlobRelease: Release deletes every blob of its execution and no other.
func testBlobRelease(t *testing.T, b coord.Blobs) {
	var refs []string
	for i := range 10 {
		refs = append(refs, put(t, b, "exec-blob-rel", []byte("blob "+strconv.Itoa(i))))
	}
	other := put(t, b, "exec-blob-keep", []byte("blob 0"))
	if err := b.Release(ctxFor(t), "exec-blob-rel"); err != nil {
		t.Fatalf("Release: %v", err)
	}
	for _, ref := range refs {
		getMissing(t, b, "exec-blob-rel", ref)
	}
	get(t, b, "exec-blob-keep", other, []byte("blob 0"))
	if err := b.Release(ctxFor(t), "exec-blob-rel"); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	if err := b.Release(ctxFor(t), "exec-blob-never"); err != nil {
		t.Fatalf("Release of an execution without blobs: %v", err)
	}
	// A released execution can store again.
	ref := put(t, b, "exec-blob-rel", []byte("again"))
	get(t, b, "exec-blob-rel", ref, []byte("again"))
}

// testBlobUnknown: a ref never stored is ErrBlobNotFound.
func testBlobUnknown(t *testing.T, b coord.Blobs) {
	getMissing(t, b, "exec-blob-unknown", "no-such-ref")
	put(t, b, "exec-blob-unknown", []byte("x"))
	getMissing(t, b, "exec-blob-unknown", "no-such-ref")
	getMissing(t, b, "exec-blob-unknown", "")
}
