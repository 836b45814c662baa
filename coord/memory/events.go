package memory

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rune-org/rune/coord"
)

// Events implements coord.Events in process.
type Events struct {
	now func() time.Time

	mu    sync.Mutex
	pairs map[string]*eventPair
	swept time.Time
}

type eventPair struct {
	waits map[string]*eventWait
	// events are the retained events in delivery order; byID indexes them.
	events []*deliveredEvent
	byID   map[string]*deliveredEvent
}

type deliveredEvent struct {
	ev      coord.Event
	matched []string
}

type eventWait struct {
	since, due time.Time
	// ev is the match; taken says Take ended the wait.
	ev    *coord.Event
	taken bool
}

var _ coord.Events = (*Events)(nil)

// NewEvents returns an empty event store.
func NewEvents() *Events {
	return &Events{now: time.Now, pairs: map[string]*eventPair{}}
}

func (e *Events) pair(name, key string, create bool) *eventPair {
	id := name + "\x00" + key
	p := e.pairs[id]
	if p == nil && create {
		p = &eventPair{waits: map[string]*eventWait{}, byID: map[string]*deliveredEvent{}}
		e.pairs[id] = p
	}
	return p
}

// Register implements coord.Events.
func (e *Events) Register(_ context.Context, now time.Time, w coord.EventWait) (*coord.Event, error) {
	if err := coord.CheckEventWait(w); err != nil {
		return nil, fmt.Errorf("coord/memory: Events.Register: %w", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.sweep()
	p := e.pair(w.Name, w.Key, true)
	if old := p.waits[w.Timer]; old != nil {
		return copyEvent(old.ev), nil
	}
	wt := &eventWait{since: w.Since, due: w.Due}
	p.waits[w.Timer] = wt
	for _, d := range p.events {
		if !d.ev.At.Before(w.Since) && d.ev.Keep.After(now) {
			ev := d.ev
			wt.ev = &ev
			break
		}
	}
	return copyEvent(wt.ev), nil
}

// Deliver implements coord.Events.
func (e *Events) Deliver(_ context.Context, ev coord.Event) ([]string, error) {
	if err := coord.CheckEvent(ev); err != nil {
		return nil, fmt.Errorf("coord/memory: Events.Deliver: %w", err)
	}
	ev.Data = append([]byte(nil), ev.Data...)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.sweep()
	p := e.pair(ev.Name, ev.Key, true)
	if d := p.byID[ev.ID]; d != nil {
		return append([]string(nil), d.matched...), nil
	}
	d := &deliveredEvent{ev: ev}
	for id, w := range p.waits {
		if w.ev == nil && !w.taken && !w.since.After(ev.At) {
			c := ev
			w.ev = &c
			d.matched = append(d.matched, id)
		}
	}
	p.events = append(p.events, d)
	p.byID[ev.ID] = d
	return append([]string(nil), d.matched...), nil
}

// Take implements coord.Events.
func (e *Events) Take(_ context.Context, w coord.EventWait) (*coord.Event, error) {
	if err := coord.CheckEventWait(w); err != nil {
		return nil, fmt.Errorf("coord/memory: Events.Take: %w", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.pair(w.Name, w.Key, false)
	if p == nil || p.waits[w.Timer] == nil {
		return nil, nil
	}
	wt := p.waits[w.Timer]
	wt.taken = true
	return copyEvent(wt.ev), nil
}

// Forget implements coord.Events.
func (e *Events) Forget(_ context.Context, w coord.EventWait) error {
	if err := coord.CheckEventWait(w); err != nil {
		return fmt.Errorf("coord/memory: Events.Forget: %w", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if p := e.pair(w.Name, w.Key, false); p != nil {
		delete(p.waits, w.Timer)
		e.dropIfEmpty(w.Name+"\x00"+w.Key, p)
	}
	return nil
}

func (e *Events) dropIfEmpty(id string, p *eventPair) {
	if len(p.waits) == 0 && len(p.events) == 0 {
		delete(e.pairs, id)
	}
}

// eventsSweepEvery is how often sweep passes over the pairs.
const eventsSweepEvery = time.Minute

// sweep drops, at most once a minute, the events past their Keep and the
// waits a week past their Due: one pass over the pairs, which at 100,000
// waiting is milliseconds, too much for every call.
func (e *Events) sweep() {
	now := e.now()
	if now.Sub(e.swept) < eventsSweepEvery {
		return
	}
	e.swept = now
	for id, p := range e.pairs {
		kept := p.events[:0]
		for _, d := range p.events {
			if d.ev.Keep.After(now) {
				kept = append(kept, d)
			} else {
				delete(p.byID, d.ev.ID)
			}
		}
		clear(p.events[len(kept):])
		p.events = kept
		for t, w := range p.waits {
			if now.After(w.due.Add(coord.EventWaitGrace)) {
				delete(p.waits, t)
			}
		}
		e.dropIfEmpty(id, p)
	}
}

func copyEvent(ev *coord.Event) *coord.Event {
	if ev == nil {
		return nil
	}
	c := *ev
	c.Data = append([]byte(nil), ev.Data...)
	return &c
}
