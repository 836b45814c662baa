package redis

import (
	"context"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// pauseKeep is how long a pause flag outlives its last SetPaused beyond the
// TTL: a pause may last as long as a parked branch's timer (366 days).
const pauseKeep = 366 * 24 * time.Hour

// pausedKey is exec's pause flag, in exec's slot like its other keys.
func (c *Coordinator) pausedKey(exec string) string {
	return c.prefix + ":{" + exec + "}:paused"
}

// SetPaused implements coord.Pauses: one key per paused execution.
func (c *Coordinator) SetPaused(ctx context.Context, exec string, paused bool) error {
	var err error
	if paused {
		ms, _ := strconv.ParseInt(c.ttl, 10, 64)
		err = c.client.Set(ctx, c.pausedKey(exec), "1", time.Duration(ms)*time.Millisecond+pauseKeep).Err()
	} else {
		err = c.client.Del(ctx, c.pausedKey(exec)).Err()
	}
	if err != nil {
		return fmt.Errorf("coord/redis: SetPaused exec %q: %w", exec, err)
	}
	return nil
}

// Paused implements coord.Pauses. Every node of a runtime that can pause
// asks it, so it shares a round trip with the concurrent scripts
// (pipeline.go): on its own it was a seventh of a busy worker's CPU, in
// system calls (issue 33).
func (c *Coordinator) Paused(ctx context.Context, exec string) (bool, error) {
	cmd := goredis.NewIntCmd(ctx, "exists", c.pausedKey(exec))
	err := c.pipe.process(ctx, cmd)
	n := cmd.Val()
	if err != nil {
		return false, fmt.Errorf("coord/redis: Paused exec %q: %w", exec, err)
	}
	return n > 0, nil
}
