package redis

import goredis "github.com/redis/go-redis/v9"

// NewTimersBuckets is NewTimers with n buckets instead of 32,768, so that
// tests fill buckets with a few timers.
func NewTimersBuckets(client goredis.UniversalClient, opts TimerOptions, n uint32) *Timers {
	ts := NewTimers(client, opts)
	ts.buckets = n
	return ts
}
