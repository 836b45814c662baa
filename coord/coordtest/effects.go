package coordtest

import (
	"sync"
	"testing"

	"github.com/rune-org/rune/coord"
)

// RunEffects is the conformance suite of coord.Effects. newEffects returns a
// store isolated from every other call's.
func RunEffects(t *testing.T, newEffects func(t *testing.T) coord.Effects) {
	cases := []struct {
		name string
		fn   func(t *testing.T, e coord.Effects)
	}{
		{"BeginRecordBegin", testEffectsBeginRecordBegin},
		{"IntentsCount", testEffectsIntentsCount},
		{"FirstRecordWins", testEffectsFirstRecordWins},
		{"KeysIndependent", testEffectsKeysIndependent},
		{"ConcurrentBegin", testEffectsConcurrentBegin},
		{"Withdraw", testEffectsWithdraw},
		{"EmptyKey", testEffectsEmptyKey},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newEffects(t))
		})
	}
}

func mustBegin(t *testing.T, e coord.Effects, key string) coord.Effect {
	t.Helper()
	ef, err := e.Begin(ctxFor(t), key)
	if err != nil {
		t.Fatalf("Begin(%q): %v", key, err)
	}
	return ef
}

// A recorded effect is returned to every later Begin, as recorded.
func testEffectsBeginRecordBegin(t *testing.T, e coord.Effects) {
	if ef := mustBegin(t, e, "k"); ef.Done || ef.Intents != 1 {
		t.Fatalf("first Begin = %+v, want not done, 1 intent", ef)
	}
	if err := e.Record(ctxFor(t), "k", []byte(`{"message_id":"<a@b>"}`)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		ef := mustBegin(t, e, "k")
		if !ef.Done || string(ef.Result) != `{"message_id":"<a@b>"}` {
			t.Fatalf("Begin after Record = %+v (%q), want done with the result", ef, ef.Result)
		}
	}
}

// Begins without a Record are counted: the caller learns an earlier attempt
// may have acted.
func testEffectsIntentsCount(t *testing.T, e coord.Effects) {
	for i := 1; i <= 3; i++ {
		if ef := mustBegin(t, e, "k"); ef.Done || ef.Intents != i {
			t.Fatalf("Begin %d = %+v, want %d intents", i, ef, i)
		}
	}
}

func testEffectsFirstRecordWins(t *testing.T, e coord.Effects) {
	mustBegin(t, e, "k")
	for _, r := range []string{"first", "second"} {
		if err := e.Record(ctxFor(t), "k", []byte(r)); err != nil {
			t.Fatal(err)
		}
	}
	if ef := mustBegin(t, e, "k"); string(ef.Result) != "first" {
		t.Fatalf("Result = %q, want the first record", ef.Result)
	}
	// An empty result is a result.
	if err := e.Record(ctxFor(t), "empty", nil); err != nil {
		t.Fatal(err)
	}
	if ef := mustBegin(t, e, "empty"); !ef.Done || len(ef.Result) != 0 {
		t.Fatalf("Begin after an empty Record = %+v, want done", ef)
	}
}

func testEffectsKeysIndependent(t *testing.T, e coord.Effects) {
	mustBegin(t, e, "a")
	if err := e.Record(ctxFor(t), "a", []byte("A")); err != nil {
		t.Fatal(err)
	}
	if ef := mustBegin(t, e, "b"); ef.Done || ef.Intents != 1 {
		t.Fatalf("Begin(b) = %+v, want a new effect", ef)
	}
}

// Concurrent Begins of one key are counted once each: exactly one sees 1.
func testEffectsConcurrentBegin(t *testing.T, e coord.Effects) {
	const n = 16
	var wg sync.WaitGroup
	seen := make([]int, n+1)
	var mu sync.Mutex
	for range n {
		wg.Go(func() {
			ef, err := e.Begin(ctxFor(t), "k")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if ef.Intents < 1 || ef.Intents > n {
				t.Errorf("Intents = %d, out of 1..%d", ef.Intents, n)
				return
			}
			seen[ef.Intents]++
		})
	}
	wg.Wait()
	for i := 1; i <= n; i++ {
		if seen[i] != 1 {
			t.Fatalf("intent counts seen: %v, want each of 1..%d once", seen, n)
		}
	}
}

// A withdrawn result is gone: the next Begin acts again (its intent counted
// after the earlier ones) and a new Record is kept. Withdrawing another
// result, or a key never recorded, changes nothing.
func testEffectsWithdraw(t *testing.T, e coord.Effects) {
	ctx := ctxFor(t)
	mustBegin(t, e, "k")
	if err := e.Record(ctx, "k", []byte("sent")); err != nil {
		t.Fatal(err)
	}
	if err := e.Withdraw(ctx, "k", []byte("other")); err != nil {
		t.Fatal(err)
	}
	if ef := mustBegin(t, e, "k"); !ef.Done || string(ef.Result) != "sent" {
		t.Fatalf("Begin after withdrawing another result = %+v, want done with %q", ef, "sent")
	}
	if err := e.Withdraw(ctx, "k", []byte("sent")); err != nil {
		t.Fatal(err)
	}
	if ef := mustBegin(t, e, "k"); ef.Done || ef.Intents != 2 {
		t.Fatalf("Begin after Withdraw = %+v, want not done, 2 intents", ef)
	}
	if err := e.Record(ctx, "k", []byte("again")); err != nil {
		t.Fatal(err)
	}
	if ef := mustBegin(t, e, "k"); !ef.Done || string(ef.Result) != "again" {
		t.Fatalf("Begin after a new Record = %+v, want done with %q", ef, "again")
	}
	if err := e.Withdraw(ctx, "never", []byte("x")); err != nil {
		t.Fatalf("Withdraw of a key never recorded: %v", err)
	}
	if ef := mustBegin(t, e, "never"); ef.Done || ef.Intents != 1 {
		t.Fatalf("Begin after Withdraw of an unknown key = %+v, want a new effect", ef)
	}
}

func testEffectsEmptyKey(t *testing.T, e coord.Effects) {
	if _, err := e.Begin(ctxFor(t), ""); err == nil {
		t.Error("Begin(\"\") succeeded")
	}
	if err := e.Record(ctxFor(t), "", []byte("x")); err == nil {
		t.Error("Record(\"\") succeeded")
	}
	if err := e.Withdraw(ctxFor(t), "", []byte("x")); err == nil {
		t.Error("Withdraw(\"\") succeeded")
	}
}
