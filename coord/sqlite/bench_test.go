package sqlite

import (
	"syscall"
	"testing"
	"time"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/coord/coordtest"
)

// The benchmarks run at several parallelisms (goroutines per GOMAXPROCS):
// the group commit gains with concurrent callers, as the embedded
// runtime's worker goroutines are.
var benchParallelism = []int{1, 16, 64}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measure runs f and reports ops/s, and the CPU time per op (of every
// goroutine: callers, writer, readers), which a loaded machine's waits do
// not inflate: on n idle cores the store's ceiling is about n / cpu-s/op.
func measure(b *testing.B, f func()) {
	start := cpuTime(b)
	f()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	b.ReportMetric(float64((cpuTime(b)-start).Microseconds())/float64(b.N), "cpu-µs/op")
}

func benchName(p int) string {
	return "p" + string(rune('0'+p/10%10)) + string(rune('0'+p%10))
}

// BenchmarkBeginFinish: coordtest.BenchBeginFinish, a Begin and a Finish
// per op.
func BenchmarkBeginFinish(b *testing.B) {
	for _, p := range benchParallelism {
		b.Run(benchName(p), func(b *testing.B) {
			c := newStore(b, nil, Options{}).Coordinator()
			measure(b, func() { coordtest.BenchBeginFinish(b, c, p) })
		})
	}
}

// BenchmarkArrive: coordtest.BenchArrive, one Arrive per op.
func BenchmarkArrive(b *testing.B) {
	for _, p := range benchParallelism {
		b.Run(benchName(p), func(b *testing.B) {
			bs := newStore(b, nil, Options{}).Barriers()
			measure(b, func() { coordtest.BenchArrive(b, bs, p) })
		})
	}
}

// BenchmarkTimersScheduleClaim: coordtest.BenchTimersScheduleClaim, one
// timer's Schedule, Claim (in batches of 100) and Done per op, from one
// goroutine.
func BenchmarkTimersScheduleClaim(b *testing.B) {
	measure(b, func() {
		coordtest.BenchTimersScheduleClaim(b, func(b *testing.B) coord.Timers { return newStore(b, nil, Options{}).Timers() })
	})
}

// BenchmarkEventsDeliver: coordtest.BenchEventsDeliver with 100,000
// executions waiting, a Deliver and the Wake of its match per op
// (docs/benchmarks.md, issue 34).
func BenchmarkEventsDeliver(b *testing.B) {
	s := newStore(b, nil, Options{})
	measure(b, func() { coordtest.BenchEventsDeliver(b, s.Events(), s.Timers(), 100_000, 16) })
}

// BenchmarkDigestJoin: coordtest.BenchDigestJoin, one Join per op
// (docs/benchmarks.md, issue 36).
func BenchmarkDigestJoin(b *testing.B) {
	for _, p := range benchParallelism {
		b.Run(benchName(p), func(b *testing.B) {
			d := newStore(b, nil, Options{}).Digests()
			measure(b, func() { coordtest.BenchDigestJoin(b, d, p) })
		})
	}
}
