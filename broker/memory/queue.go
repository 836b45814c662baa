package memory

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/rune-org/rune/broker"
)

// queue is one topic's FIFO per priority (issue 35: execution messages go
// by broker.ExecutionPriority, highest first; other topics' all have the
// default). Consumers sleep on cond while it is empty; each push wakes at
// most one of them.
type queue struct {
	mu      sync.Mutex
	cond    sync.Cond
	levels  [11]ring // by priority, 1 … 10
	n       int      // messages in levels
	waiting int      // consumers asleep in pop
	closed  bool
}

// level is d's priority.
func level(d *broker.Delivery) int {
	if d.Topic != broker.Execution {
		return 5
	}
	return broker.ExecutionPriority(&d.Message)
}

func newQueue() *queue {
	q := &queue{}
	q.cond.L = &q.mu
	return q
}

func (q *queue) push(d *broker.Delivery) {
	q.mu.Lock()
	if !q.closed {
		q.levels[level(d)].push(d)
		q.n++
		if q.waiting > 0 {
			q.cond.Signal()
		}
	}
	q.mu.Unlock()
}

// pop takes the oldest message of the highest priority, sleeping while
// there is none. It returns false
// once stop is set or the queue is closed, leaving the remaining messages queued.
func (q *queue) pop(stop *atomic.Bool) (*broker.Delivery, bool) {
	q.mu.Lock()
	for {
		if q.closed || stop.Load() {
			// The wakeup that brought us here may have been meant for a
			// message; hand it on so no message waits beside a sleeping consumer.
			if q.n > 0 && q.waiting > 0 {
				q.cond.Signal()
			}
			q.mu.Unlock()
			return nil, false
		}
		if q.n > 0 {
			var d *broker.Delivery
			for i := len(q.levels) - 1; d == nil; i-- {
				if q.levels[i].n > 0 {
					d = q.levels[i].pop()
				}
			}
			q.n--
			if q.n > 0 && q.waiting > 0 {
				q.cond.Signal()
			}
			q.mu.Unlock()
			return d, true
		}
		q.waiting++
		q.cond.Wait()
		q.waiting--
	}
}

// wakeAll makes every sleeping consumer recheck its stop flag.
func (q *queue) wakeAll() {
	q.mu.Lock()
	q.cond.Broadcast()
	q.mu.Unlock()
}

// close drops the queued messages and stops every consumer.
func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.levels, q.n = [11]ring{}, 0
	q.cond.Broadcast()
	q.mu.Unlock()
}

// ring is a growable FIFO of deliveries in a power-of-two circular buffer; it
// shrinks again after a burst so an idle queue does not pin its peak memory.
type ring struct {
	buf     []*broker.Delivery
	head, n int
}

const minRing = 64

func (r *ring) push(d *broker.Delivery) {
	if r.n == len(r.buf) {
		r.resize(max(2*len(r.buf), minRing))
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = d
	r.n++
}

func (r *ring) pop() *broker.Delivery {
	d := r.buf[r.head]
	r.buf[r.head] = nil
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	if len(r.buf) > minRing && r.n < len(r.buf)/4 {
		r.resize(len(r.buf) / 2)
	}
	return d
}

func (r *ring) resize(size int) {
	buf := make([]*broker.Delivery, size)
	if r.n > 0 {
		if end := r.head + r.n; end <= len(r.buf) {
			copy(buf, r.buf[r.head:end])
		} else {
			k := copy(buf, r.buf[r.head:])
			copy(buf[k:], r.buf[:r.n-k])
		}
	}
	r.buf, r.head = buf, 0
}

// timerHeap holds messages until they are due: delayed publishes and
// redeliveries. One goroutine (run) serves it with one timer armed for the
// earliest due time, so a long delay never holds back a shorter one and
// nothing is spent per message beyond its heap slot.
type timerHeap struct {
	mu   sync.Mutex
	h    []timed
	seq  uint64
	wake chan struct{} // run re-reads the earliest due time
}

type timed struct {
	due time.Time
	seq uint64 // equal due times leave in publish order
	d   *broker.Delivery
	q   *queue
}

func (a *timed) before(b *timed) bool {
	if a.due.Equal(b.due) {
		return a.seq < b.seq
	}
	return a.due.Before(b.due)
}

func newTimerHeap() *timerHeap { return &timerHeap{wake: make(chan struct{}, 1)} }

// add queues d on q at due.
func (t *timerHeap) add(due time.Time, d *broker.Delivery, q *queue) {
	t.mu.Lock()
	t.seq++
	t.h = append(t.h, timed{due: due, seq: t.seq, d: d, q: q})
	i := t.up(len(t.h) - 1)
	t.mu.Unlock()
	if i == 0 { // new earliest: run's timer is armed too late
		select {
		case t.wake <- struct{}{}:
		default:
		}
	}
}

// run moves due messages to their queues until done is closed.
func (t *timerHeap) run(done <-chan struct{}) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var due []timed
	for {
		now := time.Now()
		wait := time.Duration(-1)
		t.mu.Lock()
		for len(t.h) > 0 && !t.h[0].due.After(now) {
			due = append(due, t.popMin())
		}
		if len(t.h) > 0 {
			wait = t.h[0].due.Sub(now)
		}
		t.mu.Unlock()
		for i := range due {
			due[i].q.push(due[i].d)
			due[i] = timed{}
		}
		due = due[:0]
		if wait >= 0 {
			timer.Reset(wait)
		} else {
			timer.Stop()
		}
		select {
		case <-timer.C:
		case <-t.wake:
		case <-done:
			timer.Stop()
			return
		}
	}
}

func (t *timerHeap) up(i int) int {
	for i > 0 {
		p := (i - 1) / 2
		if !t.h[i].before(&t.h[p]) {
			break
		}
		t.h[i], t.h[p] = t.h[p], t.h[i]
		i = p
	}
	return i
}

func (t *timerHeap) popMin() timed {
	last := len(t.h) - 1
	top := t.h[0]
	t.h[0] = t.h[last]
	t.h[last] = timed{}
	t.h = t.h[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(t.h) && t.h[l].before(&t.h[m]) {
			m = l
		}
		if r < len(t.h) && t.h[r].before(&t.h[m]) {
			m = r
		}
		if m == i {
			break
		}
		t.h[i], t.h[m] = t.h[m], t.h[i]
		i = m
	}
	if cap(t.h) > 1024 && len(t.h) < cap(t.h)/4 { // let a burst's memory go
		t.h = append(make([]timed, 0, cap(t.h)/2), t.h...)
	}
	return top
}
