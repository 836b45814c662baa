package sqlite

import (
	"testing"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/coord/coordtest"
)

// The benchmarks run at several parallelisms (goroutines per GOMAXPROCS):
// the group commit gains with concurrent callers, as the embedded
// runtime's worker goroutines are.
var benchParallelism = []int{1, 16, 64}

func benchName(p int) string {
	return "p" + string(rune('0'+p/10%10)) + string(rune('0'+p%10))
}

// BenchmarkBeginFinish: coordtest.BenchBeginFinish, a Begin and a Finish
// per op.
func BenchmarkBeginFinish(b *testing.B) {
	for _, p := range benchParallelism {
		b.Run(benchName(p), func(b *testing.B) {
			coordtest.BenchBeginFinish(b, newStore(b, nil, Options{}).Coordinator(), p)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
		})
	}
}

// BenchmarkArrive: coordtest.BenchArrive, one Arrive per op.
func BenchmarkArrive(b *testing.B) {
	for _, p := range benchParallelism {
		b.Run(benchName(p), func(b *testing.B) {
			coordtest.BenchArrive(b, newStore(b, nil, Options{}).Barriers(), p)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
		})
	}
}

// BenchmarkTimersScheduleClaim: coordtest.BenchTimersScheduleClaim, one
// timer's Schedule, Claim (in batches of 100) and Done per op, from one
// goroutine.
func BenchmarkTimersScheduleClaim(b *testing.B) {
	coordtest.BenchTimersScheduleClaim(b, func(b *testing.B) coord.Timers { return newStore(b, nil, Options{}).Timers() })
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}
