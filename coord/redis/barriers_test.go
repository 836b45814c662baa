package redis_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/coord/coordtest"
	"github.com/rune-org/rune/coord/redis"
	"github.com/rune-org/rune/internal/testinfra"
)

func newBarriers(t testing.TB, opts redis.BarrierOptions) (*redis.Barriers, *goredis.Client, string) {
	t.Helper()
	opts.Prefix = testinfra.Name(t)
	client := newClient(t, opts.Prefix)
	return redis.NewBarriers(client, opts), client, opts.Prefix
}

// TestBarriersConformance runs the suite with the values in the barrier's
// vals hash (1 shard) and spread over 16 shard keys.
func TestBarriersConformance(t *testing.T) {
	for _, shards := range []int{1, 16} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			coordtest.RunBarriers(t, func(t *testing.T) coord.Barriers {
				b, _, _ := newBarriers(t, redis.BarrierOptions{Shards: shards})
				return b
			})
		})
	}
}

func TestBlobsConformance(t *testing.T) {
	coordtest.RunBlobs(t, func(t *testing.T) coord.Blobs {
		prefix := testinfra.Name(t)
		return redis.NewBlobs(newClient(t, prefix), redis.BlobOptions{Prefix: prefix})
	})
}

// ttlOf fails unless key exists with a TTL in (lo, hi].
func ttlOf(t *testing.T, client *goredis.Client, key string, lo, hi time.Duration) {
	t.Helper()
	pttl, err := client.PTTL(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if pttl <= lo || pttl > hi {
		t.Fatalf("key %q: TTL %v, want in (%v, %v] (-2: missing, -1: none)", key, pttl, lo, hi)
	}
}

// TestBarrierKeys: a barrier's keys carry the execution's hash tag and the
// spec's TTL, refreshed on arrival; on completion they keep only Retain and
// the execution's closed hash holds the barrier's marker for the TTL; Cancel
// leaves only the marker.
func TestBarrierKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ttl, retain = time.Hour, time.Minute
	b, client, prefix := newBarriers(t, redis.BarrierOptions{Retain: retain})
	spec := coord.BarrierSpec{Total: 3, Need: 3, TTL: ttl, State: []byte("s")}
	for _, exec := range []string{"exec-1", "odd}exec{"} {
		if err := b.Open(ctx, exec, "split_1/0", spec); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Arrive(ctx, exec, "split_1/0", spec, 0, []byte("a")); err != nil {
			t.Fatal(err)
		}
	}
	keys := client.Keys(ctx, prefix+":*").Val()
	byTag := map[string]int{}
	for _, k := range keys {
		byTag[hashTag(k)]++
		ttlOf(t, client, k, ttl-time.Minute, ttl)
	}
	if len(byTag) != 2 || byTag["exec-1"] != 3 || byTag["odd"] != 3 {
		t.Fatalf("keys by hash tag %v, want meta, vals and state under exec-1 and odd", byTag)
	}

	base := prefix + ":{exec-1}:bar:split_1/0:"
	parts := []string{"meta", "vals", "state"}
	for _, p := range parts {
		client.PExpire(ctx, base+p, 10*time.Second)
	}
	if a, err := b.Arrive(ctx, "exec-1", "split_1/0", spec, 0, []byte("a")); err != nil || !a.Duplicate {
		t.Fatalf("repeat: %+v, %v; want Duplicate", a, err)
	}
	for _, p := range parts {
		ttlOf(t, client, base+p, ttl-time.Minute, ttl) // a duplicate refreshes too
	}
	for _, slot := range []int{1, 2} {
		if _, err := b.Arrive(ctx, "exec-1", "split_1/0", spec, slot, []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range parts {
		ttlOf(t, client, base+p, 0, retain)
	}
	closed := prefix + ":{exec-1}:closed"
	ttlOf(t, client, closed, ttl-time.Minute, ttl)
	if v := client.HGet(ctx, closed, "split_1/0").Val(); v != "done:2" {
		t.Fatalf("closed marker %q, want done:2", v)
	}

	// Cancel deletes the barrier and leaves a marker for the TTL.
	if was, err := b.Cancel(ctx, "odd}exec{", "split_1/0"); err != nil || !was {
		t.Fatalf("Cancel: %v, %v", was, err)
	}
	obase := prefix + ":{odd}exec{}:bar:split_1/0:"
	if n := client.Exists(ctx, obase+"meta", obase+"vals", obase+"state").Val(); n != 0 {
		t.Fatalf("after Cancel %d of meta, vals and state remain", n)
	}
	ttlOf(t, client, prefix+":{odd}exec{}:closed", ttl-time.Minute, ttl)
	// And Cancel of an unknown barrier leaves a marker for the default TTL.
	if was, err := b.Cancel(ctx, "exec-2", "never"); err != nil || !was {
		t.Fatalf("Cancel unknown: %v, %v", was, err)
	}
	ttlOf(t, client, prefix+":{exec-2}:closed", redis.DefaultBarrierTTL-time.Minute, redis.DefaultBarrierTTL)
	if _, err := b.Arrive(ctx, "exec-2", "never", spec, 0, nil); !errors.Is(err, coord.ErrBarrierClosed) {
		t.Fatalf("Arrive at a cancelled unknown barrier: %v, want ErrBarrierClosed", err)
	}
}

// TestBarrierRetain: after Retain the completer's repeat is closed out too,
// while the closed marker keeps late arrivals out.
func TestBarrierRetain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const retain = 200 * time.Millisecond
	b, client, prefix := newBarriers(t, redis.BarrierOptions{Retain: retain})
	spec := coord.BarrierSpec{Total: 2, Need: 1}
	if a, err := b.Arrive(ctx, "e", "any", spec, 1, []byte("v")); err != nil || !a.Complete {
		t.Fatalf("Arrive: %+v, %v; want Complete", a, err)
	}
	vals := prefix + ":{e}:bar:any:vals"
	deadline := time.Now().Add(5 * time.Second)
	for client.Exists(ctx, vals).Val() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s still exists 5s after completion with Retain %v", vals, retain)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, slot := range []int{1, 0} {
		if _, err := b.Arrive(ctx, "e", "any", spec, slot, []byte("late")); !errors.Is(err, coord.ErrBarrierClosed) {
			t.Fatalf("Arrive slot %d after Retain: %v, want ErrBarrierClosed", slot, err)
		}
	}
}

// TestBarrierOneRoundTrip: each operation, the completing Arrive included,
// is a single command once the scripts are cached.
func TestBarrierOneRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, client, _ := newBarriers(t, redis.BarrierOptions{})
	spec := coord.BarrierSpec{Total: 2, Need: 2}
	// Warm the script cache (a cold EVALSHA falls back to EVAL).
	b.Open(ctx, "warm", "k", spec)
	b.Arrive(ctx, "warm", "k", spec, 0, nil)
	b.Cancel(ctx, "warm", "k")

	hook := &tripHook{}
	client.AddHook(hook)
	steps := []step{
		{"Open", func() error { return b.Open(ctx, "e", "k", spec) }},
		{"Arrive", func() error { _, err := b.Arrive(ctx, "e", "k", spec, 0, []byte("a")); return err }},
		{"completing Arrive", func() error {
			a, err := b.Arrive(ctx, "e", "k", spec, 1, []byte("b"))
			if err == nil && len(a.Values) != 2 {
				err = fmt.Errorf("%d values, want 2", len(a.Values))
			}
			return err
		}},
		{"Cancel", func() error { _, err := b.Cancel(ctx, "e", "other"); return err }},
	}
	oneTripEach(t, hook, steps)
}

// TestBarrierScale: one barrier of 100,000 slots of about 100 bytes. It logs
// the time of the completing Arrive (one reply of about 10 MB) and Redis
// memory per slot while the barrier is open.
func TestBarrierScale(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 100,000 arrivals")
	}
	t.Parallel()
	ctx := context.Background()
	const total, workers = 100_000, 64
	b, client, prefix := newBarriers(t, redis.BarrierOptions{})
	spec := coord.BarrierSpec{Total: total, Need: total}
	value := func(slot int) []byte {
		v := fmt.Appendf(nil, `{"i":%d,"s":"`, slot)
		v = append(v, strings.Repeat("x", 100-len(v)-2)...)
		return append(v, `"}`...)
	}
	if err := b.Open(ctx, "exec-scale", "agg", coord.BarrierSpec{Total: total, Need: total, State: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	inParallel(t, workers, total-1, func(slot int) error {
		if _, err := b.Arrive(ctx, "exec-scale", "agg", spec, slot, value(slot)); err != nil {
			return fmt.Errorf("Arrive slot %d: %w", slot, err)
		}
		return nil
	})
	if t.Failed() {
		return
	}
	fill := time.Since(start)
	vals := prefix + ":{exec-scale}:bar:agg:vals"
	usage, err := client.MemoryUsage(ctx, vals, 0).Result()
	if err != nil {
		t.Fatal(err)
	}

	start = time.Now()
	a, err := b.Arrive(ctx, "exec-scale", "agg", spec, total-1, value(total-1))
	last := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if !a.Complete || a.Arrived != total || len(a.Values) != total {
		t.Fatalf("last Arrive: Complete %v Arrived %d, %d values; want the completion of %d", a.Complete, a.Arrived, len(a.Values), total)
	}
	size := 0
	for i, v := range a.Values {
		if string(v) != string(value(i)) {
			t.Fatalf("Values[%d] = %q, want %q", i, v, value(i))
		}
		size += len(v)
	}
	t.Logf("%d arrivals from %d goroutines in %v (%.0f/s); completing Arrive %v for %.1f MB of values; vals hash %.1f MB, %d B per slot",
		total-1, workers, fill, float64(total-1)/fill.Seconds(), last, float64(size)/1e6, float64(usage)/1e6, usage/total)
}

// inParallel calls fn(i) for every i in 0..n-1, from workers goroutines; a
// goroutine stops at its first error, which fails t.
func inParallel(t testing.TB, workers, n int, fn func(i int) error) {
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkArrive measures one non-completing Arrive of 100 bytes, from one
// goroutine (latency) and from 4 per CPU (throughput); barriers of 1,000
// slots, so one Arrive in 1,000 completes one.
func BenchmarkArrive(b *testing.B) {
	b.Run("serial", func(b *testing.B) { benchArrive(b, 0) })
	b.Run("parallel", func(b *testing.B) { benchArrive(b, 4) })
}

func benchArrive(b *testing.B, parallelism int) {
	bs, _, _ := newBarriers(b, redis.BarrierOptions{Retain: 10 * time.Second})
	coordtest.BenchArrive(b, bs, parallelism)
}
