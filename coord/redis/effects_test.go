package redis_test

import (
	"context"
	"fmt"
	"sync"
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
	t.Run("held", func(t *testing.T) {
		coordtest.RunEffects(t, func(t *testing.T) coord.Effects {
			prefix := testinfra.Name(t)
			return held(t, redis.NewEffects(newClient(t, prefix), redis.EffectOptions{Prefix: prefix}))
		})
	})
}

// held is e's binding of one connection (Hold), released at the test's end.
func held(t *testing.T, e *redis.Effects) coord.Effects {
	h, release := e.Hold(context.Background(), "k")
	t.Cleanup(release)
	return h
}

// A held binding keeps its connection: its calls take none from the pool,
// however busy the pool is.
func TestEffectsHoldKeepsOneConnection(t *testing.T) {
	t.Parallel()
	prefix := testinfra.Name(t)
	client := newClient(t, prefix)
	e := redis.NewEffects(client, redis.EffectOptions{Prefix: prefix})
	h, release := e.Hold(context.Background(), "k")
	defer release()
	if _, err := h.Begin(context.Background(), "k"); err != nil {
		t.Fatal(err)
	}
	before := client.PoolStats()
	if err := h.Record(context.Background(), "k", []byte("sent")); err != nil {
		t.Fatal(err)
	}
	if err := h.Withdraw(context.Background(), "k", []byte("sent")); err != nil {
		t.Fatal(err)
	}
	after := client.PoolStats()
	if after.Hits != before.Hits || after.Misses != before.Misses {
		t.Fatalf("pool gets during the held calls: hits %d → %d, misses %d → %d; want none", before.Hits, after.Hits, before.Misses, after.Misses)
	}
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

// Many sends at once, each holding a connection that has to be dialled:
// go-redis must not race on its options while it sets them up (run with
// -race; it did while maintenance notifications were left on auto).
func TestEffectsHoldConcurrently(t *testing.T) {
	t.Parallel()
	prefix := testinfra.Name(t)
	conn, err := redis.OpenPool(testinfra.RedisURL(t), 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = redis.DeleteKeys(context.Background(), conn.Client, prefix+":*")
		conn.Client.Close()
	})
	e := redis.NewEffects(conn.Client, redis.EffectOptions{Prefix: prefix})
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			key := fmt.Sprintf("k%d", i)
			h, release := e.Hold(context.Background(), key)
			defer release()
			if _, err := h.Begin(context.Background(), key); err != nil {
				t.Error(err)
				return
			}
			if err := h.Record(context.Background(), key, []byte("sent")); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}
