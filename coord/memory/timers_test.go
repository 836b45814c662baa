package memory_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/coord/coordtest"
	"github.com/rune-org/rune/coord/memory"
)

func TestTimersConformance(t *testing.T) {
	coordtest.RunTimers(t, func(t *testing.T) coord.Timers { return memory.NewTimers() })
}

func BenchmarkTimersScheduleClaim(b *testing.B) {
	coordtest.BenchTimersScheduleClaim(b, func(b *testing.B) coord.Timers { return memory.NewTimers() })
}

// BenchmarkTimersMillion schedules 1,000,000 timers with 300-byte payloads,
// then claims and finishes them all in batches of 1,000, and reports the heap
// each pending timer costs.
func BenchmarkTimersMillion(b *testing.B) {
	const n = 1_000_000
	payload := make([]byte, 300)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "timer-" + strconv.Itoa(i)
	}
	ctx := context.Background()
	base := time.UnixMilli(1_760_000_000_000)
	for range b.N {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		ts := memory.NewTimers()
		for i, id := range ids {
			// Dues spread over an hour, scheduled out of order.
			due := base.Add(time.Duration(i*7919%3_600_000) * time.Millisecond)
			if err := ts.Schedule(ctx, id, due, payload); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/timer")
		claimed := 0
		for {
			got, err := ts.Claim(ctx, base.Add(time.Hour), 1000, time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			if len(got) == 0 {
				break
			}
			for _, tm := range got {
				if err := ts.Done(ctx, tm.ID); err != nil {
					b.Fatal(err)
				}
			}
			claimed += len(got)
		}
		if claimed != n {
			b.Fatalf("claimed %d timers, want %d", claimed, n)
		}
		runtime.KeepAlive(ts)
	}
}
