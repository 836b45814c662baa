package memory

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rune-org/rune/coord"
)

// Digests implements coord.Digests in process. A key's digests and member
// answers are dropped coord.DigestGrace after the latest Closes among them,
// when the key is met again or by a sweep every 1024 Joins.
type Digests struct {
	mu    sync.Mutex
	keys  map[string]*digestKey
	joins int
}

type digestKey struct {
	open    string // the opener of the open digest, "" when none
	digests map[string]*digest
	members map[string]coord.Digest // member id → its Join's answer
	keep    time.Time
}

type digest struct {
	exec   string
	closes time.Time
	values [][]byte
}

var _ coord.Digests = (*Digests)(nil)

// NewDigests returns an empty Digests.
func NewDigests() *Digests { return &Digests{keys: map[string]*digestKey{}} }

// Join implements coord.Digests.
func (d *Digests) Join(_ context.Context, key string, m coord.DigestMember, now, closes time.Time) (coord.Digest, error) {
	if err := coord.CheckDigestJoin(key, m); err != nil {
		return coord.Digest{}, fmt.Errorf("coord/memory: Digests.Join: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.joins++; d.joins%1024 == 0 {
		for key, k := range d.keys {
			if !k.keep.After(now) {
				delete(d.keys, key)
			}
		}
	}
	k := d.keys[key]
	if k != nil && !k.keep.After(now) {
		k = nil // expired
	}
	if k == nil {
		k = &digestKey{digests: map[string]*digest{}, members: map[string]coord.Digest{}}
		d.keys[key] = k
	}
	if a, ok := k.members[m.ID]; ok {
		return a, nil
	}
	value := slices.Clone(m.Value)
	if g := k.digests[k.open]; g != nil && now.Before(g.closes) {
		if len(g.values) >= coord.MaxDigestItems {
			return coord.Digest{}, fmt.Errorf("coord/memory: Digests.Join %q: %w", key, coord.ErrDigestFull)
		}
		g.values = append(g.values, value)
		a := coord.Digest{Opener: k.open, Execution: g.exec, Closes: g.closes}
		k.members[m.ID] = a
		return a, nil
	}
	closes = closes.Truncate(time.Millisecond)
	k.open = m.ID
	k.digests[m.ID] = &digest{exec: m.Execution, closes: closes, values: [][]byte{value}}
	a := coord.Digest{Opener: m.ID, Execution: m.Execution, Opened: true, Closes: closes}
	k.members[m.ID] = a
	if keep := closes.Add(coord.DigestGrace); keep.After(k.keep) {
		k.keep = keep
	}
	return a, nil
}

// Take implements coord.Digests.
func (d *Digests) Take(_ context.Context, key, opener string) ([][]byte, error) {
	if err := coord.CheckDigestKey(key, opener); err != nil {
		return nil, fmt.Errorf("coord/memory: Digests.Take: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	k := d.keys[key]
	if k == nil {
		return nil, nil
	}
	if k.open == opener {
		k.open = ""
	}
	g := k.digests[opener]
	if g == nil {
		return nil, nil
	}
	out := make([][]byte, len(g.values))
	for i, v := range g.values {
		out[i] = slices.Clone(v)
	}
	return out, nil
}

// Forget implements coord.Digests.
func (d *Digests) Forget(_ context.Context, key, opener string) error {
	if err := coord.CheckDigestKey(key, opener); err != nil {
		return fmt.Errorf("coord/memory: Digests.Forget: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if k := d.keys[key]; k != nil {
		if k.open == opener {
			k.open = ""
		}
		delete(k.digests, opener)
	}
	return nil
}
