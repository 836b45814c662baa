package engine_test

import (
	"context"
	"encoding/json"
	"reflect"
	"sync/atomic"
	"testing"

	"github.com/rune-org/rune/coord"
	coordmem "github.com/rune-org/rune/coord/memory"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/internal/nodetest"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/nodes"
)

// countingCoord counts Begin calls.
type countingCoord struct {
	coord.Coordinator
	begins atomic.Int64
}

func (c *countingCoord) Begin(ctx context.Context, exec, id string) (coord.Begin, error) {
	c.begins.Add(1)
	return c.Coordinator.Begin(ctx, exec, id)
}

// firstSink records effects; marks are what it was told of each successor
// (engine.Publish.First).
type firstSink struct {
	engine.Effects
	marks []bool
}

func (s *firstSink) Execute(m *message.NodeExecution, how engine.Publish) {
	s.Effects.Execute(m, how)
	s.marks = append(s.marks, how.First)
}

const eagerChain = `{"id":"eager","nodes":[
	{"id":"start","type":"trigger","trigger":true},
	{"id":"a","type":"eager"},
	{"id":"b","type":"eager"}],
	"edges":[{"id":"e1","src":"start","dst":"a"},{"id":"e2","src":"a","dst":"b"}]}`

type firstHarness struct {
	t    *testing.T
	eng  *engine.Engine
	co   *countingCoord
	runs *nodetest.Eager
	wf   *engine.Workflow
}

func newFirstHarness(t *testing.T) *firstHarness {
	t.Helper()
	h := &firstHarness{t: t, runs: &nodetest.Eager{}}
	reg := nodes.NewRegistry(nodes.Options{})
	reg.Register("eager", h.runs)
	mem := coordmem.New(coordmem.Options{})
	t.Cleanup(func() { mem.Close() })
	h.co = &countingCoord{Coordinator: mem}
	var err error
	if h.eng, err = engine.New(engine.Config{Registry: reg, Coord: h.co, NoFuse: true}); err != nil {
		t.Fatal(err)
	}
	if h.wf, err = h.eng.Compile([]byte(eagerChain)); err != nil {
		t.Fatal(err)
	}
	return h
}

// handle handles m as a delivery that is (first) or is not a first copy.
func (h *firstHarness) handle(m *message.NodeExecution, first bool) *firstSink {
	h.t.Helper()
	s := &firstSink{}
	if err := h.eng.Handle(context.Background(), engine.Delivery{First: first}, m, s); err != nil {
		h.t.Fatalf("handle %s: %v", m.CurrentNode, err)
	}
	return s
}

func (h *firstHarness) start(exec string) *message.NodeExecution {
	h.t.Helper()
	s := &firstSink{}
	if err := h.eng.Start(context.Background(), h.wf, exec, nil, s); err != nil {
		h.t.Fatal(err)
	}
	if len(s.marks) != 1 || s.marks[0] {
		h.t.Fatalf("Start published %v first copies, want one message, not marked (a trigger may be published again)", s.marks)
	}
	return s.Next[0].Msg
}

// TestFirstCopyRunsWithoutBegin: the successors of a message's first
// Finish are marked first copies; an eager node's first copy on its first
// delivery runs without Begin (one coordination round trip), reporting the
// same statuses; a replay's successors are not marked.
func TestFirstCopyRunsWithoutBegin(t *testing.T) {
	h := newFirstHarness(t)
	m := h.start("exec_first")
	a := h.handle(m, false)
	if h.co.begins.Load() != 1 {
		t.Fatalf("a (not a first copy) made %d Begin calls, want 1", h.co.begins.Load())
	}
	if len(a.marks) != 1 || !a.marks[0] {
		t.Fatalf("a's first Finish published its successor marked %v, want first", a.marks)
	}
	again := h.handle(m, false) // a redelivery of a: replayed
	if len(again.marks) != 1 || again.marks[0] {
		t.Fatalf("a's replay published its successor marked %v, want not first", again.marks)
	}
	if h.runs.Total() != 1 {
		t.Fatalf("a ran %d times, want once (its redelivery replays)", h.runs.Total())
	}
	b := h.handle(a.Next[0].Msg, true)
	if got := h.co.begins.Load(); got != 2 {
		t.Fatalf("after b's first copy: %d Begin calls, want 2 (a's two deliveries; b none)", got)
	}
	if got, want := statusNames(b.Statuses), []string{"b:running", "b:success"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("b reported %v, want %v", got, want)
	}
	if b.Completion == nil || b.Completion.Status != message.CompletionCompleted {
		t.Fatalf("b's completion %+v, want completed", b.Completion)
	}
	// The replayed copy of b's message (a's replay published it again),
	// delivered after the first: Begin, Replay, no second run.
	dup := h.handle(again.Next[0].Msg, false)
	if h.runs.Total() != 2 {
		t.Fatalf("nodes ran %d times, want 2 (a and b once each)", h.runs.Total())
	}
	if got, want := statusNames(dup.Statuses), []string{"b:success"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("b's duplicate reported %v, want the replayed %v", got, want)
	}
	first, _ := json.Marshal(b.Completion)
	second, _ := json.Marshal(dup.Completion)
	if string(first) != string(second) {
		t.Fatalf("duplicate's completion differs:\n%s\n%s", first, second)
	}
}

// TestFirstCopyAfterReplayedCopyFinished is the race the first-copy rule
// leaves: the replayed copy of b's message ran and finished before the
// first copy's (slow) first delivery. The first copy runs the node again,
// but its Finish says Replay: its effects are the first run's, and the
// accounting counts b once (one completion, identical).
func TestFirstCopyAfterReplayedCopyFinished(t *testing.T) {
	h := newFirstHarness(t)
	a := h.handle(h.start("exec_race"), false)
	b := a.Next[0].Msg
	replayed := h.handle(b, false)
	late := h.handle(b, true)
	if h.runs.Total() != 3 {
		t.Fatalf("nodes ran %d times, want 3 (b twice: the race)", h.runs.Total())
	}
	if got, want := statusNames(late.Statuses), []string{"b:running", "b:success"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("late first copy reported %v, want %v", got, want)
	}
	first, _ := json.Marshal(replayed.Completion)
	second, _ := json.Marshal(late.Completion)
	if replayed.Completion == nil || string(first) != string(second) {
		t.Fatalf("completions differ:\n%s\n%s", first, second)
	}
}

// TestFirstCopyOfHaltedExecution: a halt that lands while a first copy is
// queued is seen at its Finish: the node ran, its result is dropped, it
// reports skipped, and the completion says halted.
func TestFirstCopyOfHaltedExecution(t *testing.T) {
	h := newFirstHarness(t)
	a := h.handle(h.start("exec_halt"), false)
	if err := h.eng.Halt(context.Background(), "exec_halt", message.Failure{NodeID: "outside", Error: message.Error{Code: "CANCELLED", Message: "stop"}}); err != nil {
		t.Fatal(err)
	}
	b := h.handle(a.Next[0].Msg, true)
	if got, want := statusNames(b.Statuses), []string{"b:running", "b:skipped"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("b reported %v, want %v", got, want)
	}
	if b.Completion == nil || b.Completion.Status != message.CompletionHalted {
		t.Fatalf("completion %+v, want halted", b.Completion)
	}
}

// TestFirstCopyNotEager: a node that is not eager (nor pure) makes Begin
// even on a first copy.
func TestFirstCopyNotEager(t *testing.T) {
	reg := nodes.NewRegistry(nodes.Options{})
	reg.Register("test", testType{})
	mem := coordmem.New(coordmem.Options{})
	t.Cleanup(func() { mem.Close() })
	co := &countingCoord{Coordinator: mem}
	eng, err := engine.New(engine.Config{Registry: reg, Coord: co, NoFuse: true})
	if err != nil {
		t.Fatal(err)
	}
	wf, err := eng.Compile([]byte(`{"id":"plain","nodes":[{"id":"start","type":"trigger","trigger":true},{"id":"t","type":"test"}],
		"edges":[{"id":"e1","src":"start","dst":"t"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var f engine.Effects
	if err := eng.Start(context.Background(), wf, "exec_plain", nil, &f); err != nil {
		t.Fatal(err)
	}
	if err := eng.Handle(context.Background(), engine.Delivery{First: true}, f.Next[0].Msg, &firstSink{}); err != nil {
		t.Fatal(err)
	}
	if co.begins.Load() != 1 {
		t.Fatalf("%d Begin calls, want 1", co.begins.Load())
	}
}
