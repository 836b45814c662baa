package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rune-org/rune/bench"
	"github.com/rune-org/rune/broker/amqp"
	"github.com/rune-org/rune/scheduler"
	"github.com/rune-org/rune/server"
	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/store/postgres"
	"github.com/rune-org/rune/worker"
)

// serverBench measures `rune server` on PostgreSQL, RabbitMQ and Redis: a
// server with a worker and a scheduler in this process, on a fresh queue
// prefix and PostgreSQL schema of its own.
type serverBench struct {
	postgresURL string
	executions  int // triggered as fast as the clients go
	clients     int
	idle        int // triggered one at a time, for the latency
	nodes       int
	concurrency int
	asJSON      bool
}

// ServerBenchResult is what `rune bench --mode server` reports.
type ServerBenchResult struct {
	Executions         int     `json:"executions"`
	Clients            int     `json:"clients"`
	TriggersPerSec     float64 `json:"triggers_accepted_per_sec"`
	StatusesPersisted  int     `json:"statuses_persisted"`
	StatusesPerSec     float64 `json:"statuses_persisted_per_sec"`
	DrainAfterTriggers string  `json:"history_drained_after_last_trigger"`
	IdleExecutions     int     `json:"idle_executions"`
	FirstNodeP50MS     float64 `json:"trigger_to_first_node_p50_ms"`
	FirstNodeP99MS     float64 `json:"trigger_to_first_node_p99_ms"`
	FirstNodeMaxMS     float64 `json:"trigger_to_first_node_max_ms"`
	Schema             string  `json:"schema"`
}

func benchServer(ctx context.Context, env *cliEnv, srv *servers, b serverBench) error {
	if b.postgresURL == "" {
		return usagef("--mode server needs --postgres (or RUNE_POSTGRES_URL), --amqp and --redis")
	}
	if err := srv.check(true); err != nil {
		return err
	}
	var rb [4]byte
	_, _ = rand.Read(rb[:])
	tag := "bench_" + hex.EncodeToString(rb[:])
	if srv.prefix == "" {
		srv.prefix = strings.ReplaceAll(tag, "_", "-")
		defer purgeDeployment(env, srv)
	}
	log := cliLogger(env)
	st, err := postgres.Open(ctx, b.postgresURL, tag)
	if err != nil {
		return fmt.Errorf("open PostgreSQL schema %s: %w", tag, err)
	}
	defer st.Close()
	rt, err := srv.connect(ctx, log, amqp.RoleAdmin)
	if err != nil {
		return err
	}
	defer rt.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		_ = worker.Run(ctx, worker.Config{Broker: rt.Broker, Engine: rt.Engine, Concurrency: b.concurrency, Logger: log})
	})
	wg.Go(func() {
		_ = scheduler.Run(ctx, scheduler.Config{Timers: rt.Timers, Broker: rt.Broker, Engine: rt.Engine, Logger: log})
	})
	s, err := server.New(server.Config{Store: st, Broker: rt.Broker, Engine: rt.Engine, Logger: log})
	if err != nil {
		return err
	}
	wg.Go(func() { _ = s.Run(ctx) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: s.Handler()}
	wg.Go(func() { _ = hs.Serve(ln) })
	defer hs.Close()
	base := "http://" + ln.Addr().String()
	tok, rec, err := server.NewToken("bench", time.Now())
	if err != nil {
		return err
	}
	if err := st.CreateToken(ctx, rec); err != nil {
		return err
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: b.clients * 2}}
	post := func(path string, body []byte) (string, error) {
		req, _ := http.NewRequestWithContext(ctx, "POST", base+path, strings.NewReader(string(body)))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := hc.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusCreated {
			return "", fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, data)
		}
		var x struct{ ID string }
		_ = json.Unmarshal(data, &x)
		return x.ID, nil
	}
	if _, err := post("/v1/workflows", bench.LinearWorkflow(b.nodes)); err != nil {
		return err
	}
	res := ServerBenchResult{Executions: b.executions, Clients: b.clients, IdleExecutions: b.idle, Schema: tag}
	fmt.Fprintf(env.stderr, "rune bench: server on PostgreSQL (schema %s), a worker and a scheduler in this process; %d-node linear workflow\n", tag, b.nodes)

	// Idle: one execution at a time; trigger → first node's running status.
	var lat []time.Duration
	for i := range b.idle {
		t0 := time.Now()
		id, err := post("/v1/workflows/bench_linear/executions", fmt.Appendf(nil, `{"seed":%d}`, i))
		if err != nil {
			return err
		}
		x, err := waitFinal(ctx, st, id)
		if err != nil {
			return err
		}
		if x.Status != store.StatusCompleted {
			return fmt.Errorf("execution %s %s", id, x.Status)
		}
		runs, err := st.NodeRuns(ctx, id)
		if err != nil {
			return err
		}
		for _, r := range runs {
			if r.NodeID == "step_1" && r.StartedAt != nil {
				lat = append(lat, r.StartedAt.Sub(t0))
			}
		}
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		res.FirstNodeP50MS, res.FirstNodeP99MS, res.FirstNodeMaxMS = ms(bench.Percentile(lat, 0.5)), ms(bench.Percentile(lat, 0.99)), ms(lat[len(lat)-1])
		fmt.Fprintf(env.stderr, "idle: %d executions one at a time: trigger → first node p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
			len(lat), res.FirstNodeP50MS, res.FirstNodeP99MS, res.FirstNodeMaxMS)
	}

	// Load: every client triggers as fast as it can.
	var next atomic.Int64
	var firstErr error
	var errOnce sync.Once
	start := time.Now()
	var cw sync.WaitGroup
	for range b.clients {
		cw.Go(func() {
			for next.Add(1) <= int64(b.executions) {
				if _, err := post("/v1/workflows/bench_linear/executions", []byte(`{"seed":1}`)); err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
			}
		})
	}
	cw.Wait()
	if firstErr != nil {
		return firstErr
	}
	triggered := time.Since(start)
	res.TriggersPerSec = float64(b.executions) / triggered.Seconds()
	fmt.Fprintf(env.stderr, "load: %d triggers accepted in %s by %d clients: %.0f/s\n", b.executions, triggered.Round(time.Millisecond), b.clients, res.TriggersPerSec)
	// History: every status of every execution persisted.
	want := b.executions + b.idle
	for {
		n, err := countCompleted(ctx, st)
		if err != nil {
			return err
		}
		if n >= want {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	all := time.Since(start)
	res.StatusesPersisted = b.executions * (1 + 2*b.nodes)
	res.StatusesPerSec = float64(res.StatusesPersisted) / all.Seconds()
	res.DrainAfterTriggers = (all - triggered).Round(time.Millisecond).String()
	fmt.Fprintf(env.stderr, "history: %d statuses and %d completions persisted in %s: %.0f statuses/s (last completion persisted %s after the last trigger)\n",
		res.StatusesPersisted, b.executions, all.Round(time.Millisecond), res.StatusesPerSec, res.DrainAfterTriggers)
	if b.asJSON {
		return printJSON(env, res)
	}
	return nil
}

// waitFinal polls execution id until it has ended.
func waitFinal(ctx context.Context, st store.Store, id string) (*store.Execution, error) {
	for {
		x, err := st.GetExecution(ctx, id)
		if err != nil {
			return nil, err
		}
		if store.Final(x.Status) {
			return x, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func countCompleted(ctx context.Context, st store.Store) (int, error) {
	n, cursor := 0, ""
	for {
		page, err := st.ListExecutions(ctx, store.ExecutionFilter{Status: store.StatusCompleted, Limit: 500, Cursor: cursor})
		if err != nil {
			return 0, err
		}
		n += len(page.Items)
		if cursor = page.Next; cursor == "" {
			return n, nil
		}
	}
}
