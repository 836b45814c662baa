package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/coord/coordtest"
	"github.com/rune-org/rune/coord/redis"
	"github.com/rune-org/rune/internal/testinfra"
)

func TestEffectsConformance(t *testing.T) {
	coordtest.RunEffects(t, func(t *testing.T) coord.Effects {
		prefix := testinfra.Name(t)
		return redis.NewEffects(newClient(t, prefix), redis.EffectOptions{Prefix: prefix})
	})
}

// TestEffectsKeys: an effect is one hash-tagged key that keeps Retain.
func TestEffectsKeys(t *testing.T) {
	t.Parallel()
	prefix := testinfra.Name(t)
	client := newClient(t, prefix)
	e := redis.NewEffects(client, redis.EffectOptions{Prefix: prefix, Retain: time.Hour})
	if _, err := e.Begin(context.Background(), "exec1/n"); err != nil {
		t.Fatal(err)
	}
	ttlOf(t, client, prefix+":{exec1/n}:effect", 59*time.Minute, time.Hour)
}
