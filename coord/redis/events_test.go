package redis_test

import (
	"testing"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/coord/coordtest"
	"github.com/rune-org/rune/coord/redis"
	"github.com/rune-org/rune/internal/testinfra"
)

func TestEventsConformance(t *testing.T) {
	coordtest.RunEvents(t, func(t *testing.T) coord.Events {
		prefix := testinfra.Name(t)
		return redis.NewEvents(newClient(t, prefix), redis.EventOptions{Prefix: prefix})
	})
}

// On a Redis Cluster every script's keys must share a slot (CROSSSLOT
// otherwise): a pair's keys share its hash tag.
func TestClusterEventsConformance(t *testing.T) {
	coordtest.RunEvents(t, func(t *testing.T) coord.Events {
		prefix := testinfra.Name(t)
		return redis.NewEvents(newClusterClient(t, prefix), redis.EventOptions{Prefix: prefix})
	})
}

// BenchmarkEventsDeliver: events matched per second with 100,000 waiting
// (docs/benchmarks.md, issue 34).
func BenchmarkEventsDeliver(b *testing.B) {
	prefix := testinfra.Name(b)
	client := newClient(b, prefix)
	coordtest.BenchEventsDeliver(b, redis.NewEvents(client, redis.EventOptions{Prefix: prefix}),
		redis.NewTimers(client, redis.TimerOptions{Prefix: prefix}), 100_000, 16)
}
