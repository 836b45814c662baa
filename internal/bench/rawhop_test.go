package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rune-org/rune/internal/testinfra"
)

func rawConfig(t testing.TB) RawConfig {
	return RawConfig{URL: testinfra.AMQPURL(t), Prefix: testinfra.Name(t) + ".", Name: t.Name()}
}

func TestRawHopBenchmark(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, p := range []HopPattern{{}, {Body: 2000, Statuses: 2, StatusBody: 200, InFlight: 16}} {
		r, err := RawHopBenchmark(ctx, rawConfig(t), 2000, 4, p)
		if err != nil {
			t.Fatal(err)
		}
		if r.Hops != 2000 || r.HopsPerSec <= 0 || r.P50 <= 0 || r.P99 < r.P50 || r.Pattern != p.withDefaults() || r.InFlight != max(4, p.InFlight) {
			t.Fatalf("implausible result: %+v", r)
		}
		t.Log(r.Pattern, r)
	}
}

// BenchmarkHop is RabbitMQ's raw ceiling: one consume + one confirmed
// persistent publish per hop (RawHopBenchmark).
func BenchmarkHop(b *testing.B) {
	for _, c := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("concurrency=%d", c), func(b *testing.B) {
			cfg := rawConfig(b)
			hops := max(b.N, 2*c)
			r, err := RawHopBenchmark(context.Background(), cfg, hops, c, HopPattern{})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(r.HopsPerSec, "hops/s")
			b.ReportMetric(float64(r.P50.Microseconds()), "p50-µs")
			b.ReportMetric(float64(r.P99.Microseconds()), "p99-µs")
		})
	}
}
