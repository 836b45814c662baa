package memory

import (
	"container/heap"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rune-org/rune/coord"
)

// BarrierRetain is how long a completed barrier keeps its values and state,
// so that a repeat of the completing arrival gets the completed Arrival
// again. After that the barrier is only a closed marker until its TTL.
const BarrierRetain = 10 * time.Minute

// DefaultBarrierTTL is the TTL of a barrier whose spec gives none, and of
// the closed marker that Cancel leaves for a barrier that did not exist.
const DefaultBarrierTTL = coord.DefaultBarrierTTL

// Barriers implements coord.Barriers in process, behind one mutex.
//
// Expiry needs no goroutine and no timer per barrier: every call first drops
// what has expired, from a heap ordered by expiry time. An open barrier is
// dropped after its TTL without arrivals, a closed one (completed or
// cancelled) after TTL from its closing, and a completed one's values after
// BarrierRetain.
//
// Values are copied on Arrive; the Values and State of a completed Arrival
// are shared with its repeats.
type Barriers struct {
	mu   sync.Mutex
	bars map[barrierID]*barrier
	exp  expiryHeap
	now  func() time.Time // time.Now; tests move it
}

type barrierID struct{ exec, key string }

type barrierStatus int

const (
	barrierOpen barrierStatus = iota
	barrierDone
	barrierCancelled
)

// barrier is the state of one barrier, guarded by Barriers.mu.
type barrier struct {
	id          barrierID
	status      barrierStatus
	total, need int
	ttl         time.Duration
	state       []byte
	vals        map[int][]byte // while open
	// Once done: the completing slot, the distinct arrivals then, and the
	// values in slot order until valuesUntil (nil after).
	winner      int
	arrived     int
	values      [][]byte
	valuesUntil time.Time
	// expires is when the whole barrier is dropped.
	expires time.Time
	// queued counts this barrier's entries in the expiry heap (at most 2).
	queued int
}

var _ coord.Barriers = (*Barriers)(nil)

// NewBarriers returns an empty Barriers.
func NewBarriers() *Barriers {
	return &Barriers{bars: make(map[barrierID]*barrier), now: time.Now}
}

// create adds an open barrier; mu is held.
func (bs *Barriers) create(id barrierID, spec coord.BarrierSpec, ttl time.Duration, state []byte, now time.Time) *barrier {
	b := &barrier{id: id, total: spec.Total, need: spec.Need, ttl: ttl, state: state, vals: map[int][]byte{}, expires: now.Add(ttl)}
	bs.bars[id] = b
	bs.schedule(b, b.expires)
	return b
}

// Open implements coord.Barriers.
func (bs *Barriers) Open(_ context.Context, exec, key string, spec coord.BarrierSpec) error {
	ttl, err := spec.Check()
	if err != nil {
		return fmt.Errorf("coord/memory: Open barrier %q exec %q: %w", key, exec, err)
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	now := bs.now()
	bs.expire(now)
	id := barrierID{exec, key}
	if bs.bars[id] == nil {
		bs.create(id, spec, ttl, cloneBytes(spec.State), now)
	}
	return nil
}

// Arrive implements coord.Barriers.
func (bs *Barriers) Arrive(_ context.Context, exec, key string, spec coord.BarrierSpec, slot int, value []byte) (coord.Arrival, error) {
	where := func(err error) error {
		return fmt.Errorf("coord/memory: Arrive barrier %q exec %q slot %d: %w", key, exec, slot, err)
	}
	ttl, err := spec.Check()
	if err != nil {
		return coord.Arrival{}, where(err)
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	now := bs.now()
	bs.expire(now)
	id := barrierID{exec, key}
	b := bs.bars[id]
	if b != nil && b.status == barrierCancelled {
		return coord.Arrival{}, where(fmt.Errorf("%w: cancelled", coord.ErrBarrierClosed))
	}
	// The barrier's own Total decides, not the caller's spec.
	total := spec.Total
	if b != nil {
		total = b.total
	}
	if slot < 0 || slot >= total {
		return coord.Arrival{}, where(fmt.Errorf("slot out of range 0..%d", total-1))
	}
	if b == nil {
		b = bs.create(id, spec, ttl, nil, now)
	}
	if b.status == barrierDone {
		if slot == b.winner && b.values != nil {
			return coord.Arrival{Duplicate: true, Arrived: b.arrived, Complete: true, Values: b.values, State: b.state}, nil
		}
		return coord.Arrival{}, where(fmt.Errorf("%w: completed by slot %d", coord.ErrBarrierClosed, b.winner))
	}
	b.ttl = ttl
	b.expires = now.Add(ttl) // refreshed on arrival; the heap entry catches up lazily
	if _, ok := b.vals[slot]; ok {
		return coord.Arrival{Duplicate: true, Arrived: len(b.vals)}, nil
	}
	if value == nil {
		value = []byte{} // arrived, unlike a nil slot in Values
	}
	b.vals[slot] = cloneBytes(value)
	if len(b.vals) < b.need {
		return coord.Arrival{Arrived: len(b.vals)}, nil
	}

	b.status, b.winner, b.arrived = barrierDone, slot, len(b.vals)
	b.values = make([][]byte, b.total)
	for s, v := range b.vals {
		b.values[s] = v
	}
	b.vals = nil
	b.valuesUntil = now.Add(BarrierRetain)
	bs.schedule(b, b.valuesUntil)
	return coord.Arrival{Arrived: b.arrived, Complete: true, Values: b.values, State: b.state}, nil
}

// Cancel implements coord.Barriers.
func (bs *Barriers) Cancel(_ context.Context, exec, key string) (bool, error) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	now := bs.now()
	bs.expire(now)
	id := barrierID{exec, key}
	b := bs.bars[id]
	if b == nil {
		// Nobody arrived yet: leave a closed marker, so a late first arrival
		// cannot complete it.
		b = bs.create(id, coord.BarrierSpec{Total: 1, Need: 1}, DefaultBarrierTTL, nil, now)
	}
	if b.status != barrierOpen {
		return false, nil
	}
	b.status, b.vals, b.state = barrierCancelled, nil, nil
	b.expires = now.Add(b.ttl)
	return true, nil
}

// schedule queues b for a look at time at; mu is held.
func (bs *Barriers) schedule(b *barrier, at time.Time) {
	b.queued++
	heap.Push(&bs.exp, expiry{at: at, b: b})
}

// expire drops the values and barriers whose time has come; mu is held.
func (bs *Barriers) expire(now time.Time) {
	for len(bs.exp) > 0 && !bs.exp[0].at.After(now) {
		b := heap.Pop(&bs.exp).(expiry).b
		b.queued--
		if bs.bars[b.id] != b {
			continue
		}
		if b.values != nil && !now.Before(b.valuesUntil) {
			b.values, b.state = nil, nil
		}
		if !now.Before(b.expires) {
			delete(bs.bars, b.id)
			continue
		}
		// Its expiry moved (an arrival refreshed it): look again then.
		if b.queued == 0 {
			bs.schedule(b, b.expires)
		}
	}
}

type expiry struct {
	at time.Time
	b  *barrier
}

// expiryHeap is a min-heap of expiries by time.
type expiryHeap []expiry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(expiry)) }
func (h *expiryHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = expiry{}
	*h = old[:len(old)-1]
	return x
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}
