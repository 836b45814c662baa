package worker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/broker/memory"
	"github.com/rune-org/rune/coord"
	coordmem "github.com/rune-org/rune/coord/memory"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/internal/nodetest"
	"github.com/rune-org/rune/nodes"
	"github.com/rune-org/rune/worker"
)

// beginLog records each Begin call: its message id and how many times the
// nodes had run then.
type beginLog struct {
	coord.Coordinator
	runs *nodetest.Eager
	mu   sync.Mutex
	log  []begun
}

type begun struct {
	id   string
	runs map[string]int64
}

func (c *beginLog) Begin(ctx context.Context, exec, id string) (coord.Begin, error) {
	b := begun{id: id, runs: c.runs.Runs()}
	c.mu.Lock()
	c.log = append(c.log, b)
	c.mu.Unlock()
	return c.Coordinator.Begin(ctx, exec, id)
}

func (c *beginLog) calls() []begun {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]begun(nil), c.log...)
}

// TestFirstCopyDuplicatePublish: a replay published a second copy of b's
// message (unmarked) after its first copy. The worker runs the first copy
// without Begin, and b's successor c too (a first copy of b's first
// Finish); the second copy of b makes Begin, replays, and its copy of c
// replays as well: every node ran once.
func TestFirstCopyDuplicatePublish(t *testing.T) {
	runs := &nodetest.Eager{}
	reg := nodes.NewRegistry(nodes.Options{})
	reg.Register("eager", runs)
	mem := coordmem.New(coordmem.Options{})
	t.Cleanup(func() { mem.Close() })
	co := &beginLog{Coordinator: mem, runs: runs}
	eng, err := engine.New(engine.Config{Registry: reg, Coord: co, NoFuse: true})
	if err != nil {
		t.Fatal(err)
	}
	wf, err := eng.Compile([]byte(`{"id":"eager","nodes":[{"id":"start","type":"trigger","trigger":true},
		{"id":"a","type":"eager"},{"id":"b","type":"eager"},{"id":"c","type":"eager"}],
		"edges":[{"id":"e1","src":"start","dst":"a"},{"id":"e2","src":"a","dst":"b"},{"id":"e3","src":"b","dst":"c"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The trigger and a by hand, as a master and a first worker would.
	var started, fromA engine.Effects
	if err := eng.Start(ctx, wf, "exec_dup", nil, &started); err != nil {
		t.Fatal(err)
	}
	if err := eng.Handle(ctx, engine.Delivery{}, started.Next[0].Msg, &fromA); err != nil {
		t.Fatal(err)
	}
	b := memory.New(memory.Options{})
	t.Cleanup(func() { _ = b.Close() })
	completions := make(chan struct{}, 8)
	go func() {
		_ = b.Consume(ctx, broker.Completion, broker.ConsumeOptions{}, func(context.Context, *broker.Delivery) error {
			completions <- struct{}{}
			return nil
		})
	}()
	msg := fromA.Next[0].Msg
	first := broker.Message{Topic: broker.Execution, ID: msg.MessageID, Key: msg.ExecutionID, Body: msg, First: true}
	second := first
	second.First = false
	if err := b.Publish(ctx, first, second).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	afterA := len(co.calls())
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	// One handler: the first copy is handled (and finished) before the second.
	go func() { done <- worker.Run(wctx, worker.Config{Broker: b, Engine: eng, Concurrency: 1}) }()
	defer func() { stop(); <-done }()
	select {
	case <-completions:
	case <-ctx.Done():
		t.Fatal("no completion")
	}
	// Begins on b's id and on c's (the only other id now): the second
	// copy of b's, after b ran, and the second copy of c's. None came
	// before the node ran: its first copy had none. (c's first copy ends
	// the execution: its Finish makes Begin's checks, IfLast.)
	var onB, onC []begun
	for {
		onB, onC = nil, nil
		for _, c := range co.calls()[afterA:] {
			if c.id == msg.MessageID {
				onB = append(onB, c)
			} else {
				onC = append(onC, c)
			}
		}
		if len(onB) >= 1 && len(onC) >= 1 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("Begin calls on b %d, on c %d; want at least 1 and 1", len(onB), len(onC))
		case <-time.After(5 * time.Millisecond):
		}
	}
	if len(onB) != 1 || onB[0].runs["b"] != 1 {
		t.Errorf("Begin calls on b's message: %+v, want one, after b ran (the second copy's)", onB)
	}
	for _, c := range onC {
		if c.runs["c"] != 1 {
			t.Errorf("Begin on c's message %s when c had run %d times: its first copy asked before running", c.id, c.runs["c"])
		}
	}
	ran := runs.Runs()
	for _, id := range []string{"a", "b", "c"} {
		if ran[id] != 1 {
			t.Errorf("%s ran %d times, want once", id, ran[id])
		}
	}
}
