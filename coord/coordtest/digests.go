package coordtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rune-org/rune/coord"
)

// RunDigests is the conformance suite of coord.Digests. newDigests returns
// a store isolated from every other call's.
func RunDigests(t *testing.T, newDigests func(t *testing.T) coord.Digests) {
	cases := []struct {
		name string
		fn   func(t *testing.T, d coord.Digests)
	}{
		{"OpenJoinTake", testDigestOpenJoinTake},
		{"JoinIdempotent", testDigestJoinIdempotent},
		{"ClosesAtWindow", testDigestClosesAtWindow},
		{"TakeCloses", testDigestTakeCloses},
		{"KeysIndependent", testDigestKeysIndependent},
		{"Concurrent", testDigestConcurrent},
		{"Forget", testDigestForget},
		{"Full", testDigestFull},
		{"BadArguments", testDigestBadArguments},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newDigests(t))
		})
	}
}

// digestT0 is a round time near the real one: Redis expires keys by its
// own clock, DigestGrace after a digest's Closes.
var digestT0 = time.Now().UTC().Truncate(time.Second)

func member(id string) coord.DigestMember {
	return coord.DigestMember{ID: id, Execution: "ex-" + id, Value: []byte(`"` + id + `"`)}
}

func mustJoin(t *testing.T, d coord.Digests, key, id string, now time.Time) coord.Digest {
	t.Helper()
	a, err := d.Join(ctxFor(t), key, member(id), now, now.Add(time.Minute))
	if err != nil {
		t.Fatalf("Join(%q, %q): %v", key, id, err)
	}
	return a
}

func mustTake(t *testing.T, d coord.Digests, key, opener string) []string {
	t.Helper()
	vals, err := d.Take(ctxFor(t), key, opener)
	if err != nil {
		t.Fatalf("Take(%q, %q): %v", key, opener, err)
	}
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = string(v)
	}
	return out
}

func wantOpener(t *testing.T, a coord.Digest, opener string, opened bool, closes time.Time) {
	t.Helper()
	if a.Opener != opener || a.Execution != "ex-"+opener || a.Opened != opened || !a.Closes.Equal(closes) {
		t.Fatalf("Join answered %+v, want opener %q (execution ex-%s) opened %v closing %v", a, opener, opener, opened, closes)
	}
}

func wantValues(t *testing.T, got []string, ids ...string) {
	t.Helper()
	want := make([]string, len(ids))
	for i, id := range ids {
		want[i] = `"` + id + `"`
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Take returned %v, want %v", got, want)
	}
}

// The first Join opens the digest with its Closes; later ones join it; Take
// returns every value in order, the opener's first, and again when repeated.
func testDigestOpenJoinTake(t *testing.T, d coord.Digests) {
	closes := digestT0.Add(time.Minute)
	wantOpener(t, mustJoin(t, d, "k", "a", digestT0), "a", true, closes)
	wantOpener(t, mustJoin(t, d, "k", "b", digestT0.Add(time.Second)), "a", false, closes)
	wantOpener(t, mustJoin(t, d, "k", "c", digestT0.Add(59*time.Second)), "a", false, closes)
	wantValues(t, mustTake(t, d, "k", "a"), "a", "b", "c")
	wantValues(t, mustTake(t, d, "k", "a"), "a", "b", "c")
	if got := mustTake(t, d, "k", "nobody"); len(got) != 0 {
		t.Fatalf("Take of an unknown digest returned %v, want none", got)
	}
}

// A redelivered Join returns its first answer and adds nothing, for the
// opener and for a member, even after the digest closed.
func testDigestJoinIdempotent(t *testing.T, d coord.Digests) {
	closes := digestT0.Add(time.Minute)
	mustJoin(t, d, "k", "a", digestT0)
	mustJoin(t, d, "k", "b", digestT0)
	wantOpener(t, mustJoin(t, d, "k", "b", digestT0.Add(time.Second)), "a", false, closes)
	wantOpener(t, mustJoin(t, d, "k", "a", digestT0.Add(2*time.Second)), "a", true, closes)
	wantValues(t, mustTake(t, d, "k", "a"), "a", "b")
	// After the window and the Take, still the first answers.
	wantOpener(t, mustJoin(t, d, "k", "b", digestT0.Add(time.Hour)), "a", false, closes)
	wantOpener(t, mustJoin(t, d, "k", "a", digestT0.Add(time.Hour)), "a", true, closes)
	wantValues(t, mustTake(t, d, "k", "a"), "a", "b")
}

// A Join at or after Closes opens a new digest; the old one keeps its
// values for its opener's Take.
func testDigestClosesAtWindow(t *testing.T, d coord.Digests) {
	mustJoin(t, d, "k", "a", digestT0)
	mustJoin(t, d, "k", "b", digestT0.Add(30*time.Second))
	at := digestT0.Add(time.Minute)
	wantOpener(t, mustJoin(t, d, "k", "c", at), "c", true, at.Add(time.Minute))
	wantOpener(t, mustJoin(t, d, "k", "e", at.Add(time.Second)), "c", false, at.Add(time.Minute))
	wantValues(t, mustTake(t, d, "k", "a"), "a", "b")
	wantValues(t, mustTake(t, d, "k", "c"), "c", "e")
}

// Take closes the digest before its Closes: the next Join opens another.
func testDigestTakeCloses(t *testing.T, d coord.Digests) {
	mustJoin(t, d, "k", "a", digestT0)
	wantValues(t, mustTake(t, d, "k", "a"), "a")
	wantOpener(t, mustJoin(t, d, "k", "b", digestT0.Add(time.Second)), "b", true, digestT0.Add(time.Second+time.Minute))
	wantValues(t, mustTake(t, d, "k", "a"), "a")
	wantValues(t, mustTake(t, d, "k", "b"), "b")
}

func testDigestKeysIndependent(t *testing.T, d coord.Digests) {
	mustJoin(t, d, "alice", "a1", digestT0)
	wantOpener(t, mustJoin(t, d, "bob", "b1", digestT0), "b1", true, digestT0.Add(time.Minute))
	mustJoin(t, d, "alice", "a2", digestT0)
	mustJoin(t, d, "bob", "b2", digestT0)
	wantValues(t, mustTake(t, d, "alice", "a1"), "a1", "a2")
	wantValues(t, mustTake(t, d, "bob", "b1"), "b1", "b2")
	if got := mustTake(t, d, "bob", "a1"); len(got) != 0 {
		t.Fatalf("Take of alice's digest under bob returned %v, want none", got)
	}
}

// Many Joins at once: one opens, every value is kept once.
func testDigestConcurrent(t *testing.T, d coord.Digests) {
	const n = 40
	answers := make([]coord.Digest, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			id := fmt.Sprintf("m%02d", i)
			for range 2 { // each twice: a redelivery
				a, err := d.Join(ctxFor(t), "k", member(id), digestT0, digestT0.Add(time.Minute))
				if err != nil {
					t.Errorf("Join %s: %v", id, err)
					return
				}
				answers[i] = a
			}
		})
	}
	wg.Wait()
	opener := ""
	for i, a := range answers {
		if a.Opened {
			if opener != "" {
				t.Fatalf("both %s and m%02d opened the digest", opener, i)
			}
			opener = a.Opener
		}
	}
	if opener == "" {
		t.Fatal("no Join opened the digest")
	}
	for i, a := range answers {
		if a.Opener != opener {
			t.Fatalf("m%02d joined %q, want %q", i, a.Opener, opener)
		}
	}
	got := mustTake(t, d, "k", opener)
	if len(got) != n || got[0] != `"`+opener+`"` {
		t.Fatalf("Take returned %d values starting %v, want %d starting with the opener %q", len(got), got[:min(len(got), 1)], n, opener)
	}
	seen := map[string]bool{}
	for _, v := range got {
		if seen[v] {
			t.Fatalf("value %s taken twice", v)
		}
		seen[v] = true
	}
}

// Forget drops the values; the members' answers stay, so a redelivered
// Join does not open a digest again.
func testDigestForget(t *testing.T, d coord.Digests) {
	mustJoin(t, d, "k", "a", digestT0)
	mustJoin(t, d, "k", "b", digestT0)
	mustTake(t, d, "k", "a")
	if err := d.Forget(ctxFor(t), "k", "a"); err != nil {
		t.Fatalf("Forget: %v", err)
	}
	if got := mustTake(t, d, "k", "a"); len(got) != 0 {
		t.Fatalf("Take after Forget returned %v, want none", got)
	}
	wantOpener(t, mustJoin(t, d, "k", "b", digestT0.Add(time.Second)), "a", false, digestT0.Add(time.Minute))
	if err := d.Forget(ctxFor(t), "k", "unknown"); err != nil {
		t.Fatalf("Forget of an unknown digest: %v", err)
	}
}

// A digest takes MaxDigestItems values; the next Join fails, and a Join
// after its window opens a new digest.
func testDigestFull(t *testing.T, d coord.Digests) {
	for i := range coord.MaxDigestItems {
		mustJoin(t, d, "k", fmt.Sprintf("m%d", i), digestT0)
	}
	if _, err := d.Join(ctxFor(t), "k", member("over"), digestT0, digestT0.Add(time.Minute)); !errors.Is(err, coord.ErrDigestFull) {
		t.Fatalf("Join of a full digest: %v, want ErrDigestFull", err)
	}
	wantOpener(t, mustJoin(t, d, "k", "over", digestT0.Add(time.Minute)), "over", true, digestT0.Add(2*time.Minute))
	if got := mustTake(t, d, "k", "m0"); len(got) != coord.MaxDigestItems {
		t.Fatalf("the full digest holds %d values, want %d", len(got), coord.MaxDigestItems)
	}
}

func testDigestBadArguments(t *testing.T, d coord.Digests) {
	ctx := ctxFor(t)
	for name, call := range map[string]func() error{
		"empty key": func() error {
			_, err := d.Join(ctx, "", member("a"), digestT0, digestT0.Add(time.Minute))
			return err
		},
		"empty member": func() error {
			_, err := d.Join(ctx, "k", coord.DigestMember{Execution: "x"}, digestT0, digestT0.Add(time.Minute))
			return err
		},
		"empty execution": func() error {
			_, err := d.Join(ctx, "k", coord.DigestMember{ID: "a"}, digestT0, digestT0.Add(time.Minute))
			return err
		},
		"long key": func() error {
			_, err := d.Join(ctx, string(make([]byte, coord.MaxDigestKey+1)), member("a"), digestT0, digestT0.Add(time.Minute))
			return err
		},
		"take empty opener": func() error { _, err := d.Take(ctx, "k", ""); return err },
	} {
		if err := call(); !errors.Is(err, coord.ErrInvalidDigest) {
			t.Errorf("%s: err %v, want ErrInvalidDigest", name, err)
		}
	}
}

// BenchDigestJoin measures one Join per op, from parallelism goroutines
// per GOMAXPROCS (0: one goroutine), over 1,000 keys: each key's first
// Join opens its digest, the others join it (docs/benchmarks.md, issue 36).
func BenchDigestJoin(b *testing.B, d coord.Digests, parallelism int) {
	ctx := context.Background()
	now := time.Now()
	closes := now.Add(time.Hour)
	value := []byte(`{"author":"Grace","text":"Nice post!"}`)
	var n atomic.Int64
	b.ResetTimer()
	runBench(b, parallelism, func(next func() bool) {
		for next() {
			i := n.Add(1)
			m := coord.DigestMember{ID: "m" + strconv.FormatInt(i, 10), Execution: "x" + strconv.FormatInt(i, 10), Value: value}
			if _, err := d.Join(ctx, "bench-"+strconv.FormatInt(i%1000, 10), m, now, closes); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
