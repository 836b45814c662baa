package redis_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/coord/coordtest"
	"github.com/rune-org/rune/coord/redis"
	"github.com/rune-org/rune/internal/testinfra"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testinfra.StopRedisCluster()
	os.Exit(code)
}

// newClusterClient returns a client of the local three-master Redis
// Cluster; it deletes the keys under prefix on every master when the test
// ends.
func newClusterClient(t testing.TB, prefix string) *goredis.ClusterClient {
	t.Helper()
	client := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: testinfra.RedisClusterAddrs(t)})
	t.Cleanup(func() {
		ctx := context.Background()
		_ = client.ForEachMaster(ctx, func(ctx context.Context, m *goredis.Client) error {
			for _, k := range m.Keys(ctx, prefix+":*").Val() {
				m.Del(ctx, k)
			}
			return nil
		})
		client.Close()
	})
	return client
}

// keysPerMaster counts the keys under prefix on each master of client.
func keysPerMaster(t testing.TB, client *goredis.ClusterClient, prefix string) map[string]int {
	t.Helper()
	ctx := context.Background()
	counts := make(chan [2]string, 16)
	err := client.ForEachMaster(ctx, func(ctx context.Context, m *goredis.Client) error {
		n := len(m.Keys(ctx, prefix+":*").Val())
		counts <- [2]string{m.Options().Addr, fmt.Sprint(n)}
		return nil
	})
	close(counts)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for c := range counts {
		var n int
		fmt.Sscan(c[1], &n)
		out[c[0]] = n
	}
	return out
}

// TestClusterConformance runs the coordination suites (coordinator,
// barriers, blobs, effects, timers) on a real three-master Redis Cluster:
// every script's keys must share a slot, or Redis refuses it (CROSSSLOT).
func TestClusterConformance(t *testing.T) {
	t.Run("coordinator", func(t *testing.T) {
		coordtest.Run(t, func(t *testing.T) coord.Coordinator {
			prefix := testinfra.Name(t)
			return redis.New(newClusterClient(t, prefix), redis.Options{Prefix: prefix})
		})
	})
	for _, shards := range []int{1, 16} {
		t.Run(fmt.Sprintf("barriers/shards=%d", shards), func(t *testing.T) {
			coordtest.RunBarriers(t, func(t *testing.T) coord.Barriers {
				prefix := testinfra.Name(t)
				return redis.NewBarriers(newClusterClient(t, prefix), redis.BarrierOptions{Prefix: prefix, Shards: shards})
			})
		})
	}
	t.Run("effects", func(t *testing.T) {
		coordtest.RunEffects(t, func(t *testing.T) coord.Effects {
			prefix := testinfra.Name(t)
			return redis.NewEffects(newClusterClient(t, prefix), redis.EffectOptions{Prefix: prefix})
		})
	})
	// Held on the master of one key's slot: the suite's other keys live on
	// other masters too, whose MOVED replies the binding hands to the
	// cluster client.
	t.Run("effects/held", func(t *testing.T) {
		coordtest.RunEffects(t, func(t *testing.T) coord.Effects {
			prefix := testinfra.Name(t)
			return held(t, redis.NewEffects(newClusterClient(t, prefix), redis.EffectOptions{Prefix: prefix}))
		})
	})
	for _, shards := range []int{1, 16} {
		t.Run(fmt.Sprintf("blobs/shards=%d", shards), func(t *testing.T) {
			coordtest.RunBlobs(t, func(t *testing.T) coord.Blobs {
				prefix := testinfra.Name(t)
				return redis.NewBlobs(newClusterClient(t, prefix), redis.BlobOptions{Prefix: prefix, Shards: shards})
			})
		})
		t.Run(fmt.Sprintf("timers/shards=%d", shards), func(t *testing.T) {
			coordtest.RunTimers(t, func(t *testing.T) coord.Timers {
				prefix := testinfra.Name(t)
				return redis.NewTimers(newClusterClient(t, prefix), redis.TimerOptions{Prefix: prefix, Shards: shards})
			})
		})
	}
}

// TestClusterSpread: with 16 shards, timers and the definitions' blobs
// land on all three masters, and every shard is claimed from.
func TestClusterSpread(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	prefix := testinfra.Name(t)
	client := newClusterClient(t, prefix)
	ts := redis.NewTimers(client, redis.TimerOptions{Prefix: prefix, Shards: 16})
	blobs := redis.NewBlobs(client, redis.BlobOptions{Prefix: prefix, Shards: 16})
	base := time.UnixMilli(1_760_000_000_000)
	const n = 400
	for i := range n {
		if err := ts.Schedule(ctx, fmt.Sprintf("t%04d", i), base.Add(time.Duration(i)*time.Millisecond), []byte("p")); err != nil {
			t.Fatal(err)
		}
		if _, err := blobs.Put(ctx, "definitions", []byte(fmt.Sprint("def", i))); err != nil {
			t.Fatal(err)
		}
	}
	per := keysPerMaster(t, client, prefix)
	if len(per) != testinfra.RedisClusterMasters {
		t.Fatalf("keys per master %v, want %d masters", per, testinfra.RedisClusterMasters)
	}
	for addr, k := range per {
		if k == 0 {
			t.Fatalf("master %s holds none of the keys (per master: %v)", addr, per)
		}
	}
	// Every shard holds some timers and gives them up in due order.
	for i := range ts.Shards() {
		if w := client.Get(ctx, ts.ShardKeys(i)[6]).Val(); w == "" || w == "0" {
			t.Fatalf("shard %d holds no timer (waiting %q)", i, w)
		}
	}
	var last time.Time
	seen := 0
	for seen < n {
		got, err := ts.Claim(ctx, base.Add(time.Hour), 37, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			t.Fatalf("Claim returned nothing after %d of %d timers", seen, n)
		}
		for _, tm := range got {
			if tm.Due.Before(last) {
				t.Fatalf("timer %s due %v claimed after one due %v: not in due order across shards", tm.ID, tm.Due, last)
			}
			if want := fmt.Sprintf("t%04d", seen); tm.ID != want {
				t.Fatalf("claim %d: got %s, want %s", seen, tm.ID, want)
			}
			last = tm.Due
			seen++
		}
	}
	if st, err := ts.Stats(ctx); err != nil || st.Scheduled != 0 || st.Claimed != n {
		t.Fatalf("Stats %+v (%v), want 0 waiting and %d claimed", st, err, n)
	}
	if err := blobs.Release(ctx, "definitions"); err != nil {
		t.Fatal(err)
	}
	for addr, k := range keysPerMaster(t, client, prefix+":{definitions") {
		if k != 0 {
			t.Fatalf("master %s keeps %d blob keys after Release", addr, k)
		}
	}
}

// TestClusterFanoutSpread: the Redis side of a 10,000-item fan-out on the
// three-master cluster with 16 shards, driven through the coord API from 64
// goroutines as workers drive it: per item a Finish (a record of about 150
// bytes, the size a set node's is) and an Arrive at the aggregator (a value
// of about 100 bytes). At the peak, all items but the last arrived, every
// master holds some of the execution's keys; it logs keys, bytes (MEMORY
// USAGE) and commands per master. The last arrival completes the barrier
// with every value in slot order.
func TestClusterFanoutSpread(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 10,000 items")
	}
	t.Parallel()
	ctx := context.Background()
	prefix := testinfra.Name(t)
	client := newClusterClient(t, prefix)
	const exec, key, items, workers = "fanout-1", "split_1/0", 10_000, 64
	co := redis.New(client, redis.Options{Prefix: prefix})
	bars := redis.NewBarriers(client, redis.BarrierOptions{Prefix: prefix, Shards: 16})
	spec := coord.BarrierSpec{Total: items, Need: items}
	value := func(i int) []byte { return fmt.Appendf(nil, `{"double":%d,"pad":"%s"}`, 2*i, strings.Repeat("x", 70)) }
	record := func(i int) coord.Bytes {
		return coord.Bytes(fmt.Sprintf(`{"output":{"double":%d},"route":null,"started_at":"2026-11-24T14:29:54.180578446Z","finished_at":"2026-11-24T14:29:54.180590429Z","duration_ms":0}`, 2*i))
	}
	if err := co.Start(ctx, exec, items+1); err != nil { // +1: the execution goes on
		t.Fatal(err)
	}
	if err := bars.Open(ctx, exec, key, coord.BarrierSpec{Total: items, Need: items, State: []byte(`{"items":"…"}`)}); err != nil {
		t.Fatal(err)
	}
	before := masterStats(t, client)
	start := time.Now()
	inParallel(t, workers, items-1, func(i int) error {
		if _, err := co.Finish(ctx, exec, fmt.Sprintf("%032x", i), coord.Finish{Record: record(i)}); err != nil {
			return fmt.Errorf("Finish item %d: %w", i, err)
		}
		if a, err := bars.Arrive(ctx, exec, key, spec, i, value(i)); err != nil || a.Complete {
			return fmt.Errorf("Arrive item %d: Complete %v, %v; want pending", i, a.Complete, err)
		}
		return nil
	})
	if t.Failed() {
		return
	}
	fill := time.Since(start)
	peak := masterStats(t, client)
	keys := keysPerMaster(t, client, prefix)
	bytes := bytesPerMaster(t, client, prefix)
	a, err := bars.Arrive(ctx, exec, key, spec, items-1, value(items-1))
	if err != nil || !a.Complete || len(a.Values) != items {
		t.Fatalf("last Arrive: Complete %v with %d values, %v; want the completion of %d values", a.Complete, len(a.Values), err, items)
	}
	for i, v := range a.Values {
		if string(v) != string(value(i)) {
			t.Fatalf("Values[%d] = %q, want %q", i, v, value(i))
		}
	}
	t.Logf("%d items (Finish + Arrive) from %d goroutines in %v", items-1, workers, fill)
	for _, addr := range slices.Sorted(maps.Keys(keys)) {
		t.Logf("master %s at the peak: %d keys, %.2f MiB (MEMORY USAGE), %d commands served (the whole cluster's tests included)",
			addr, keys[addr], float64(bytes[addr])/(1<<20), peak[addr].cmds-before[addr].cmds)
	}
	if len(keys) != testinfra.RedisClusterMasters {
		t.Fatalf("keys per master %v, want %d masters", keys, testinfra.RedisClusterMasters)
	}
	for addr, k := range keys {
		if k == 0 {
			t.Fatalf("master %s holds none of the execution's keys at the peak (per master: %v)", addr, keys)
		}
	}
}

// bytesPerMaster sums MEMORY USAGE of the keys under prefix on each master
// of client.
func bytesPerMaster(t testing.TB, client *goredis.ClusterClient, prefix string) map[string]int64 {
	t.Helper()
	var mu sync.Mutex
	out := map[string]int64{}
	err := client.ForEachMaster(context.Background(), func(ctx context.Context, m *goredis.Client) error {
		var sum int64
		iter := m.Scan(ctx, 0, prefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			n, err := m.MemoryUsage(ctx, iter.Val(), 0).Result()
			if err != nil {
				return err
			}
			sum += n
		}
		mu.Lock()
		out[m.Options().Addr] = sum
		mu.Unlock()
		return iter.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
