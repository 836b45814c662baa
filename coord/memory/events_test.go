package memory_test

import (
	"testing"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/coord/coordtest"
	"github.com/rune-org/rune/coord/memory"
)

func TestEvents(t *testing.T) {
	coordtest.RunEvents(t, func(t *testing.T) coord.Events { return memory.NewEvents() })
}

// BenchmarkEventsDeliver: events matched per second with 100,000 waiting
// (docs/benchmarks.md).
func BenchmarkEventsDeliver(b *testing.B) {
	coordtest.BenchEventsDeliver(b, memory.NewEvents(), memory.NewTimers(), 100_000, 0)
}
