package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/engine"
)

// specBarriers records the shortest TTL the engine gives its barriers.
type specBarriers struct {
	coord.Barriers
	mu     sync.Mutex
	minTTL time.Duration
}

func (b *specBarriers) note(spec coord.BarrierSpec) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.minTTL == 0 || spec.TTL < b.minTTL {
		b.minTTL = spec.TTL
	}
}

func (b *specBarriers) Open(ctx context.Context, exec, key string, spec coord.BarrierSpec) error {
	b.note(spec)
	return b.Barriers.Open(ctx, exec, key, spec)
}

func (b *specBarriers) Arrive(ctx context.Context, exec, key string, spec coord.BarrierSpec, slot int, value []byte) (coord.Arrival, error) {
	b.note(spec)
	return b.Barriers.Arrive(ctx, exec, key, spec, slot, value)
}

// An aggregator's barrier outlives its timeout, however long: were it to
// expire first, the timeout would find nothing and the execution would hang.
func TestBarrierOutlivesItsTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 3 * time.Hour
	var bs *specBarriers
	h := newHarnessWith(t, `{"id":"longagg","nodes":[
		{"id":"start","type":"trigger","trigger":true},
		{"id":"each","type":"split","parameters":{"input_array":"{{ $trigger.n }}"}},
		{"id":"x","type":"set","parameters":{"values":{"v":1}}},
		{"id":"agg","type":"aggregator","parameters":{"timeout":10800}}],
		"edges":[{"id":"e1","src":"start","dst":"each"},{"id":"e2","src":"each","dst":"x"},{"id":"e3","src":"x","dst":"agg"}]}`,
		func(c *engine.Config) {
			bs = &specBarriers{Barriers: c.Barriers}
			c.Barriers = bs
		})
	h.start(map[string]any{"n": []any{1.0, 2.0}})
	h.drain()
	if c := h.completion(); c.Status != "completed" {
		t.Fatalf("completion %s, want completed", c.Status)
	}
	if bs.minTTL <= timeout {
		t.Fatalf("a barrier's TTL is %v, not beyond its aggregator's timeout of %v", bs.minTTL, timeout)
	}
}

// A split delivered again after its Finish (its ack lost) replays: it
// evaluates its array again and publishes the same branches, byte for byte,
// so none is lost and the aggregator still gets every item.
func TestSplitReplayPublishesTheSameBranches(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `{"id":"splitreplay","nodes":[
		{"id":"start","type":"trigger","trigger":true},
		{"id":"each","type":"split","parameters":{"input_array":"{{ $trigger.n }}"}},
		{"id":"x","type":"set","parameters":{"values":{"v":"{{ $item * 2 }}"}}},
		{"id":"agg","type":"aggregator","parameters":{"value":"{{ $x.v }}"}}],
		"edges":[{"id":"e1","src":"start","dst":"each"},{"id":"e2","src":"each","dst":"x"},{"id":"e3","src":"x","dst":"agg"}]}`)
	h.start(map[string]any{"n": []any{1.0, 2.0, 3.0}})
	split := h.queue[0].Msg
	h.step(0)
	first, _ := json.Marshal(h.queue)
	again := handleAgain(t, h, split)
	if got, _ := json.Marshal(again.Next); len(again.Next) != 3 || !bytes.Equal(got, first) {
		t.Fatalf("the replayed split published %d branches, want the same 3:\n got %s\nwant %s", len(again.Next), got, first)
	}
	h.drain()
	if items := h.completion().FinalContext["$agg"].(map[string]any)["items"]; fmt.Sprint(items) != "[2 4 6]" {
		t.Fatalf("$agg.items = %v, want [2 4 6]", items)
	}
}
