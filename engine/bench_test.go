package engine_test

import (
	"context"
	"testing"

	coordmem "github.com/rune-org/rune/coord/memory"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/internal/bench"
	"github.com/rune-org/rune/nodes"
)

// BenchmarkHandleSet measures one engine step: a set node with an
// expression, from message in to effects out, with in-process coordination.
func BenchmarkHandleSet(b *testing.B) {
	co := coordmem.New(coordmem.Options{})
	defer co.Close()
	eng, err := engine.New(engine.Config{Registry: nodes.NewRegistry(nodes.Options{}), Coord: co})
	if err != nil {
		b.Fatal(err)
	}
	wf, err := eng.Compile([]byte(`{"id":"bench","nodes":[
		{"id":"start","type":"trigger","trigger":true},
		{"id":"a","type":"set","parameters":{"values":{"value":"{{ $trigger.seed + 1 }}","label":"step a"}}}],
		"edges":[{"id":"e1","src":"start","dst":"a"}]}`))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if runFirst(b, eng, wf, i).Completion == nil {
			b.Fatal("no completion")
		}
	}
}

// runFirst starts execution i of wf and handles its first message.
func runFirst(b *testing.B, eng *engine.Engine, wf *engine.Workflow, i int) *engine.Effects {
	ctx := context.Background()
	var start engine.Effects
	if err := eng.Start(ctx, wf, "exec_bench_"+itoa(i), map[string]any{"seed": 1.0}, &start); err != nil {
		b.Fatal(err)
	}
	var f engine.Effects
	if err := eng.Handle(ctx, engine.Delivery{}, start.Next[0].Msg, &f); err != nil {
		b.Fatal(err)
	}
	return &f
}

func itoa(i int) string {
	var buf [20]byte
	n := len(buf)
	for {
		n--
		buf[n] = byte('0' + i%10)
		i /= 10
		if i == 0 {
			return string(buf[n:])
		}
	}
}

// BenchmarkHandleFusedChain measures one execution of the bench's chain of
// ten set nodes, fused into one hop, with a blob store (as the distributed
// runtime has: every new output is checked against the reference
// threshold), from the start's message to the completion.
func BenchmarkHandleFusedChain(b *testing.B) {
	co := coordmem.New(coordmem.Options{})
	defer co.Close()
	eng, err := engine.New(engine.Config{Registry: nodes.NewRegistry(nodes.Options{}), Coord: co,
		Barriers: coordmem.NewBarriers(), Blobs: coordmem.NewBlobs(), Definitions: coordmem.NewBlobs()})
	if err != nil {
		b.Fatal(err)
	}
	wf, err := eng.Compile(bench.LinearWorkflow(10))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	completed := 0
	for i := 0; b.Loop(); i++ {
		if runFirst(b, eng, wf, i).Completion != nil {
			completed++
		}
	}
	// A hop past its fuse budget (5 ms of wall time: a GC pause, the first
	// execution's compiling) publishes the rest of the chain instead.
	b.ReportMetric(float64(completed)/float64(b.N), "fused-whole/op")
}
