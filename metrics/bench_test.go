package metrics_test

import (
	"testing"
	"time"

	"github.com/rune-org/rune/metrics"
)

// The cost a node run pays with metrics on (docs/benchmarks.md).
func BenchmarkNodeRun(b *testing.B) {
	rec := metrics.New(metrics.Config{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			rec.NodeRun("bench_linear", "set", "success", 40*time.Microsecond)
		}
	})
}
