package bench_test

import (
	"context"
	"testing"

	"github.com/rune-org/rune/embedded"
	"github.com/rune-org/rune/internal/bench"
)

// BenchmarkEmbeddedLinear runs 10-node linear executions on the embedded
// runtime, 1,000 in flight, as `rune bench` does; one op is one execution.
func BenchmarkEmbeddedLinear(b *testing.B) {
	rt, err := embedded.New(embedded.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	wf, err := rt.Engine.Compile(bench.LinearWorkflow(10))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	res, err := bench.Run(context.Background(), rt.Broker, rt.Engine, wf, bench.Config{Executions: b.N, InFlight: 1000})
	if err != nil {
		b.Fatal(err)
	}
	if res.Failed > 0 || res.Executions != b.N {
		b.Fatalf("%d of %d executions completed, %d not completed", res.Executions, b.N, res.Failed)
	}
	b.ReportMetric(res.NodesPerSecond, "nodes/s")
	b.ReportMetric(float64(res.HopP50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(res.HopP99.Microseconds()), "p99-µs")
}
