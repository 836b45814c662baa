package coordtest

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rune-org/rune/coord"
)

// runBench runs loop from one goroutine when parallelism is 0, else with
// b.RunParallel at that parallelism (goroutines per GOMAXPROCS). loop calls
// next before each iteration.
func runBench(b *testing.B, parallelism int, loop func(next func() bool)) {
	b.ReportAllocs()
	if parallelism == 0 {
		n := 0
		loop(func() bool { n++; return n <= b.N })
		return
	}
	b.SetParallelism(parallelism)
	b.RunParallel(func(pb *testing.PB) { loop(pb.Next) })
}

// BenchBeginFinish measures a Begin and a Finish, as the engine makes for
// one message, on executions that are chains of 100 messages (each spawning
// the next; the last ends the branch with a context).
func BenchBeginFinish(b *testing.B, c coord.Coordinator, parallelism int) {
	const chain = 100
	ids := make([]string, chain)
	for i := range ids {
		ids[i] = "m" + strconv.Itoa(i)
	}
	record := []byte(`{"successors":["x"]}`)
	end := map[string]any{"$n": 1.0}
	ctx := context.Background()
	var execs atomic.Int64
	runBench(b, parallelism, func(next func() bool) {
		var exec string
		i := chain
		for next() {
			if i == chain {
				exec = "exec-" + strconv.FormatInt(execs.Add(1), 10)
				if err := c.Start(ctx, exec, 1); err != nil {
					b.Fatal(err)
				}
				i = 0
			}
			if st, err := c.Begin(ctx, exec, ids[i]); err != nil || st.State != coord.Run {
				b.Fatalf("Begin: %v %v", st.State, err)
			}
			f := coord.Finish{Spawned: 1, Record: coord.Bytes(record)}
			if i == chain-1 {
				f = coord.Finish{End: end}
			}
			if _, err := c.Finish(ctx, exec, ids[i], f); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

// BenchArrive measures one Arrive of 100 bytes on barriers of 1,000 slots,
// so one Arrive in 1,000 completes one.
func BenchArrive(b *testing.B, bs coord.Barriers, parallelism int) {
	const total = 1000
	ctx := context.Background()
	spec := coord.BarrierSpec{Total: total, Need: total, TTL: time.Minute}
	value := []byte(strings.Repeat("v", 100))
	var barriers atomic.Int64
	runBench(b, parallelism, func(next func() bool) {
		var key string
		slot := total
		for next() {
			if slot == total {
				key = "agg-" + strconv.FormatInt(barriers.Add(1), 10)
				slot = 0
			}
			if _, err := bs.Arrive(ctx, "exec", key, spec, slot, value); err != nil {
				b.Fatal(err)
			}
			slot++
		}
	})
}
