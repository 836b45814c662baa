package memory_test

import (
	"testing"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/coord/coordtest"
	"github.com/rune-org/rune/coord/memory"
)

func TestLimiterConformance(t *testing.T) {
	coordtest.RunLimiter(t, func(t *testing.T) coord.Limiter { return memory.NewLimiter() })
}
