package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/message"
)

// A fan-shaped workflow: two branches end, the second to finish completes.
const twoEndsDef = `{"id":"ends","nodes":[
	{"id":"start","type":"trigger","trigger":true},
	{"id":"a","type":"set","parameters":{"values":{"v":1}}},
	{"id":"b","type":"set","parameters":{"values":{"w":2}}}],
	"edges":[{"id":"e1","src":"start","dst":"a"},{"id":"e2","src":"start","dst":"b"}]}`

// handleAgain redelivers m and returns what the engine published for it.
func handleAgain(t *testing.T, h *harness, m *message.NodeExecution) *engine.Effects {
	t.Helper()
	var f engine.Effects
	if err := h.eng.Handle(context.Background(), engine.Delivery{}, m, &f); err != nil {
		t.Fatalf("redeliver %s: %v", m.CurrentNode, err)
	}
	return &f
}

// Until the runtime reports the completion published, a redelivered
// completer publishes it again, byte for byte; after, no redelivery
// publishes a completion, and the completer publishes nothing at all (its
// statuses went out with the completion).
func TestCompletionIsPublishedOnceRecorded(t *testing.T) {
	h := newHarness(t, twoEndsDef)
	h.start(nil)
	if len(h.queue) != 2 {
		t.Fatalf("start published %d messages, want 2", len(h.queue))
	}
	first, completer := h.queue[0].Msg, h.queue[1].Msg
	h.drain()
	c := h.completion()
	want, _ := json.Marshal(c)

	again := handleAgain(t, h, completer)
	if again.Completion == nil {
		t.Fatal("a redelivered completer before the record published no completion; a lost confirm would lose it")
	}
	if got, _ := json.Marshal(again.Completion); !bytes.Equal(got, want) {
		t.Fatalf("the repeated completion differs:\n got %s\nwant %s", got, want)
	}

	h.eng.Completed(context.Background(), c)
	for _, m := range []*message.NodeExecution{completer, first} {
		f := handleAgain(t, h, m)
		if f.Completion != nil || len(f.Next) != 0 || len(f.Timeouts) != 0 {
			t.Fatalf("redelivered %s after the record: completion %v, %d successors, %d timeouts; want none",
				m.CurrentNode, f.Completion != nil, len(f.Next), len(f.Timeouts))
		}
		sts := statusNames(f.Statuses)
		wantSts := ""
		if m == first {
			wantSts = "a:success" // may never have been published: its crash could precede it
		}
		if got := strings.Join(sts, " "); got != wantSts {
			t.Fatalf("redelivered %s after the record: statuses %q, want %q", m.CurrentNode, got, wantSts)
		}
	}
}

// A redelivered completer whose first completion was never recorded asks
// Config.CompletionRouted: when the broker took it (its confirm was lost
// with the connection), it publishes no completion and records it, so that
// later redeliveries do not ask again; when not, it publishes it again.
func TestCompletionRoutedIsNotPublishedAgain(t *testing.T) {
	t.Parallel()
	for _, routed := range []bool{true, false} {
		var asked []string
		h := newHarnessWith(t, twoEndsDef, func(c *engine.Config) {
			c.CompletionRouted = func(_ context.Context, exec string) (bool, error) {
				asked = append(asked, exec)
				return routed, nil
			}
		})
		h.start(nil)
		completer := h.queue[1].Msg
		h.drain()
		if len(asked) != 0 {
			t.Fatalf("asked the broker %v on the first delivery", asked)
		}
		again := handleAgain(t, h, completer)
		if got := strings.Join(asked, " "); got != "exec_test" {
			t.Fatalf("routed=%v: asked the broker about %q, want exec_test once", routed, got)
		}
		if routed != (again.Completion == nil) {
			t.Fatalf("routed=%v: the redelivered completer published a completion: %v", routed, again.Completion != nil)
		}
		if !routed {
			continue
		}
		if f := handleAgain(t, h, completer); f.Completion != nil || len(asked) != 1 {
			t.Fatalf("a second redelivery after the broker said it was out: completion %v, asked %d times; want none, once", f.Completion != nil, len(asked))
		}
	}
}

// recordOnFinish is a coordinator that, once armed, calls record right
// after the first Finish that finds the completer finished before and its
// completion not recorded as published: the first delivery's worker
// recording the completion while the redelivery waits, at a known point
// rather than after a sleep.
type recordOnFinish struct {
	coord.Coordinator
	armed  atomic.Bool
	record func()
}

func (c *recordOnFinish) Finish(ctx context.Context, exec, id string, f coord.Finish) (coord.Outcome, error) {
	out, err := c.Coordinator.Finish(ctx, exec, id, f)
	if err == nil && out.Case == coord.Duplicate && out.Last() && c.armed.CompareAndSwap(true, false) {
		c.record()
	}
	return out, err
}

// A redelivered completer waits a moment before asking the broker; when the
// first delivery's worker records the completion as published meanwhile
// (it was slow, not dead), it publishes none and does not ask.
func TestCompletionRecordedWhileRedeliveryWaits(t *testing.T) {
	t.Parallel()
	var asked []string
	var co *recordOnFinish
	h := newHarnessWith(t, twoEndsDef, func(c *engine.Config) {
		co = &recordOnFinish{Coordinator: c.Coord}
		c.Coord = co
		c.CompletionRouted = func(_ context.Context, exec string) (bool, error) {
			asked = append(asked, exec)
			return false, nil
		}
	})
	h.start(nil)
	completer := h.queue[1].Msg
	h.drain()
	c := h.completion()
	// The redelivery's Finish finds the completer done and unrecorded; the
	// record comes right after it, while the redelivery waits.
	co.record = func() { h.eng.Completed(context.Background(), c) }
	co.armed.Store(true)
	if f := handleAgain(t, h, completer); f.Completion != nil {
		t.Fatal("the redelivered completer published the completion recorded while it waited")
	}
	if co.armed.Load() {
		t.Fatal("the redelivery made no Finish: the record never came")
	}
	if len(asked) != 0 {
		t.Fatalf("asked the broker about %v although the record came first", asked)
	}
}
