package memory

import (
	"context"
	"sync"
)

// pauses is the memory coordinator's pause flags (coord.Pauses): a small
// map beside the shards, as few executions are ever paused.
type pauses struct {
	mu     sync.RWMutex
	paused map[string]bool
}

// SetPaused implements coord.Pauses.
func (c *Coordinator) SetPaused(_ context.Context, exec string, paused bool) error {
	c.pauses.mu.Lock()
	defer c.pauses.mu.Unlock()
	if !paused {
		delete(c.pauses.paused, exec)
		return nil
	}
	if c.pauses.paused == nil {
		c.pauses.paused = map[string]bool{}
	}
	c.pauses.paused[exec] = true
	return nil
}

// Paused implements coord.Pauses.
func (c *Coordinator) Paused(_ context.Context, exec string) (bool, error) {
	c.pauses.mu.RLock()
	defer c.pauses.mu.RUnlock()
	return c.pauses.paused[exec], nil
}
