package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

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
	if err := h.eng.Handle(context.Background(), m, &f); err != nil {
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

// A redelivered completer waits a moment before asking the broker; when the
// first delivery's worker records the completion as published meanwhile
// (it was slow, not dead), it publishes none and does not ask.
func TestCompletionRecordedWhileRedeliveryWaits(t *testing.T) {
	t.Parallel()
	asked := make(chan string, 1)
	h := newHarnessWith(t, twoEndsDef, func(c *engine.Config) {
		c.CompletionRouted = func(_ context.Context, exec string) (bool, error) {
			asked <- exec
			return false, nil
		}
	})
	h.start(nil)
	completer := h.queue[1].Msg
	h.drain()
	c := h.completion()
	again := make(chan *engine.Effects, 1)
	go func() {
		var f engine.Effects
		if err := h.eng.Handle(context.Background(), completer, &f); err != nil {
			t.Errorf("redeliver: %v", err)
		}
		again <- &f
	}()
	// The redelivery's Finish comes at once; its wait lasts a second.
	time.Sleep(200 * time.Millisecond)
	h.eng.Completed(context.Background(), c)
	if f := <-again; f.Completion != nil {
		t.Fatal("the redelivered completer published the completion recorded while it waited")
	}
	select {
	case exec := <-asked:
		t.Fatalf("asked the broker about %s although the record came first", exec)
	default:
	}
}
