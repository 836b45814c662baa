package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rune-org/rune/coord"
	coordmem "github.com/rune-org/rune/coord/memory"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/nodes"
)

// fireTimers claims every timer due by at and resumes it, as the scheduler does.
func (h *harness) fireTimers(at time.Time) []coord.Timer {
	h.t.Helper()
	ts, err := h.timers.Claim(context.Background(), at, 1000, time.Minute)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, tm := range ts {
		h.resume(tm)
		if err := h.timers.Done(context.Background(), tm.ID); err != nil {
			h.t.Fatal(err)
		}
	}
	return ts
}

func (h *harness) resume(tm coord.Timer) {
	h.t.Helper()
	var m message.NodeExecution
	if err := json.Unmarshal(tm.Payload, &m); err != nil {
		h.t.Fatal(err)
	}
	var f engine.Effects
	if err := h.eng.Resume(context.Background(), engine.Delivery{}, &m, tm.Due, &f); err != nil {
		h.t.Fatalf("resume: %v", err)
	}
	h.absorb(&f)
}

const waitDef = `{"id":"wait","nodes":[
	{"id":"start","type":"trigger","trigger":true},
	{"id":"pause","type":"wait","parameters":{"amount":2,"unit":"hours"}},
	{"id":"a","type":"set","parameters":{"values":{"resumed":"{{ $pause.resume_at }}"}}},
	{"id":"b","type":"set","parameters":{"values":{"v":2}}}],
	"edges":[{"id":"e1","src":"start","dst":"pause"},{"id":"e2","src":"pause","dst":"a"},{"id":"e3","src":"pause","dst":"b"}]}`

func TestWaitSuspendsThenResumesSuccessors(t *testing.T) {
	h := newHarness(t, waitDef)
	before := time.Now()
	h.start(nil)
	h.drain()
	if len(h.done) != 0 || len(h.queue) != 0 {
		t.Fatalf("a waiting branch ended or went on: %d completions, %d messages", len(h.done), len(h.queue))
	}
	var waiting *message.NodeStatus
	for _, s := range h.status {
		if s.NodeID == "pause" && s.Status == message.StatusWaiting {
			waiting = s
		}
	}
	if waiting == nil || waiting.ResumeAt == nil || waiting.ResumeAt.Before(before.Add(2*time.Hour-time.Second)) {
		t.Fatalf("no waiting status with resume_at two hours ahead: %v", h.statuses())
	}
	if got := h.fireTimers(time.Now()); len(got) != 0 {
		t.Fatalf("a timer due in two hours fired now: %v", got)
	}
	fired := h.fireTimers(waiting.ResumeAt.Add(time.Millisecond))
	if len(fired) != 1 {
		t.Fatalf("%d timers fired at the due time, want 1", len(fired))
	}
	if len(h.queue) != 2 {
		t.Fatalf("resume published %d messages, want one per successor (2)", len(h.queue))
	}
	for _, d := range h.queue {
		if d.Msg.FromNode != "pause" {
			t.Fatalf("resumed message from_node %q, want pause", d.Msg.FromNode)
		}
	}
	h.drain()
	c := h.completion()
	if c.Status != message.CompletionCompleted || c.FinalContext["$a"].(map[string]any)["resumed"] == nil {
		t.Fatalf("completion %+v", c)
	}
}

func TestResumingTwiceRunsSuccessorsOnce(t *testing.T) {
	h := newHarness(t, waitDef)
	h.start(nil)
	h.drain()
	ts, err := h.timers.Claim(context.Background(), time.Now().Add(3*time.Hour), 10, time.Minute)
	if err != nil || len(ts) != 1 {
		t.Fatalf("claim: %v %v", ts, err)
	}
	// A scheduler resumed it, then died before Done; another resumes it again.
	h.resume(ts[0])
	h.resume(ts[0])
	if len(h.queue) != 4 || h.queue[0].Msg.MessageID != h.queue[2].Msg.MessageID {
		t.Fatalf("want the same two successors twice (same ids), got %d messages", len(h.queue))
	}
	h.drain()
	runs := map[string]int{}
	for _, s := range h.status {
		if s.Status == message.StatusRunning {
			runs[s.NodeID]++
		}
	}
	if runs["a"] != 1 || runs["b"] != 1 {
		t.Fatalf("successors ran %v times, want once each", runs)
	}
	if len(h.done) == 0 || h.done[0].Status != message.CompletionCompleted {
		t.Fatalf("completions %v", h.done)
	}
}

func TestWaitAsLastNodeEndsTheBranch(t *testing.T) {
	h := newHarness(t, `{"id":"last","nodes":[
		{"id":"start","type":"trigger","trigger":true},
		{"id":"a","type":"set","parameters":{"values":{"v":1}}},
		{"id":"pause","type":"delay","parameters":{"duration":"PT5M"}}],
		"edges":[{"id":"e1","src":"start","dst":"a"},{"id":"e2","src":"a","dst":"pause"}]}`)
	h.start(nil)
	h.drain()
	if len(h.done) != 0 {
		t.Fatal("completed before the wait ended")
	}
	h.fireTimers(time.Now().Add(6 * time.Minute))
	c := h.completion()
	if c.Status != message.CompletionCompleted || c.FinalContext["$pause"] == nil || c.FinalContext["$a"] == nil {
		t.Fatalf("completion %+v", c)
	}
}

func TestWaitUntilThePastResumesAtOnce(t *testing.T) {
	h := newHarness(t, `{"id":"past","nodes":[
		{"id":"start","type":"trigger","trigger":true},
		{"id":"pause","type":"wait","parameters":{"until":"2001-01-01T00:00:00Z"}},
		{"id":"a","type":"set","parameters":{"values":{"v":1}}}],
		"edges":[{"id":"e1","src":"start","dst":"pause"},{"id":"e2","src":"pause","dst":"a"}]}`)
	h.start(nil)
	h.drain()
	if st, _ := h.timers.Stats(context.Background()); st.Scheduled != 0 {
		t.Fatalf("%d timers scheduled for a time in the past", st.Scheduled)
	}
	if c := h.completion(); c.Status != message.CompletionCompleted || c.FinalContext["$a"] == nil {
		t.Fatalf("completion %+v", c)
	}
}

func TestRedeliveredSuspendSchedulesOneTimer(t *testing.T) {
	h := newHarness(t, waitDef)
	h.start(nil)
	m := h.queue[0]
	h.step(0)
	h.queue = append(h.queue, m)
	h.step(0)
	if st, _ := h.timers.Stats(context.Background()); st.Scheduled != 1 {
		t.Fatalf("%d timers after a redelivered suspend, want 1", st.Scheduled)
	}
}

func TestFrozenMessagesReferToTheirDefinition(t *testing.T) {
	eng, m := freezer(t)
	frozen, err := eng.Freeze(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := json.Marshal(m)
	if len(frozen) >= len(plain)/2 {
		t.Fatalf("frozen message is %d bytes, plain %d: the definition should not travel with it", len(frozen), len(plain))
	}
	back, err := eng.Thaw(context.Background(), engine.TimerID(m), frozen)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(back)
	if string(got) != string(plain) {
		t.Fatalf("thawed message differs:\n got %s\nwant %s", got, plain)
	}
	if _, err := eng.Thaw(context.Background(), "x", []byte{1, 2, 3}); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("garbage thawed: %v", err)
	}
}

// haltBeforePark halts the execution just before the first Park: the race
// in which a branch suspends while another halts the execution.
type haltBeforePark struct {
	*coordmem.Coordinator
	once sync.Once
}

func (c *haltBeforePark) Park(ctx context.Context, exec, id string, due time.Time) (bool, error) {
	c.once.Do(func() {
		// A message that spawns one keeps the count; its Halt halts.
		_, _ = c.Finish(ctx, exec, "halter", coord.Finish{Spawned: 1, Halt: &message.Failure{NodeID: "other", Error: message.Error{Code: "E", Message: "boom"}}})
	})
	return c.Coordinator.Park(ctx, exec, id, due)
}

// A branch that suspends in an execution halted meanwhile wakes its own
// timer at once, so its resume drops it now rather than in two hours.
func TestSuspendInHaltedExecutionWakesAtOnce(t *testing.T) {
	co := &haltBeforePark{Coordinator: coordmem.New(coordmem.Options{})}
	t.Cleanup(func() { _ = co.Close() })
	timers := coordmem.NewTimers()
	suspendAtWait(t, co, timers, "exec_halted")
	ts, err := timers.Claim(context.Background(), time.Now().Add(time.Second), 10, time.Minute)
	if err != nil || len(ts) != 1 {
		t.Fatalf("claimable within a second: %d timers (%v), want the woken one", len(ts), err)
	}
}

// suspendAtWait starts waitDef's execution exec on an engine over co and
// timers and handles its first message, which suspends at the wait; it
// returns the engine.
func suspendAtWait(t *testing.T, co coord.Coordinator, timers coord.Timers, exec string) *engine.Engine {
	t.Helper()
	eng, err := engine.New(engine.Config{Registry: nodes.NewRegistry(nodes.Options{}), Coord: co, Timers: timers})
	if err != nil {
		t.Fatal(err)
	}
	wf, err := eng.Compile([]byte(waitDef))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var f engine.Effects
	if err := eng.Start(ctx, wf, exec, nil, &f); err != nil {
		t.Fatal(err)
	}
	var g engine.Effects
	if err := eng.Handle(ctx, engine.Delivery{}, f.Next[0].Msg, &g); err != nil {
		t.Fatal(err)
	}
	return eng
}

// finishCounter counts a coordinator's Begin and Finish calls.
type finishCounter struct {
	coord.Coordinator
	begins, finishes atomic.Int64
}

func (c *finishCounter) Begin(ctx context.Context, exec, id string) (coord.Begin, error) {
	c.begins.Add(1)
	return c.Coordinator.Begin(ctx, exec, id)
}

func (c *finishCounter) Finish(ctx context.Context, exec, id string, f coord.Finish) (coord.Outcome, error) {
	c.finishes.Add(1)
	return c.Coordinator.Finish(ctx, exec, id, f)
}

// TestResumeIsOneFinish: the end of a wait asks the coordinator once, its
// Finish making Begin's checks (issue 33: a scheduler resuming a burst of
// waits paid two round trips each). TestModeByOutcome has its replay and
// drop.
func TestResumeIsOneFinish(t *testing.T) {
	mem := coordmem.New(coordmem.Options{})
	t.Cleanup(func() { _ = mem.Close() })
	co := &finishCounter{Coordinator: mem}
	timers := coordmem.NewTimers()
	eng := suspendAtWait(t, co, timers, "exec_once")
	ctx := context.Background()
	ts, err := timers.Claim(ctx, time.Now().Add(3*time.Hour), 10, time.Minute)
	if err != nil || len(ts) != 1 {
		t.Fatalf("claim: %d timers, %v; want 1", len(ts), err)
	}
	var m message.NodeExecution
	if err := json.Unmarshal(ts[0].Payload, &m); err != nil {
		t.Fatal(err)
	}
	begins, finishes := co.begins.Load(), co.finishes.Load()
	var r engine.Effects
	if err := eng.Resume(ctx, engine.Delivery{}, &m, ts[0].Due, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Next) != 2 {
		t.Fatalf("resume: %d successors, want 2", len(r.Next))
	}
	if b, f := co.begins.Load()-begins, co.finishes.Load()-finishes; b != 0 || f != 1 {
		t.Errorf("resume: %d Begin and %d Finish calls, want 0 and 1", b, f)
	}
}
