package server_test

import (
	"context"
	"fmt"
	"log/slog"
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

// BenchmarkHistoryPostgres measures the history consumer alone: statuses
// published on an in-process broker for 1,000 executions, consumed, batched
// and persisted in PostgreSQL; it reports statuses persisted per second
// (the workers' node rate sends two per node).
func BenchmarkHistoryPostgres(b *testing.B) { benchHistory(b, storetest.Postgres(b)) }

// BenchmarkHistorySQLite is BenchmarkHistoryPostgres on SQLite (rune.db of
// the embedded server).
func BenchmarkHistorySQLite(b *testing.B) { benchHistory(b, storetest.SQLite(b)) }

func benchHistory(b *testing.B, st store.Store) {
	ctx := context.Background()
	s, br := historyServer(b, st)
	def := wfDef("hist", `{"id":"s","type":"set","parameters":{"values":{"v":1}}}`, `{"id":"e1","src":"start","dst":"s"}`)
	if _, err := st.CreateWorkflow(ctx, store.WorkflowInput{ID: "hist", Definition: []byte(def), At: time.Now()}); err != nil {
		b.Fatal(err)
	}
	const execs = 1000
	ids := make([]string, execs)
	for i := range ids {
		ids[i] = fmt.Sprintf("exec_hist_%03d", i)
		// Enqueued for an hour from now: the dispatcher leaves them alone.
		if _, _, err := st.CreateExecution(ctx, store.ExecutionInput{ID: ids[i], WorkflowID: "hist", Input: []byte(`{}`),
			AvailableAt: time.Now().Add(time.Hour), At: time.Now()}); err != nil {
			b.Fatal(err)
		}
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	defer func() { cancel(); <-done }()
	now := time.Now().UTC()
	msgs := make([]broker.Message, b.N)
	for i := range msgs {
		exec := ids[i%execs]
		node := fmt.Sprintf("n%d", i/execs/2)
		status := message.StatusRunning
		if (i/execs)%2 == 1 {
			status = message.StatusSuccess
		}
		msgs[i] = broker.Message{Topic: broker.Status, Key: exec, Body: &message.NodeStatus{WorkflowID: "hist", ExecutionID: exec,
			NodeID: node, Status: status, Attempt: 1, ExecutedAt: now.Add(time.Duration(i) * time.Microsecond)}}
	}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < len(msgs); i += 500 {
		if err := br.Publish(ctx, msgs[i:min(i+500, len(msgs))]...).Wait(ctx); err != nil {
			b.Fatal(err)
		}
	}
	// Persisted: every status is an event.
	seen, after := 0, int64(0)
	deadline := time.Now().Add(5 * time.Minute)
	for seen < b.N {
		evs, err := st.Events(ctx, store.EventFilter{AfterID: after, Limit: 5000})
		if err != nil {
			b.Fatal(err)
		}
		for _, ev := range evs {
			after = ev.ID
			if ev.Kind == "status" {
				seen++
			}
		}
		if len(evs) == 0 {
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d statuses persisted after 5 minutes", seen, b.N)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "statuses/s")
}

// historyServer is a server on st with an embedded engine and an in-process
// broker, both closed when tb ends: what the history tests publish to.
func historyServer(tb testing.TB, st store.Store) (*server.Server, *memory.Broker) {
	rt, err := embedded.New(embedded.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { rt.Close() })
	br := memory.New(memory.Options{})
	tb.Cleanup(func() { br.Close() })
	s, err := server.New(server.Config{Store: st, Broker: br, Engine: rt.Engine, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	return s, br
}
