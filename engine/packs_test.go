package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	coordmem "github.com/rune-org/rune/coord/memory"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/nodes"
)

// chainDef is a chain of n set nodes, each output ~pad bytes; the last one
// reads the first one's output, as a long chain's late node may.
func chainDef(n, pad int) string {
	var nodes, edges []string
	nodes = append(nodes, `{"id":"start","type":"trigger","trigger":true}`)
	prev := "start"
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("n%d", i)
		v := fmt.Sprintf(`{"i":%d,"pad":"%s"}`, i, strings.Repeat("x", pad))
		if i == n {
			v = `{"first":"{{ $n1.i }}","trigger":"{{ $trigger.k }}"}`
		}
		nodes = append(nodes, fmt.Sprintf(`{"id":%q,"type":"set","parameters":{"values":%s}}`, id, v))
		edges = append(edges, fmt.Sprintf(`{"id":"e%d","src":%q,"dst":%q}`, i, prev, id))
		prev = id
	}
	return `{"id":"long","nodes":[` + strings.Join(nodes, ",") + `],"edges":[` + strings.Join(edges, ",") + `]}`
}

// runWire runs one execution of def, every message through its wire form
// (encoded, then decoded as a worker does) and each delivered twice (a
// redelivery must publish the same successor, byte for byte). It returns the
// largest context a node message carried and the completion.
func runWire(t *testing.T, def string, cfg engine.Config) (int, *message.Completion) {
	t.Helper()
	co := coordmem.New(coordmem.Options{})
	t.Cleanup(func() { co.Close() })
	cfg.Registry, cfg.Coord, cfg.Barriers = nodes.NewRegistry(nodes.Options{}), co, coordmem.NewBarriers()
	eng, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	wf, err := eng.Compile([]byte(def))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var f engine.Effects
	if err := eng.Start(ctx, wf, "exec_packs", map[string]any{"k": "v"}, &f); err != nil {
		t.Fatal(err)
	}
	queue, largest := f.Next, 0
	var done *message.Completion
	for steps := 0; len(queue) > 0; steps++ {
		if steps > 1000 {
			t.Fatal("too many messages")
		}
		raw, err := json.Marshal(queue[0].Msg)
		if err != nil {
			t.Fatal(err)
		}
		ctxRaw, _ := json.Marshal(queue[0].Msg.AccumulatedContext)
		queue = queue[1:]
		largest = max(largest, len(ctxRaw))
		var first []byte
		for delivery := range 2 {
			m, err := message.DecodeExecution(raw)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			var g engine.Effects
			if err := eng.Handle(ctx, engine.Delivery{Redelivered: delivery > 0}, m, &g); err != nil {
				t.Fatalf("handle %s: %v", m.CurrentNode, err)
			}
			next, _ := json.Marshal(g.Next)
			if delivery == 0 {
				first = next
				queue = append(queue, g.Next...)
				if g.Completion != nil {
					done = g.Completion
				}
			} else if string(next) != string(first) {
				t.Fatalf("the redelivery of %s published\n%s\nthe first delivery\n%s", m.CurrentNode, next, first)
			}
		}
	}
	if done == nil {
		t.Fatal("no completion")
	}
	return largest, done
}

func TestLongChainContextTravelsInPacks(t *testing.T) {
	const n, pad = 60, 200
	def := chainDef(n, pad)
	for _, tc := range []struct {
		name  string
		cache int
	}{{"cached", 0}, {"every pack read from the store", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			whole, _ := runWire(t, def, engine.Config{NoFuse: true, Blobs: coordmem.NewBlobs(), PackThreshold: -1})
			largest, c := runWire(t, def, engine.Config{NoFuse: true, Blobs: coordmem.NewBlobs(), PackThreshold: 2048, BlobCacheBytes: tc.cache})
			if whole < n*pad {
				t.Fatalf("without packs the last message is %d bytes, want the whole context (≥ %d)", whole, n*pad)
			}
			if largest > 2048+2048 {
				t.Fatalf("with packs of 2 KiB the largest context is %d bytes (%d without): the context still travels whole", largest, whole)
			}
			if c.Status != message.CompletionCompleted {
				t.Fatalf("completion %s %+v", c.Status, c.FailureReason)
			}
			// The completion and the last node see the whole context.
			for i := 1; i < n; i++ {
				out, ok := c.FinalContext[fmt.Sprintf("$n%d", i)].(map[string]any)
				if !ok || out["i"] != float64(i) && out["i"] != i || len(out["pad"].(string)) != pad {
					t.Fatalf("final context $n%d = %v", i, c.FinalContext[fmt.Sprintf("$n%d", i)])
				}
			}
			last := c.FinalContext[fmt.Sprintf("$n%d", n)].(map[string]any)
			if fmt.Sprint(last["first"]) != "1" || last["trigger"] != "v" {
				t.Fatalf("the last node read $n1.i = %v and $trigger.k = %v, want 1 and v", last["first"], last["trigger"])
			}
			if _, ok := c.FinalContext["$rune_packs"]; ok {
				t.Fatal("the final context shows the packs' references")
			}
		})
	}
}

func TestPackedChainFused(t *testing.T) {
	const n, pad = 60, 200
	largest, c := runWire(t, chainDef(n, pad), engine.Config{Blobs: coordmem.NewBlobs(), PackThreshold: 2048})
	if c.Status != message.CompletionCompleted || len(c.FinalContext) != n+1 {
		t.Fatalf("completion %s with %d context entries, want completed with %d", c.Status, len(c.FinalContext), n+1)
	}
	if largest > 4096 {
		t.Fatalf("largest context %d bytes", largest)
	}
}

// A message whose packs were released (its execution completed) is dropped,
// as any late message of an ended execution.
func TestPackedMessageAfterCompletionIsDropped(t *testing.T) {
	co := coordmem.New(coordmem.Options{})
	defer co.Close()
	blobs := coordmem.NewBlobs()
	eng, err := engine.New(engine.Config{Registry: nodes.NewRegistry(nodes.Options{}), Coord: co, Barriers: coordmem.NewBarriers(),
		Blobs: blobs, PackThreshold: 1024, NoFuse: true})
	if err != nil {
		t.Fatal(err)
	}
	wf, err := eng.Compile([]byte(chainDef(20, 200)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var f engine.Effects
	if err := eng.Start(ctx, wf, "exec_gone", map[string]any{"k": "v"}, &f); err != nil {
		t.Fatal(err)
	}
	queue := f.Next
	var late *message.NodeExecution
	var done *message.Completion
	for len(queue) > 0 {
		m := queue[0].Msg
		queue = queue[1:]
		if _, packed := m.AccumulatedContext["$rune_packs"]; packed && late == nil {
			late = m
		}
		var g engine.Effects
		if err := eng.Handle(ctx, engine.Delivery{}, m, &g); err != nil {
			t.Fatal(err)
		}
		queue = append(queue, g.Next...)
		if g.Completion != nil {
			done = g.Completion
		}
	}
	if late == nil || done == nil {
		t.Fatalf("no packed message (%v) or no completion (%v)", late != nil, done != nil)
	}
	eng.Completed(ctx, done) // releases the execution's blobs
	var g engine.Effects
	if err := eng.Handle(ctx, engine.Delivery{Redelivered: true}, late, &g); err != nil {
		t.Fatalf("a late packed message of a completed execution: %v, want it dropped", err)
	}
	if len(g.Next) != 0 || g.Completion != nil {
		t.Fatalf("the late message published %d messages and completion %v", len(g.Next), g.Completion)
	}
}
