package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/message"
)

// Large context values travel by reference (RFC 001 §11.1, RFC 004 §2): a
// value whose JSON is at least RefThreshold bytes is stored once per
// execution in the blob store, and messages carry {"$rune_ref": hash}
// instead. A split of 100,000 items thus sends 100,000 small messages, not
// 100,000 copies of the array. References are resolved when a node reads
// the context, and in the final context of the completion.

// refKey marks a reference; no JSON a user writes is likely to use it.
const refKey = "$rune_ref"

// isRef returns the reference v holds, if it is one.
func isRef(v any) (string, bool) {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return "", false
	}
	ref, ok := m[refKey].(string)
	return ref, ok
}

// infraError is a failure of the runtime's stores, not of a node: the
// message is delivered again later.
type infraError struct{ err error }

func (e *infraError) Error() string { return e.err.Error() }
func (e *infraError) Unwrap() error { return e.err }

// externalize returns ctx with every large top-level value (or, when keys
// are given, every large one of those) replaced by a reference. Values
// already referenced stay as they are.
func (s *step) externalize(ctx context.Context, next map[string]any, keys ...string) (map[string]any, error) {
	blobs, limit := s.e.cfg.Blobs, s.e.cfg.RefThreshold
	if blobs == nil || limit <= 0 {
		return next, nil
	}
	var out map[string]any
	one := func(k string, v any) error {
		switch v.(type) {
		case map[string]any, []any, string:
		default:
			return nil // numbers, booleans and null are small
		}
		if _, ok := isRef(v); ok || jsonBound(v, limit) < limit {
			return nil
		}
		raw, err := json.Marshal(v)
		if err != nil || len(raw) < limit {
			return nil
		}
		ref, err := blobs.Put(ctx, s.m.ExecutionID, raw)
		if err != nil {
			return &infraError{fmt.Errorf("engine: store %s (%d bytes) as a blob: %w", k, len(raw), err)}
		}
		if out == nil {
			out = maps.Clone(next)
		}
		out[k] = map[string]any{refKey: ref}
		return nil
	}
	if len(keys) == 0 {
		for k, v := range next {
			if err := one(k, v); err != nil {
				return nil, err
			}
		}
	}
	for _, k := range keys {
		if v, ok := next[k]; ok {
			if err := one(k, v); err != nil {
				return nil, err
			}
		}
	}
	if out == nil {
		return next, nil
	}
	return out, nil
}

// jsonBound is an upper bound of the size of v encoded as JSON, or at
// least budget once it reaches budget. It allocates nothing, so that
// externalize encodes only values that may reach the threshold (most
// outputs are far below it). A type it does not know counts as budget.
func jsonBound(v any, budget int) int {
	switch v := v.(type) {
	case nil:
		return 4
	case bool:
		return 5
	case float64, float32, int, int64, int32, uint, uint64, uint32:
		return 25 // "-1.2345678901234567e-308" and the like
	case string:
		return 2 + 6*len(v) // each byte at worst a \u00XX escape
	case map[string]any:
		n := 2
		for k, e := range v {
			if n += 2 + 6*len(k) + 2 + jsonBound(e, budget-n); n >= budget {
				return budget
			}
		}
		return n
	case []any:
		n := 2
		for _, e := range v {
			if n += 1 + jsonBound(e, budget-n); n >= budget {
				return budget
			}
		}
		return n
	}
	return budget
}

// resolve returns ctx with every reference replaced by its value. Without a
// blob store nothing is a reference: a payload that merely looks like one is
// data. A reference that cannot be resolved is a plain error (the node
// fails); a store that cannot be reached is an *infraError (retried).
//
// With need, only the keys need accepts are resolved: a node that never
// reads the split array does not load it.
func (e *Engine) resolve(ctx context.Context, exec string, acc map[string]any, need func(string) bool) (map[string]any, error) {
	if e.cfg.Blobs == nil {
		return acc, nil
	}
	var out map[string]any
	for k, v := range acc {
		ref, ok := isRef(v)
		if !ok || (need != nil && !need(k)) {
			continue
		}
		val, err := e.blobValue(ctx, exec, ref)
		if err != nil {
			return nil, err
		}
		if out == nil {
			out = make(map[string]any, len(acc))
			for k2, v2 := range acc {
				out[k2] = v2
			}
		}
		out[k] = val
	}
	if out == nil {
		return acc, nil
	}
	return out, nil
}

// blobValue fetches and decodes a blob, once per process while it is cached:
// every branch of a split reads the same one.
func (e *Engine) blobValue(ctx context.Context, exec, ref string) (any, error) {
	if v, ok := e.blobs.get(ref); ok {
		return v, nil
	}
	// One load per blob at a time: the branches of a split all want the
	// same one at once, and each decoded copy may be large.
	unlock := e.blobs.lock(ref)
	defer unlock()
	if v, ok := e.blobs.get(ref); ok {
		return v, nil
	}
	raw, err := e.cfg.Blobs.Get(ctx, exec, ref)
	if errors.Is(err, coord.ErrBlobNotFound) {
		return nil, fmt.Errorf("context value %s of execution %s is gone (the execution ended or expired, or the value is not a reference Rune made)", ref, exec)
	}
	if err != nil {
		return nil, &infraError{fmt.Errorf("engine: read blob %s: %w", ref, err)}
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("context value %s is not JSON: %v", ref, err)
	}
	e.blobs.put(ref, v, len(raw))
	return v, nil
}

// blobCache keeps decoded blobs, bounded by their encoded size. Values are
// shared and never modified.
type blobCache struct {
	mu      sync.Mutex
	max     int
	size    int
	items   map[string]cachedBlob
	loading map[string]*sync.Mutex
}

// lock serialises loads of ref; the returned func unlocks.
func (c *blobCache) lock(ref string) func() {
	c.mu.Lock()
	if c.loading == nil {
		c.loading = map[string]*sync.Mutex{}
	}
	l := c.loading[ref]
	if l == nil {
		l = &sync.Mutex{}
		c.loading[ref] = l
	}
	c.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		c.mu.Lock()
		if c.loading[ref] == l {
			delete(c.loading, ref)
		}
		c.mu.Unlock()
	}
}

type cachedBlob struct {
	v    any
	size int
}

func (c *blobCache) get(ref string) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.items[ref]
	return b.v, ok
}

func (c *blobCache) put(ref string, v any, size int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if size > c.max {
		return // would evict everything and still not fit
	}
	if c.items == nil {
		c.items = map[string]cachedBlob{}
	}
	for k, b := range c.items { // evict arbitrary entries: blobs are rare
		if c.size+size <= c.max {
			break
		}
		delete(c.items, k)
		c.size -= b.size
	}
	c.items[ref] = cachedBlob{v, size}
	c.size += size
}

// Completed is called by runtimes once c is safely published (the broker
// confirmed it). It records that in the coordinator at once, so that a
// redelivery or a timer fired again from now on publishes no second
// completion, and then releases what the execution kept in the blob store
// (a redelivered completer before the record still needs the values to
// report the same final context).
func (e *Engine) Completed(ctx context.Context, c *message.Completion) {
	if err := e.recordPublished(ctx, c.ExecutionID); err != nil {
		// Without the record a replay repeats the completion, byte for
		// byte: it needs the values, so they stay (until their TTL).
		e.log.Warn("could not record the completion as published; a redelivery may publish it again", "execution_id", c.ExecutionID, "err", err)
		return
	}
	if e.cfg.Blobs == nil {
		return
	}
	if err := e.cfg.Blobs.Release(ctx, c.ExecutionID); err != nil {
		e.log.Warn("could not release the execution's large values; they expire with their TTL", "execution_id", c.ExecutionID, "err", err)
	}
}

// recordPublished calls Coord.Published, trying again for a few seconds: a
// coordinator that restarts (a Redis failover) would otherwise leave the
// window for a duplicate completion open.
func (e *Engine) recordPublished(ctx context.Context, exec string) error {
	const attempts = 8
	wait := 50 * time.Millisecond
	var err error
	for i := range attempts {
		if err = e.cfg.Coord.Published(ctx, exec); err == nil || i == attempts-1 {
			break
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
	return err
}
