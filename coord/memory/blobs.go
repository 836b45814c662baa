package memory

import (
	"context"
	"fmt"
	"sync"

	"github.com/rune-org/rune/coord"
)

// Blobs implements coord.Blobs in process: a map per execution behind one
// mutex. Blobs live until Release; there is no TTL, since in process no
// execution is lost without its completion.
//
// Put and Get copy the data, so neither side's buffer is shared.
type Blobs struct {
	mu    sync.Mutex
	execs map[string]map[string][]byte
}

var _ coord.Blobs = (*Blobs)(nil)

// NewBlobs returns an empty Blobs.
func NewBlobs() *Blobs {
	return &Blobs{execs: make(map[string]map[string][]byte)}
}

// Put implements coord.Blobs.
func (bs *Blobs) Put(_ context.Context, exec string, data []byte) (string, error) {
	if exec == "" {
		return "", fmt.Errorf("coord/memory: Put blob: empty execution id")
	}
	ref := coord.BlobRef(data)
	bs.mu.Lock()
	defer bs.mu.Unlock()
	m := bs.execs[exec]
	if m == nil {
		m = make(map[string][]byte)
		bs.execs[exec] = m
	}
	if _, ok := m[ref]; !ok {
		m[ref] = append([]byte{}, data...)
	}
	return ref, nil
}

// Get implements coord.Blobs.
func (bs *Blobs) Get(_ context.Context, exec, ref string) ([]byte, error) {
	bs.mu.Lock()
	data, ok := bs.execs[exec][ref]
	bs.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("coord/memory: Get blob %q exec %q: %w", ref, exec, coord.ErrBlobNotFound)
	}
	// Stored blobs are never modified, so copying outside the lock is safe.
	return append([]byte{}, data...), nil
}

// Release implements coord.Blobs.
func (bs *Blobs) Release(_ context.Context, exec string) error {
	bs.mu.Lock()
	delete(bs.execs, exec)
	bs.mu.Unlock()
	return nil
}
