package memory

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rune-org/rune/coord"
)

// Limiter implements coord.Limiter in process: per key, the GCRA's
// theoretical arrival time and the reservations by id, or the throttle's
// window of admitted ids. Keys unused for coord.LimiterRetain are dropped
// when met again.
type Limiter struct {
	mu      sync.Mutex
	rates   map[string]*rateKey
	windows map[string]*window
	calls   int
}

type rateKey struct {
	tat      time.Time
	reserved map[string]time.Time // id → start
	used     time.Time
}

type window struct {
	ids []admitted // oldest first
	by  map[string]bool
}

type admitted struct {
	id string
	at time.Time
}

var _ coord.Limiter = (*Limiter)(nil)

// NewLimiter returns an empty Limiter.
func NewLimiter() *Limiter {
	return &Limiter{rates: map[string]*rateKey{}, windows: map[string]*window{}}
}

// Reserve implements coord.Limiter.
func (l *Limiter) Reserve(_ context.Context, key, id string, r coord.Rate, now time.Time) (time.Time, error) {
	if err := coord.CheckLimiterArgs(key, id, r, false); err != nil {
		return time.Time{}, fmt.Errorf("coord/memory: Limiter.Reserve: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	k := l.rates[key]
	if k == nil {
		k = &rateKey{reserved: map[string]time.Time{}}
		l.rates[key] = k
	}
	k.used = now
	if at, ok := k.reserved[id]; ok {
		return at, nil
	}
	tat := k.tat
	if tat.Before(now) {
		tat = now
	}
	start := tat.Add(-r.Tolerance())
	if start.Before(now) {
		start = now
	}
	k.tat = tat.Add(r.Interval())
	k.reserved[id] = start
	return start, nil
}

// Admit implements coord.Limiter.
func (l *Limiter) Admit(_ context.Context, key, id string, r coord.Rate, now time.Time) (coord.Admission, error) {
	if err := coord.CheckLimiterArgs(key, id, r, true); err != nil {
		return coord.Admission{}, fmt.Errorf("coord/memory: Limiter.Admit: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.windows[key]
	if w == nil {
		w = &window{by: map[string]bool{}}
		l.windows[key] = w
	}
	// Ids past the window leave it.
	cut := 0
	for cut < len(w.ids) && !w.ids[cut].at.After(now.Add(-r.Per)) {
		delete(w.by, w.ids[cut].id)
		cut++
	}
	w.ids = slices.Delete(w.ids, 0, cut)
	if w.by[id] {
		return coord.Admission{OK: true}, nil
	}
	if len(w.ids) >= r.Limit {
		return coord.Admission{RetryAt: w.ids[len(w.ids)-r.Limit].at.Add(r.Per)}, nil
	}
	w.ids = append(w.ids, admitted{id: id, at: now})
	w.by[id] = true
	return coord.Admission{OK: true}, nil
}

// sweep, every thousandth call, drops the rate keys and reservations
// unused for coord.LimiterRetain.
func (l *Limiter) sweep(now time.Time) {
	if l.calls++; l.calls%1000 != 0 {
		return
	}
	for key, k := range l.rates {
		if now.Sub(k.used) > coord.LimiterRetain {
			delete(l.rates, key)
			continue
		}
		for id, at := range k.reserved {
			if now.Sub(at) > coord.LimiterRetain {
				delete(k.reserved, id)
			}
		}
	}
	for key, w := range l.windows {
		if len(w.ids) == 0 {
			delete(l.windows, key)
		}
	}
}
