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
	c.j.lines = append(c.j.lines, "finish")
	return c.Coordinator.Finish(ctx, exec, id, f)
}

// syncSink is a sink that can publish its statuses ahead (a StatusSyncer).
type syncSink struct {
	engine.Effects
	j *journal
}

func (s *syncSink) Status(st *message.NodeStatus) {
	s.j.lines = append(s.j.lines, st.NodeID+":"+st.Status)
	s.Effects.Status(st)
}

func (s *syncSink) SyncStatuses(context.Context) error {
	s.j.lines = append(s.j.lines, "sync")
	return nil
}

// A message that ends its branch publishes its statuses, and has them safe,
// before its Finish: once finished, another branch may complete the
// execution, and that completion must not reach followers ahead of them
// (the conformance suite once counted 5 of 6 statuses of a node in nested
// splits, the sixth published after the completion).
func TestBranchEndPublishesStatusesBeforeFinish(t *testing.T) {
	// set runs optimistically (before Begin), test (not pure) after Begin.
	for _, def := range []string{twoEndsDef, strings.ReplaceAll(twoEndsDef, `"type":"set","parameters":{"values":{"v":1}}`, `"type":"test"`)} {
		j := &journal{}
		co := coordmem.New(coordmem.Options{})
		defer co.Close()
		reg := nodes.NewRegistry(nodes.Options{})
		reg.Register("test", testType{})
		eng, err := engine.New(engine.Config{Registry: reg, Coord: loggingCoord{co, j}})
		if err != nil {
			t.Fatal(err)
		}
		wf, err := eng.Compile([]byte(def))
		if err != nil {
			t.Fatal(err)
		}
		var start engine.Effects
		if err := eng.Start(context.Background(), wf, "exec_order", nil, &start); err != nil {
			t.Fatal(err)
		}
		first := start.Next[0].Msg
		j.lines = nil
		sink := &syncSink{j: j}
		if err := eng.Handle(context.Background(), first, sink); err != nil {
			t.Fatal(err)
		}
		got := strings.Join(j.lines, " ")
		want := first.CurrentNode + ":running " + first.CurrentNode + ":success sync finish"
		if got != want {
			t.Fatalf("%s: the branch end did %q, want %q", first.CurrentNode, got, want)
		}
	}
}
