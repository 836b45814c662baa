package redis

import (
	"context"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rune-org/rune/coord"
)

// NewTimersBuckets is NewTimers with n buckets instead of 32,768, so that
// tests fill buckets with a few timers.
func NewTimersBuckets(client goredis.UniversalClient, opts TimerOptions, n uint32) *Timers {
	ts := NewTimers(client, opts)
	ts.buckets = n
	return ts
}

// WriteValue is the first half of a sharded Arrive: slot's value written to
// its shard, not counted (a worker that crashed between the two).
func (b *Barriers) WriteValue(ctx context.Context, exec, key string, spec coord.BarrierSpec, slot int, value []byte) error {
	ttl, err := spec.Check()
	if err != nil {
		return err
	}
	_, err = b.writeValue(ctx, exec, key, slot, value, millis(2*ttl))
	return err
}

// Queued is how many scripts wait for the pipeline out to return.
func (c *Coordinator) Queued() int {
	c.pipe.mu.Lock()
	defer c.pipe.mu.Unlock()
	return len(c.pipe.queue)
}

// Queued is how many timer scripts wait for the pipeline out to return.
func (ts *Timers) Queued() int {
	ts.pipe.mu.Lock()
	defer ts.pipe.mu.Unlock()
	return len(ts.pipe.queue)
}

// Queued is how many Release calls wait for the pipeline out to return.
func (b *Blobs) Queued() int {
	b.pipe.mu.Lock()
	defer b.pipe.mu.Unlock()
	return len(b.pipe.queue)
}

// RenewShards is a pending sharded Arrive's renewal of the shards' TTL,
// landing whenever the test calls it.
func (b *Barriers) RenewShards(ctx context.Context, exec, key string, spec coord.BarrierSpec) error {
	ttl, err := spec.Check()
	if err != nil {
		return err
	}
	return b.renewShards(ctx, exec, key, millis(2*ttl))
}
