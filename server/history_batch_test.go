package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/broker/memory"
	"github.com/rune-org/rune/embedded"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/server"
	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/store/storetest"
)

// The history records every status of a hop's one status message, in
// order, as it records a lone status (the RFC's form, older workers').
func TestHistoryRecordsEveryStatusOfAHop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.SQLite(t)
	s, br := historyServer(t, st)
	def := wfDef("hop", `{"id":"a","type":"set","parameters":{"values":{"v":1}}},{"id":"b","type":"set","parameters":{"values":{"w":2}}}`,
		`{"id":"e1","src":"start","dst":"a"},{"id":"e2","src":"a","dst":"b"}`)
	if _, err := st.CreateWorkflow(ctx, store.WorkflowInput{ID: "hop", Definition: []byte(def), At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	const exec = "exec_hop_1"
	if _, _, err := st.CreateExecution(ctx, store.ExecutionInput{ID: exec, WorkflowID: "hop", Input: []byte(`{}`),
		AvailableAt: time.Now().Add(time.Hour), At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	defer func() { cancel(); <-done }()
	now := time.Now().UTC()
	status := func(node, status string, at int) *message.NodeStatus {
		return &message.NodeStatus{WorkflowID: "hop", ExecutionID: exec, NodeID: node, Status: status, Attempt: 1,
			ExecutedAt: now.Add(time.Duration(at) * time.Millisecond)}
	}
	hop := &message.Statuses{WorkflowID: "hop", ExecutionID: exec, Statuses: []*message.NodeStatus{
		status("a", message.StatusRunning, 0), status("a", message.StatusSuccess, 1), status("b", message.StatusRunning, 2)}}
	// recorded waits until the history holds n statuses of exec and returns
	// them in the event log's order.
	recorded := func(n int) []string {
		var got []string
		deadline := time.Now().Add(60 * time.Second)
		for len(got) < n {
			if time.Now().After(deadline) {
				t.Fatalf("recorded %v after 60s, want %d statuses", got, n)
			}
			evs, err := st.Events(ctx, store.EventFilter{ExecutionID: exec, Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			got = got[:0]
			for _, ev := range evs {
				var s message.NodeStatus
				if ev.Kind == "status" && json.Unmarshal(ev.Body, &s) == nil {
					got = append(got, s.NodeID+":"+s.Status)
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		return got
	}
	// The lone status goes out once the hop is recorded: two messages may be
	// consumed in either order (the history's rules, not the log, order them).
	publish := func(body any) {
		if err := br.Publish(ctx, broker.Message{Topic: broker.Status, Key: exec, Body: body}).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	publish(hop)
	recorded(3)
	publish(status("b", message.StatusSuccess, 3))
	got := recorded(4)
	if want := "a:running a:success b:running b:success"; strings.Join(got, " ") != want {
		t.Fatalf("recorded %v, want %s", got, want)
	}
}

// batchCounter is a store that counts AppendHistory's calls and events.
type batchCounter struct {
	store.Store
	calls, events atomic.Int64
}

func (c *batchCounter) AppendHistory(ctx context.Context, evs []store.HistoryEvent) ([]store.Event, error) {
	c.calls.Add(1)
	c.events.Add(int64(len(evs)))
	return c.Store.AppendHistory(ctx, evs)
}

// Completions held for their statuses do not shrink the batches: with more
// completions held than a batch takes (their nodes never report), the
// statuses of other executions still go in batches, not one write each
// (they did: a held completion counted against the batch size).
func TestHistoryBatchesWhileCompletionsAreHeld(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := &batchCounter{Store: storetest.SQLite(t)}
	rt, err := embedded.New(embedded.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	br := memory.New(memory.Options{})
	defer br.Close()
	const batch = 10
	s, err := server.New(server.Config{Store: st, Broker: br, Engine: rt.Engine, Logger: slog.New(slog.DiscardHandler),
		History: server.HistoryConfig{Batch: batch, Window: 50 * time.Millisecond, HoldMax: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	def := wfDef("held", `{"id":"s","type":"set","parameters":{"values":{"v":1}}}`, `{"id":"e1","src":"start","dst":"s"}`)
	if _, err := st.CreateWorkflow(ctx, store.WorkflowInput{ID: "held", Definition: []byte(def), At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	const held, statuses = 80, 200
	var completions, running []broker.Message
	now := time.Now().UTC()
	for i := range held + statuses {
		id := fmt.Sprintf("exec_held_%03d", i)
		if _, _, err := st.CreateExecution(ctx, store.ExecutionInput{ID: id, WorkflowID: "held", Input: []byte(`{}`),
			AvailableAt: time.Now().Add(time.Hour), At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if i < held {
			completions = append(completions, broker.Message{Topic: broker.Completion, ID: id, Key: id, Body: &message.Completion{
				WorkflowID: "held", ExecutionID: id, Status: message.CompletionCompleted, CompletedAt: now,
				FinalContext: map[string]any{"$s": map[string]any{"v": 1}}}})
		} else {
			running = append(running, broker.Message{Topic: broker.Status, Key: id, Body: &message.NodeStatus{
				WorkflowID: "held", ExecutionID: id, NodeID: "s", Status: message.StatusRunning, Attempt: 1, ExecutedAt: now}})
		}
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	defer func() { cancel(); <-done }()
	if err := br.Publish(ctx, completions...).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := br.Publish(ctx, running...).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for st.events.Load() < statuses {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d statuses written after 60 s", st.events.Load(), statuses)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Batches of up to 10 in four writers; one write per status before.
	if calls := st.calls.Load(); calls > statuses/4 {
		t.Errorf("%d statuses took %d writes, want at most %d", statuses, calls, statuses/4)
	}
	if n := st.events.Load(); n != statuses {
		t.Errorf("%d events written, want %d (the completions held)", n, statuses)
	}
}
