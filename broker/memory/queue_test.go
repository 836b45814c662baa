package memory

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/rune-org/rune/broker"
)

// The ring stays FIFO across wrap-around, growth and shrinking.
func TestRingFIFO(t *testing.T) {
	var r ring
	next, want := 0, 0
	for round := range 2000 {
		// Bursts grow the ring; draining below a quarter shrinks it.
		for range rand.IntN(round%300 + 1) {
			r.push(&broker.Delivery{Message: broker.Message{ID: strconv.Itoa(next)}})
			next++
		}
		for range rand.IntN(r.n + 1) {
			if got := r.pop().ID; got != strconv.Itoa(want) {
				t.Fatalf("popped %s, want %d", got, want)
			}
			want++
		}
	}
	for r.n > 0 {
		if got := r.pop().ID; got != strconv.Itoa(want) {
			t.Fatalf("popped %s, want %d", got, want)
		}
		want++
	}
	if want != next {
		t.Fatalf("popped %d of %d", want, next)
	}
	if len(r.buf) > minRing {
		t.Errorf("empty ring kept %d slots", len(r.buf))
	}
}

// The heap releases entries by due time, equal due times in insertion order.
func TestTimerHeapOrder(t *testing.T) {
	th := newTimerHeap()
	base := time.Now()
	const n = 5000
	for i := range n {
		due := base.Add(time.Duration(rand.IntN(50)) * time.Millisecond)
		th.add(due, &broker.Delivery{Message: broker.Message{ID: strconv.Itoa(i)}}, nil)
	}
	var last timed
	for i := range n {
		e := th.popMin()
		if i > 0 && !last.before(&e) {
			t.Fatalf("entry %d (due %v seq %d) after (due %v seq %d)", i, e.due, e.seq, last.due, last.seq)
		}
		last = e
	}
	if len(th.h) != 0 {
		t.Fatalf("%d entries left", len(th.h))
	}
}
