package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/rune-org/rune/embedded"
	"github.com/rune-org/rune/internal/sqlitedb"
	"github.com/rune-org/rune/server"
	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/store/sqlite"
)

// embeddedServerBench is `rune bench --mode embedded-server`: the embedded
// default of `rune server` (store, dispatcher, history consumer, worker and
// scheduler in one process, durable on SQLite) in this process.
type embeddedServerBench struct {
	executions, inflight, nodes, concurrency int
	data                                     string
	asJSON                                   bool
	// memory runs the runtime in memory (the server's store on SQLite
	// still), to tell the runtime's cost from the history's.
	memory bool
	// chain is "set" or "http" (a GET per node of an endpoint in this
	// process that sleeps taskSleep).
	chain     string
	taskSleep time.Duration
	// dispatchPoll is the server's Config.Dispatch.Poll (0: its default);
	// a test sets it long, so that only the bench's wakes start executions.
	dispatchPoll time.Duration
}

// EmbeddedServerResult is what `rune bench --mode embedded-server` reports.
type EmbeddedServerResult struct {
	Throughput *Result `json:"throughput"`
	// HistoryLag is the time from the last completion (as a follower saw
	// it) to the store showing every execution ended: the history consumer's
	// backlog at the end.
	HistoryLag time.Duration `json:"history_lag_ns"`
	// StatusesPerSec is the statuses persisted (a running and a success
	// per node, one of the trigger) per second, from the first start to
	// the store showing every execution ended.
	StatusesPerSec float64 `json:"statuses_persisted_per_sec"`
	Data           string  `json:"data"`
	// Sequence is, for executions run one at a time, each one's time and
	// the overhead per step.
	Sequence *Sequence `json:"sequence,omitempty"`
}

func benchEmbeddedServer(ctx context.Context, env *Env, b embeddedServerBench) (err error) {
	dir := b.data
	if dir == "" {
		if dir, err = os.MkdirTemp("", "rune-bench-server-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	log := env.Logger
	st, err := sqlite.Open(ctx, filepath.Join(dir, "rune.db"))
	if err != nil {
		return err
	}
	defer st.Close()
	opts := embedded.Options{Logger: log, Concurrency: b.concurrency, ConsumeEvents: true}
	what := "durable on SQLite"
	if b.memory {
		what = "store on SQLite, runtime in memory"
	} else {
		db, err := sqlitedb.Open(ctx, filepath.Join(dir, runtimeDB), sqlitedb.Options{})
		if err != nil {
			return err
		}
		defer db.Close()
		opts.DB = db
	}
	rt, err := embedded.New(opts)
	if err != nil {
		return err
	}
	defer rt.Close()
	// The server as `rune server` runs it (its default dispatcher poll): the
	// bench enqueues through the store, as a trigger through the API does,
	// and wakes the dispatcher as that trigger does (the API would name the
	// executions itself, and the bench follows each before it starts).
	s, err := server.New(server.Config{Store: st, Broker: rt.Broker, Engine: rt.Engine, Logger: log, Dispatch: server.DispatchConfig{Poll: b.dispatchPoll}, Crons: server.CronConfig{Off: true}})
	if err != nil {
		return err
	}
	sctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	wg.Go(func() {
		if err := s.Run(sctx); err != nil {
			log.Error("bench server stopped", "err", err)
		}
	})
	def, kind, callP50 := LinearWorkflow(b.nodes), "set", time.Duration(0)
	if b.chain == "http" {
		url, p50, stop, err := benchHTTPServer(ctx, b.taskSleep)
		if err != nil {
			return err
		}
		defer stop()
		def, kind, callP50 = HTTPWorkflow(b.nodes, url), "http", p50
	}
	stored, err := st.CreateWorkflow(ctx, store.WorkflowInput{Definition: def, At: time.Now()})
	if err != nil {
		return err
	}
	wf, err := rt.Engine.Compile(def)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stderr, "rune bench: %d executions of %d %s nodes, %d in flight, embedded server (%s) under %s\n", b.executions, b.nodes, kind, b.inflight, what, dir)
	t0 := time.Now()
	start := func(ctx context.Context, id string, input any) error {
		raw, err := json.Marshal(input)
		if err != nil {
			return err
		}
		if _, _, err = st.CreateExecution(ctx, store.ExecutionInput{ID: id, WorkflowID: stored.ID, Version: stored.Version, Input: raw, Trigger: "api", At: time.Now()}); err != nil {
			return err
		}
		s.Wake()
		return nil
	}
	ids := func(i int) string { return fmt.Sprintf("exec_%s_bench%07d", t0.UTC().Format("20060102T150405"), i) }
	res, err := Run(ctx, rt.Broker, rt.Engine, wf, Config{Executions: b.executions, InFlight: b.inflight, Progress: env.Stderr, Start: start, IDs: ids})
	if err != nil {
		return err
	}
	end := time.Now()
	// The history has caught up when no execution is left processing (the
	// chain has no waits: every execution was dispatched, and it ends as
	// completed). One cheap query every 50 ms: polls compete with the
	// history's writer for the CPU.
	for {
		page, err := st.ListExecutions(ctx, store.ExecutionFilter{Status: store.StatusProcessing, Limit: 1})
		if err != nil {
			return err
		}
		if len(page.Items) == 0 {
			break
		}
		if time.Since(end) > 5*time.Minute {
			return fmt.Errorf("the history has not caught up %v after the last completion", time.Since(end))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	out := EmbeddedServerResult{Throughput: res, HistoryLag: time.Since(end), Data: dir, Sequence: sequenceOf(res, b.inflight, b.nodes, b.taskSleep, callP50),
		StatusesPerSec: float64(b.executions*(1+2*b.nodes)) / time.Since(t0).Seconds()}
	if b.asJSON {
		return json.NewEncoder(env.Stdout).Encode(out)
	}
	res.Print(env.Stdout, "embedded server ("+what+"), linear workflow of "+kind+" nodes")
	out.Sequence.print(env.Stdout)
	fmt.Fprintf(env.Stdout, "history lag at the end: %v (last completion → every execution ended in the store); %.0f statuses persisted/s\n", out.HistoryLag.Round(time.Millisecond), out.StatusesPerSec)
	return nil
}
