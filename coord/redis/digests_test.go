package redis_test

import (
	"testing"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/coord/coordtest"
	"github.com/rune-org/rune/coord/redis"
	"github.com/rune-org/rune/internal/testinfra"
)

func TestDigestsConformance(t *testing.T) {
	coordtest.RunDigests(t, func(t *testing.T) coord.Digests {
		prefix := testinfra.Name(t)
		return redis.NewDigests(newClient(t, prefix), redis.DigestOptions{Prefix: prefix})
	})
}

// On a Redis Cluster every script's keys must share a slot (CROSSSLOT
// otherwise): a digest key's keys share its hash tag.
func TestClusterDigestsConformance(t *testing.T) {
	coordtest.RunDigests(t, func(t *testing.T) coord.Digests {
		prefix := testinfra.Name(t)
		return redis.NewDigests(newClusterClient(t, prefix), redis.DigestOptions{Prefix: prefix})
	})
}

// BenchmarkDigestJoin: coordtest.BenchDigestJoin, one Join per op (two
// round trips: the open digest's read, the script), from 16 goroutines
// per GOMAXPROCS (docs/benchmarks.md, issue 36).
func BenchmarkDigestJoin(b *testing.B) {
	prefix := testinfra.Name(b)
	coordtest.BenchDigestJoin(b, redis.NewDigests(newClient(b, prefix), redis.DigestOptions{Prefix: prefix}), 16)
}
