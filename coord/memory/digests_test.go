package memory_test

import (
	"testing"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/coord/coordtest"
	"github.com/rune-org/rune/coord/memory"
)

func TestDigestsConformance(t *testing.T) {
	coordtest.RunDigests(t, func(t *testing.T) coord.Digests { return memory.NewDigests() })
}

// BenchmarkDigestJoin: coordtest.BenchDigestJoin from one goroutine.
func BenchmarkDigestJoin(b *testing.B) {
	coordtest.BenchDigestJoin(b, memory.NewDigests(), 0)
}
