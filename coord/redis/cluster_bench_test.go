package redis_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rune-org/rune/coord/redis"
	"github.com/rune-org/rune/internal/testinfra"
)

// BenchmarkClusterTimers schedules 100,000 timers (32-hex-digit ids, 200-byte
// payloads, due over the next second) on the local three-master Redis
// Cluster with 16 shards, 64 at once, then fires them all as schedulers do
// (4 claimers, Claim 500 then Done each), and reports the rates, the
// latency percentiles of Schedule and Claim, and per master its keys, its
// used_memory growth and the commands it served. Run it with
// -benchtime=1x: one iteration is the whole 100,000. RUNE_BENCH_TIMERS
// sets another count.
func BenchmarkClusterTimers(b *testing.B) {
	const shards = 16
	n := int64(100_000)
	if v, err := strconv.ParseInt(os.Getenv("RUNE_BENCH_TIMERS"), 10, 64); err == nil && v > 0 {
		n = v
	}
	for range b.N {
		prefix := testinfra.Name(b)
		client := newClusterClient(b, prefix)
		ctx := context.Background()
		ts := redis.NewTimers(client, redis.TimerOptions{Prefix: prefix, Shards: shards})
		before := masterStats(b, client)
		payload := []byte(strings.Repeat("p", 200))
		base := time.Now()
		var next atomic.Int64
		lat := make([][]time.Duration, 64)
		start := time.Now()
		var wg sync.WaitGroup
		for w := range lat {
			wg.Go(func() {
				for {
					i := next.Add(1) - 1
					if i >= n {
						return
					}
					id := fmt.Sprintf("%032x", i*2654435761)
					t0 := time.Now()
					if err := ts.Schedule(ctx, id, base.Add(time.Duration(i%1000)*time.Millisecond), payload); err != nil {
						b.Error(err)
						return
					}
					lat[w] = append(lat[w], time.Since(t0))
				}
			})
		}
		wg.Wait()
		schedule := time.Since(start)
		mid := masterStats(b, client)
		time.Sleep(time.Until(base.Add(time.Second)))

		var fired atomic.Int64
		claimLat := make([][]time.Duration, 4)
		start = time.Now()
		for c := range claimLat {
			wg.Go(func() {
				for fired.Load() < n {
					t0 := time.Now()
					got, err := ts.Claim(ctx, time.Now(), 500, time.Minute)
					if err != nil {
						b.Error(err)
						return
					}
					claimLat[c] = append(claimLat[c], time.Since(t0))
					for _, t := range got {
						if err := ts.Done(ctx, t.ID); err != nil {
							b.Error(err)
							return
						}
					}
					fired.Add(int64(len(got)))
				}
			})
		}
		wg.Wait()
		fire := time.Since(start)
		after := masterStats(b, client)

		sl, cl := slices.Concat(lat...), slices.Concat(claimLat...)
		b.ReportMetric(float64(n)/schedule.Seconds(), "scheduled/s")
		b.ReportMetric(float64(n)/fire.Seconds(), "fired/s")
		b.ReportMetric(pct(sl, 50).Seconds()*1e3, "schedule-p50-ms")
		b.ReportMetric(pct(sl, 99).Seconds()*1e3, "schedule-p99-ms")
		b.ReportMetric(pct(cl, 50).Seconds()*1e3, "claim500-p50-ms")
		b.ReportMetric(pct(cl, 99).Seconds()*1e3, "claim500-p99-ms")
		for _, addr := range slices.Sorted(maps.Keys(before)) {
			b0, m, a := before[addr], mid[addr], after[addr]
			b.Logf("master %s: %d keys and +%.1f MiB with %d timers waiting; served %d commands scheduling, %d firing",
				addr, m.keys-b0.keys, float64(m.mem-b0.mem)/(1<<20), n, m.cmds-b0.cmds, a.cmds-m.cmds)
			if m.keys-b0.keys == 0 {
				b.Errorf("master %s holds no timer key", addr)
			}
		}
	}
}

// masterStat is what one master holds and has served.
type masterStat struct{ keys, mem, cmds int64 }

// masterStats reads DBSIZE, used_memory and total_commands_processed of
// every master.
func masterStats(b testing.TB, client *goredis.ClusterClient) map[string]masterStat {
	var mu sync.Mutex
	out := map[string]masterStat{}
	err := client.ForEachMaster(context.Background(), func(ctx context.Context, m *goredis.Client) error {
		keys, err := m.DBSize(ctx).Result()
		if err != nil {
			return err
		}
		info, err := m.InfoMap(ctx, "memory", "stats").Result()
		if err != nil {
			return err
		}
		mem, _ := strconv.ParseInt(info["Memory"]["used_memory"], 10, 64)
		cmds, _ := strconv.ParseInt(info["Stats"]["total_commands_processed"], 10, 64)
		mu.Lock()
		out[m.Options().Addr] = masterStat{keys, mem, cmds}
		mu.Unlock()
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return out
}

// pct is the p-th percentile of d (sorted in place).
func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[min(len(d)*p/100, len(d)-1)]
}
