package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/rune-org/rune/coord"
	coordmem "github.com/rune-org/rune/coord/memory"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/nodes"
)

// journal records, in one order, what a sink publishes and when the
// coordinator finishes a message.
type journal struct{ lines []string }

// loggingCoord records Finish calls in a journal.
type loggingCoord struct {
	coord.Coordinator
	j *journal
}

func (c loggingCoord) Finish(ctx context.Context, exec, id string, f coord.Finish) (coord.Outcome, error) {
	o, err := c.Coordinator.Finish(ctx, exec, id, f)
	switch {
	case f.Mode.IfLast() && o.Case == coord.NotLast:
		c.j.lines = append(c.j.lines, "finish-if-last:not-last")
	case f.Mode.IfLast():
		c.j.lines = append(c.j.lines, "finish-if-last")
	default:
		c.j.lines = append(c.j.lines, "finish")
	}
	return o, err
}

func (c loggingCoord) Begin(ctx context.Context, exec, id string) (coord.Begin, error) {
	c.j.lines = append(c.j.lines, "begin")
	return c.Coordinator.Begin(ctx, exec, id)
}

// syncSink is a sink that journals its statuses, completion and syncs.
type syncSink struct {
	engine.Effects
	j *journal
}

func (s *syncSink) Status(ctx context.Context, st *message.NodeStatus) {
	s.j.lines = append(s.j.lines, st.NodeID+":"+st.Status)
	s.Effects.Status(ctx, st)
}

func (s *syncSink) Complete(c *message.Completion) {
	s.j.lines = append(s.j.lines, "complete:"+c.Status)
	s.Effects.Complete(c)
}

func (s *syncSink) Sync(context.Context) error {
	s.j.lines = append(s.j.lines, "sync")
	return nil
}

// journalFirst starts an execution of def with input and handles its first
// message with a syncSink; it returns the messages that handling published
// (to handle further with handleJournaled) and an engine whose coordinator
// journals into j. The "test" node type is registered (not pure).
func journalFirst(t *testing.T, j *journal, def string, input any) (*engine.Engine, *engine.Effects) {
	t.Helper()
	co := coordmem.New(coordmem.Options{})
	t.Cleanup(func() { co.Close() })
	reg := nodes.NewRegistry(nodes.Options{})
	reg.Register("test", testType{})
	eng, err := engine.New(engine.Config{Registry: reg, Coord: loggingCoord{co, j}, Barriers: coordmem.NewBarriers(), Blobs: coordmem.NewBlobs()})
	if err != nil {
		t.Fatal(err)
	}
	wf, err := eng.Compile([]byte(def))
	if err != nil {
		t.Fatal(err)
	}
	var start engine.Effects
	if err := eng.Start(context.Background(), wf, "exec_order", input, &start); err != nil {
		t.Fatal(err)
	}
	return eng, handleJournaled(t, eng, j, start.Next[0].Msg)
}

// handleJournaled handles m with a syncSink, the journal emptied first.
func handleJournaled(t *testing.T, eng *engine.Engine, j *journal, m *message.NodeExecution) *engine.Effects {
	t.Helper()
	j.lines = nil
	sink := &syncSink{j: j}
	if err := eng.Handle(context.Background(), engine.Delivery{}, m, sink); err != nil {
		t.Fatal(err)
	}
	return &sink.Effects
}

// A message that ends its branch publishes its statuses, and has them safe,
// before its Finish: once finished, another branch may complete the
// execution, and that completion must not reach followers ahead of them
// (the conformance suite once counted 5 of 6 statuses of a node in nested
// splits, the sixth published after the completion). It first asks for a
// Finish that records it only as the last live message, which it is not.
func TestBranchEndPublishesStatusesBeforeFinish(t *testing.T) {
	// set runs optimistically (before Begin), test (not pure) after Begin
	// and its running status.
	for _, c := range []struct{ def, want string }{
		{twoEndsDef, "finish-if-last:not-last a:running a:success sync finish"},
		{strings.ReplaceAll(twoEndsDef, `"type":"set","parameters":{"values":{"v":1}}`, `"type":"test"`), "begin a:running finish-if-last:not-last a:success sync finish"},
	} {
		j := &journal{}
		journalFirst(t, j, c.def, nil)
		if got := strings.Join(j.lines, " "); got != c.want {
			t.Fatalf("the branch end did %q, want %q", got, c.want)
		}
	}
}

// The execution's last message needs no statuses ahead: no other message
// can complete the execution. One Finish (no Begin, no sync), then its
// statuses and the completion, in that order, published together.
func TestLastMessagePublishesStatusesWithCompletion(t *testing.T) {
	const chain = `{"id":"chain","nodes":[{"id":"start","type":"trigger","trigger":true},{"id":"a","type":"set","parameters":{"values":{"v":1}}}],
		"edges":[{"id":"e1","src":"start","dst":"a"}]}`
	done := " a:success complete:" + message.CompletionCompleted
	for _, c := range []struct{ def, want string }{
		{chain, "finish-if-last a:running" + done},
		{strings.ReplaceAll(chain, `"type":"set","parameters":{"values":{"v":1}}`, `"type":"test"`), "begin a:running finish-if-last" + done},
	} {
		j := &journal{}
		journalFirst(t, j, c.def, nil)
		if got := strings.Join(j.lines, " "); got != c.want {
			t.Fatalf("the last message did %q, want %q", got, c.want)
		}
	}
}

// A branch of a split is seldom the execution's last: a branch end that had
// its Begin (a node that is not pure) does not ask IfLast, which would cost
// it a round trip, and publishes its statuses first as any branch end.
func TestSplitBranchEndAsksNoIfLast(t *testing.T) {
	j := &journal{}
	eng, split := journalFirst(t, j, `{"id":"each","nodes":[{"id":"start","type":"trigger","trigger":true},
		{"id":"each","type":"split","parameters":{"input_array":"{{ $trigger.items }}"}},{"id":"a","type":"test"}],
		"edges":[{"id":"e1","src":"start","dst":"each"},{"id":"e2","src":"each","dst":"a"}]}`, map[string]any{"items": []any{1.0, 2.0}})
	if len(split.Next) != 2 || len(split.Next[0].Msg.LineageStack) != 1 {
		t.Fatalf("the split published %d messages (%+v), want 2 branches", len(split.Next), split.Next)
	}
	handleJournaled(t, eng, j, split.Next[0].Msg)
	if got, want := strings.Join(j.lines, " "), "begin a:running a:success sync finish"; got != want {
		t.Fatalf("the split's branch end did %q, want %q", got, want)
	}
}
