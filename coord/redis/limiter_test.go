package redis_test

import (
	"testing"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/coord/coordtest"
	"github.com/rune-org/rune/coord/redis"
	"github.com/rune-org/rune/internal/testinfra"
)

func TestLimiterConformance(t *testing.T) {
	coordtest.RunLimiter(t, func(t *testing.T) coord.Limiter {
		prefix := testinfra.Name(t)
		return redis.NewLimiter(newClient(t, prefix), redis.LimiterOptions{Prefix: prefix})
	})
}

// TestClusterLimiterConformance runs the Limiter's suite on the local Redis
// Cluster: each script's keys share a slot.
func TestClusterLimiterConformance(t *testing.T) {
	coordtest.RunLimiter(t, func(t *testing.T) coord.Limiter {
		prefix := testinfra.Name(t)
		return redis.NewLimiter(newClusterClient(t, prefix), redis.LimiterOptions{Prefix: prefix})
	})
}
