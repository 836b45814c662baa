package memory_test

import (
	"testing"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/coord/coordtest"
	"github.com/rune-org/rune/coord/memory"
)

func TestEffectsConformance(t *testing.T) {
	coordtest.RunEffects(t, func(t *testing.T) coord.Effects { return memory.NewEffects(0) })
}
