package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	coordmem "github.com/rune-org/rune/coord/memory"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/nodes"
)

// branchSize runs a split over n items with references on and returns the
// size of one branch message, and the completion.
func branchSize(t *testing.T, n int) (int, *message.Completion) {
	co := coordmem.New(coordmem.Options{})
	defer co.Close()
	eng, err := engine.New(engine.Config{Registry: nodes.NewRegistry(nodes.Options{}), Coord: co,
		Barriers: coordmem.NewBarriers(), Blobs: coordmem.NewBlobs(), RefThreshold: 256})
	if err != nil {
		t.Fatal(err)
	}
	wf, err := eng.Compile([]byte(`{"id":"big","nodes":[
		{"id":"start","type":"trigger","trigger":true},
		{"id":"each","type":"split","parameters":{"input_array":"{{ $trigger.items }}"}},
		{"id":"work","type":"set","parameters":{"values":{"v":"{{ $item.id * 2 }}","of":"{{ len($trigger.items) }}"}}},
		{"id":"agg","type":"aggregator","parameters":{"value":"{{ $work.v }}"}}],
		"edges":[{"id":"e1","src":"start","dst":"each"},{"id":"e2","src":"each","dst":"work"},{"id":"e3","src":"work","dst":"agg"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	items := make([]any, n)
	for i := range items {
		items[i] = map[string]any{"id": float64(i), "name": strings.Repeat("x", 40)}
	}
	h := &harness{t: t, eng: eng, wf: wf}
	h.start(map[string]any{"items": items})
	h.step(0) // the split
	raw, err := json.Marshal(h.queue[0].Msg)
	if err != nil {
		t.Fatal(err)
	}
	h.drain()
	return len(raw), h.completion()
}

func TestSplitBranchMessagesDoNotGrowWithItems(t *testing.T) {
	small, _ := branchSize(t, 10)
	large, c := branchSize(t, 2000)
	if large > small+64 {
		t.Fatalf("a branch message is %d bytes with 2,000 items and %d with 10: it grows with the array", large, small)
	}
	if c.Status != message.CompletionCompleted {
		t.Fatalf("completion %s %+v", c.Status, c.FailureReason)
	}
	agg := c.FinalContext["$agg"].(map[string]any)
	if len(agg["items"].([]any)) != 2000 || agg["succeeded"] != 2000 {
		t.Fatalf("aggregate: %d items, %v succeeded", len(agg["items"].([]any)), agg["succeeded"])
	}
	// The completion shows the values, not references.
	if _, ok := c.FinalContext["$trigger"].(map[string]any)["items"]; !ok {
		t.Fatalf("final $trigger is %v, want the payload resolved", c.FinalContext["$trigger"])
	}
}

// countingBlobs counts reads.
type countingBlobs struct {
	*coordmem.Blobs
	gets int
}

func (c *countingBlobs) Get(ctx context.Context, exec, ref string) ([]byte, error) {
	c.gets++
	return c.Blobs.Get(ctx, exec, ref)
}

func TestBranchesDoNotLoadValuesTheyDoNotRead(t *testing.T) {
	co := coordmem.New(coordmem.Options{})
	defer co.Close()
	blobs := &countingBlobs{Blobs: coordmem.NewBlobs()}
	eng, err := engine.New(engine.Config{Registry: nodes.NewRegistry(nodes.Options{}), Coord: co,
		Barriers: coordmem.NewBarriers(), Blobs: blobs, RefThreshold: 256, BlobCacheBytes: 1}) // no cache: count every load
	if err != nil {
		t.Fatal(err)
	}
	wf, err := eng.Compile([]byte(`{"id":"lazy","nodes":[
		{"id":"start","type":"trigger","trigger":true},
		{"id":"each","type":"split","parameters":{"input_array":"{{ $trigger.items }}"}},
		{"id":"work","type":"set","parameters":{"values":{"v":"{{ $item.id }}"}}},
		{"id":"agg","type":"aggregator"}],
		"edges":[{"id":"e1","src":"start","dst":"each"},{"id":"e2","src":"each","dst":"work"},{"id":"e3","src":"work","dst":"agg"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	items := make([]any, 100)
	for i := range items {
		items[i] = map[string]any{"id": float64(i), "pad": strings.Repeat("x", 20)}
	}
	h := &harness{t: t, eng: eng, wf: wf}
	h.start(map[string]any{"items": items})
	h.drain()
	if c := h.completion(); c.Status != message.CompletionCompleted {
		t.Fatalf("completion %s", c.Status)
	}
	// Only the completion reads the array back (its final context); the
	// 100 branches never load it.
	if blobs.gets > 1 {
		t.Fatalf("%d blob reads for 100 branches that never read the array", blobs.gets)
	}
}
