package memory

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/rune-org/rune/coord"
)

// DefaultEffectsRetain is how long Effects keeps a key after its last use.
const DefaultEffectsRetain = 24 * time.Hour

// Effects implements coord.Effects in process.
type Effects struct {
	retain time.Duration
	now    func() time.Time

	mu      sync.Mutex
	m       map[string]*effect
	touches int
}

type effect struct {
	intents int
	done    bool
	result  []byte
	used    time.Time
}

var _ coord.Effects = (*Effects)(nil)

// NewEffects returns an empty store keeping each key retain after its last
// use (0: DefaultEffectsRetain).
func NewEffects(retain time.Duration) *Effects {
	if retain <= 0 {
		retain = DefaultEffectsRetain
	}
	return &Effects{retain: retain, now: time.Now, m: map[string]*effect{}}
}

// Begin implements coord.Effects.
func (e *Effects) Begin(_ context.Context, key string) (coord.Effect, error) {
	if key == "" {
		return coord.Effect{}, errors.New("coord/memory: Effects.Begin: empty key")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	ef := e.touch(key)
	if ef.done {
		return coord.Effect{Done: true, Result: ef.result}, nil
	}
	ef.intents++
	return coord.Effect{Intents: ef.intents}, nil
}

// Record implements coord.Effects.
func (e *Effects) Record(_ context.Context, key string, result []byte) error {
	if key == "" {
		return errors.New("coord/memory: Effects.Record: empty key")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	ef := e.touch(key)
	if !ef.done {
		ef.done, ef.result = true, append([]byte{}, result...)
	}
	return nil
}

// Withdraw implements coord.Effects.
func (e *Effects) Withdraw(_ context.Context, key string, result []byte) error {
	if key == "" {
		return errors.New("coord/memory: Effects.Withdraw: empty key")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if ef := e.touch(key); ef.done && bytes.Equal(ef.result, result) {
		ef.done, ef.result = false, nil
	}
	return nil
}

// touch returns key's entry, created if missing, and now and then drops
// entries unused for longer than retain (a sweep per 1024 calls keeps the
// cost amortised).
func (e *Effects) touch(key string) *effect {
	now := e.now()
	e.touches++
	if e.touches%1024 == 0 {
		for k, ef := range e.m {
			if now.Sub(ef.used) > e.retain {
				delete(e.m, k)
			}
		}
	}
	ef := e.m[key]
	if ef == nil || now.Sub(ef.used) > e.retain {
		ef = &effect{}
		e.m[key] = ef
	}
	ef.used = now
	return ef
}
