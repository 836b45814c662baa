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

// RunEvents runs the conformance suite of coord.Events. newEvents returns a
// store isolated from every other call's; it registers its own cleanup with
// t. Subtests run in parallel. Time is only what the suite passes.
func RunEvents(t *testing.T, newEvents func(t *testing.T) coord.Events) {
	cases := []struct {
		name string
		fn   func(t *testing.T, es coord.Events)
	}{
		{"MatchesOnlyItsPair", testEventsMatchesOnlyItsPair},
		{"RetainedForLaterWait", testEventsRetainedForLaterWait},
		{"TakeEndsTheWait", testEventsTakeEndsTheWait},
		{"DeliverIdempotent", testEventsDeliverIdempotent},
		{"RegisterIdempotent", testEventsRegisterIdempotent},
		{"Forget", testEventsForget},
		{"KeysOfAnyContent", testEventsKeysOfAnyContent},
		{"ConcurrentDeliveries", testEventsConcurrentDeliveries},
		{"InvalidArguments", testEventsInvalidArguments},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newEvents(t))
		})
	}
}

var eventsBase = time.UnixMilli(1_760_000_000_000)

func evWait(timer, name, key string) coord.EventWait {
	return coord.EventWait{Timer: timer, Name: name, Key: key, Since: eventsBase, Due: eventsBase.Add(time.Hour)}
}

func evEvent(id, name, key, data string, at time.Time) coord.Event {
	return coord.Event{ID: id, Name: name, Key: key, Data: []byte(data), At: at, Keep: at.Add(24 * time.Hour)}
}

func evRegister(t *testing.T, es coord.Events, now time.Time, w coord.EventWait) *coord.Event {
	t.Helper()
	ev, err := es.Register(ctxFor(t), now, w)
	if err != nil {
		t.Fatalf("Register(%+v): %v", w, err)
	}
	return ev
}

func evDeliver(t *testing.T, es coord.Events, ev coord.Event) []string {
	t.Helper()
	got, err := es.Deliver(ctxFor(t), ev)
	if err != nil {
		t.Fatalf("Deliver(%s %s/%s): %v", ev.ID, ev.Name, ev.Key, err)
	}
	slices.Sort(got)
	return got
}

func evTake(t *testing.T, es coord.Events, w coord.EventWait) *coord.Event {
	t.Helper()
	ev, err := es.Take(ctxFor(t), w)
	if err != nil {
		t.Fatalf("Take(%s): %v", w.Timer, err)
	}
	return ev
}

// evIs checks that ev is want (nil: none).
func evIs(t *testing.T, what string, ev *coord.Event, want *coord.Event) {
	t.Helper()
	switch {
	case want == nil && ev == nil:
		return
	case want == nil:
		t.Fatalf("%s: got event %s, want none", what, ev.ID)
	case ev == nil:
		t.Fatalf("%s: got no event, want %s", what, want.ID)
	}
	if ev.ID != want.ID || ev.Name != want.Name || ev.Key != want.Key || string(ev.Data) != string(want.Data) || !ev.At.Equal(want.At) {
		t.Fatalf("%s: got %s %s/%s %s at %v, want %s %s/%s %s at %v", what, ev.ID, ev.Name, ev.Key, ev.Data, ev.At,
			want.ID, want.Name, want.Key, want.Data, want.At)
	}
}

func testEventsMatchesOnlyItsPair(t *testing.T, es coord.Events) {
	for _, w := range []coord.EventWait{evWait("t1", "order.paid", "o-1"), evWait("t2", "order.paid", "o-1"),
		evWait("t3", "order.paid", "o-2"), evWait("t4", "order.shipped", "o-1")} {
		evIs(t, "Register "+w.Timer, evRegister(t, es, eventsBase, w), nil)
	}
	ev := evEvent("e1", "order.paid", "o-1", `{"amount":3}`, eventsBase.Add(time.Minute))
	if got := evDeliver(t, es, ev); !slices.Equal(got, []string{"t1", "t2"}) {
		t.Fatalf("Deliver matched %v, want [t1 t2]", got)
	}
	evIs(t, "Take t1", evTake(t, es, evWait("t1", "order.paid", "o-1")), &ev)
	evIs(t, "Take t2", evTake(t, es, evWait("t2", "order.paid", "o-1")), &ev)
	evIs(t, "Take t3 (other key)", evTake(t, es, evWait("t3", "order.paid", "o-2")), nil)
	evIs(t, "Take t4 (other event)", evTake(t, es, evWait("t4", "order.shipped", "o-1")), nil)
	// A second event of the pair finds no wait: each matched once.
	if got := evDeliver(t, es, evEvent("e2", "order.paid", "o-1", `{}`, eventsBase.Add(2*time.Minute))); len(got) != 0 {
		t.Fatalf("a second event matched %v, want none", got)
	}
	evIs(t, "Take t1 again", evTake(t, es, evWait("t1", "order.paid", "o-1")), &ev)
}

func testEventsRetainedForLaterWait(t *testing.T, es coord.Events) {
	at := eventsBase.Add(time.Minute)
	ev := evEvent("e1", "order.paid", "o-1", `"paid"`, at)
	if got := evDeliver(t, es, ev); len(got) != 0 {
		t.Fatalf("Deliver with no wait matched %v", got)
	}
	// A wait of an execution started before the event gets it at Register.
	w := evWait("early", "order.paid", "o-1")
	evIs(t, "Register of a wait since before the event", evRegister(t, es, at.Add(time.Second), w), &ev)
	evIs(t, "Take", evTake(t, es, w), &ev)
	// Started exactly at its receipt: gets it.
	w = evWait("same", "order.paid", "o-1")
	w.Since = at
	evIs(t, "Register of a wait since the event's time", evRegister(t, es, at.Add(time.Second), w), &ev)
	// One started after the event: not its event.
	w = evWait("late", "order.paid", "o-1")
	w.Since = at.Add(time.Millisecond)
	evIs(t, "Register of a wait since after the event", evRegister(t, es, at.Add(time.Second), w), nil)
	// Past its Keep, no wait gets it.
	w = evWait("expired", "order.paid", "o-1")
	evIs(t, "Register after the event's Keep", evRegister(t, es, ev.Keep.Add(time.Millisecond), w), nil)
	// The earliest retained event is the one a wait gets.
	ev2 := evEvent("e2", "order.paid", "o-1", `"again"`, at.Add(time.Minute))
	if got := evDeliver(t, es, ev2); !slices.Equal(got, []string{"expired", "late"}) {
		t.Fatalf("the second event matched %v, want [expired late] (the waits left unmatched)", got)
	}
	w = evWait("two", "order.paid", "o-1")
	evIs(t, "Register with two retained", evRegister(t, es, at.Add(2*time.Minute), w), &ev)
}

func testEventsTakeEndsTheWait(t *testing.T, es coord.Events) {
	w := evWait("t1", "e", "k")
	evRegister(t, es, eventsBase, w)
	evIs(t, "Take at the timeout", evTake(t, es, w), nil)
	if got := evDeliver(t, es, evEvent("e1", "e", "k", `1`, eventsBase.Add(time.Minute))); len(got) != 0 {
		t.Fatalf("Deliver after Take matched %v, want none: the wait timed out", got)
	}
	evIs(t, "Take again", evTake(t, es, w), nil)
	evIs(t, "Register again", evRegister(t, es, eventsBase, w), nil)
	evIs(t, "Take of an unknown wait", evTake(t, es, evWait("nobody", "e", "k")), nil)
}

func testEventsDeliverIdempotent(t *testing.T, es coord.Events) {
	evRegister(t, es, eventsBase, evWait("t1", "e", "k"))
	ev := evEvent("e1", "e", "k", `{"n":1}`, eventsBase.Add(time.Minute))
	if got := evDeliver(t, es, ev); !slices.Equal(got, []string{"t1"}) {
		t.Fatalf("Deliver matched %v, want [t1]", got)
	}
	// Registered after: Register matches it from the retained event; the
	// repeated Deliver answers as the first did.
	w2 := evWait("t2", "e", "k")
	evIs(t, "Register after the event", evRegister(t, es, eventsBase.Add(2*time.Minute), w2), &ev)
	if got := evDeliver(t, es, ev); !slices.Equal(got, []string{"t1"}) {
		t.Fatalf("a repeated Deliver matched %v, want the first's [t1]", got)
	}
	evIs(t, "Take t2", evTake(t, es, w2), &ev)
	// The same id in another pair is another event.
	evRegister(t, es, eventsBase, evWait("t3", "e", "other"))
	if got := evDeliver(t, es, evEvent("e1", "e", "other", `2`, eventsBase.Add(time.Minute))); !slices.Equal(got, []string{"t3"}) {
		t.Fatalf("Deliver of the id in another pair matched %v, want [t3]", got)
	}
}

func testEventsRegisterIdempotent(t *testing.T, es coord.Events) {
	w := evWait("t1", "e", "k")
	evRegister(t, es, eventsBase, w)
	evRegister(t, es, eventsBase, w)
	ev := evEvent("e1", "e", "k", `true`, eventsBase.Add(time.Minute))
	if got := evDeliver(t, es, ev); !slices.Equal(got, []string{"t1"}) {
		t.Fatalf("Deliver matched %v, want [t1] once", got)
	}
	// A redelivered suspend registers again: it gets its match (to wake the timer).
	evIs(t, "Register after the match", evRegister(t, es, eventsBase.Add(2*time.Minute), w), &ev)
	// A second event does not replace the first match.
	evDeliver(t, es, evEvent("e2", "e", "k", `false`, eventsBase.Add(3*time.Minute)))
	evIs(t, "Take", evTake(t, es, w), &ev)
}

func testEventsForget(t *testing.T, es coord.Events) {
	w := evWait("t1", "e", "k")
	evRegister(t, es, eventsBase, w)
	ev := evEvent("e1", "e", "k", `1`, eventsBase.Add(time.Minute))
	evDeliver(t, es, ev)
	evIs(t, "Take", evTake(t, es, w), &ev)
	if err := es.Forget(ctxFor(t), w); err != nil {
		t.Fatalf("Forget: %v", err)
	}
	evIs(t, "Take after Forget", evTake(t, es, w), nil)
	if err := es.Forget(ctxFor(t), evWait("unknown", "e", "k")); err != nil {
		t.Fatalf("Forget of an unknown wait: %v", err)
	}
}

func testEventsKeysOfAnyContent(t *testing.T, es coord.Events) {
	keys := []string{"a:b", "a", "{a}", "a}b{", "ключ", "a\x00b", "a b"}
	for i, k := range keys {
		evRegister(t, es, eventsBase, evWait("t"+strconv.Itoa(i), "e:v", k))
	}
	for i, k := range keys {
		got := evDeliver(t, es, evEvent("x", "e:v", k, strconv.Itoa(i), eventsBase.Add(time.Minute)))
		if !slices.Equal(got, []string{"t" + strconv.Itoa(i)}) {
			t.Fatalf("Deliver for key %q matched %v, want [t%d]", k, got, i)
		}
	}
}

// testEventsConcurrentDeliveries: waits registered and events delivered at
// once across pairs; every wait is matched exactly once, by its pair's
// event, whichever came first.
func testEventsConcurrentDeliveries(t *testing.T, es coord.Events) {
	const pairs, perPair = 20, 25
	ctx := ctxFor(t)
	var errs errorList
	var matched sync.Map
	var wg sync.WaitGroup
	var registeredMatches atomic.Int64
	for p := range pairs {
		key := "k" + strconv.Itoa(p)
		for i := range perPair {
			wg.Go(func() {
				w := evWait(fmt.Sprintf("%s-%d", key, i), "e", key)
				ev, err := es.Register(ctx, eventsBase.Add(time.Minute), w)
				if err != nil {
					errs.add(err)
				} else if ev != nil {
					registeredMatches.Add(1)
				}
			})
		}
		wg.Go(func() {
			got, err := es.Deliver(ctx, evEvent("ev", "e", key, `1`, eventsBase.Add(time.Second)))
			if err != nil {
				errs.add(err)
				return
			}
			for _, id := range got {
				if _, dup := matched.LoadOrStore(id, true); dup {
					errs.add(fmt.Errorf("timer %s matched twice", id))
				}
			}
		})
	}
	wg.Wait()
	errs.check(t)
	delivered := 0
	matched.Range(func(any, any) bool { delivered++; return true })
	if delivered+int(registeredMatches.Load()) != pairs*perPair {
		t.Fatalf("%d waits matched by Deliver and %d at Register, want %d in all, each once", delivered, registeredMatches.Load(), pairs*perPair)
	}
	for p := range pairs {
		for i := range perPair {
			w := evWait(fmt.Sprintf("k%d-%d", p, i), "e", "k"+strconv.Itoa(p))
			if ev := evTake(t, es, w); ev == nil || ev.Key != w.Key {
				t.Fatalf("Take(%s): %+v, want its pair's event", w.Timer, ev)
			}
		}
	}
}

func testEventsInvalidArguments(t *testing.T, es coord.Events) {
	ctx := ctxFor(t)
	for _, w := range []coord.EventWait{evWait("", "e", "k"), evWait("t", "", "k"), evWait("t", "e", "")} {
		if _, err := es.Register(ctx, eventsBase, w); !errors.Is(err, coord.ErrInvalidEvent) {
			t.Errorf("Register(%+v): %v, want ErrInvalidEvent", w, err)
		}
		if _, err := es.Take(ctx, w); !errors.Is(err, coord.ErrInvalidEvent) {
			t.Errorf("Take(%+v): %v, want ErrInvalidEvent", w, err)
		}
	}
	for _, ev := range []coord.Event{evEvent("", "e", "k", "1", eventsBase), evEvent("i", "", "k", "1", eventsBase), evEvent("i", "e", "", "1", eventsBase)} {
		if _, err := es.Deliver(ctx, ev); !errors.Is(err, coord.ErrInvalidEvent) {
			t.Errorf("Deliver(%+v): %v, want ErrInvalidEvent", ev, err)
		}
	}
}

// BenchEventsDeliver measures what POST /v1/events costs the coordination
// store with waiting executions: waiting waits are registered first (each
// with its timer scheduled, as the engine suspends a wait_for_event, one key
// per wait); each op then delivers the event of one waiting key
// (Events.Deliver, which matches its wait) and wakes the matched timer
// (Timers.Wake), as engine.DeliverEvent does. Ops beyond waiting deliver
// to keys no one waits for.
func BenchEventsDeliver(b *testing.B, es coord.Events, ts coord.Timers, waiting, parallelism int) {
	ctx := context.Background()
	// Now, not the suite's fixed base: stores sweep what the wall clock
	// says has expired.
	base := time.Now().Truncate(time.Millisecond)
	due := base.Add(time.Hour)
	payload := make([]byte, 300)
	for i := range waiting {
		id := "w" + strconv.Itoa(i)
		if err := ts.Schedule(ctx, id, due, payload); err != nil {
			b.Fatal(err)
		}
		if _, err := es.Register(ctx, base, coord.EventWait{Timer: id, Name: "order.paid", Key: "o-" + strconv.Itoa(i), Since: base, Due: due}); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	b.ResetTimer()
	runBench(b, parallelism, func(more func() bool) {
		for more() {
			i := next.Add(1) - 1
			at := base.Add(time.Minute)
			ev := coord.Event{ID: "e" + strconv.FormatInt(i, 10), Name: "order.paid", Key: "o-" + strconv.FormatInt(i, 10),
				Data: []byte(`{"paid":true}`), At: at, Keep: at.Add(24 * time.Hour)}
			matched, err := es.Deliver(ctx, ev)
			if err != nil {
				b.Fatal(err)
			}
			if i < int64(waiting) && len(matched) != 1 {
				b.Fatalf("event %d matched %v, want its wait", i, matched)
			}
			if len(matched) > 0 {
				if err := ts.Wake(ctx, at, matched...); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
