package bench

import (
	"bytes"
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

	"github.com/rune-org/rune/broker/amqp"
	"github.com/rune-org/rune/scheduler"
	"github.com/rune-org/rune/secrets"
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
	mode        string
	// duration, when set, triggers for that long (at rate per second, 0:
	// as fast as accepted) instead of executions, and samples the
	// history's lag each second.
	duration time.Duration
	rate     int
	// keys encrypt hook signing secrets (webhooks mode).
	keys *secrets.Keyring
}

// ServerBenchResult is what `rune bench --mode server` reports.
type ServerBenchResult struct {
	Executions         int     `json:"executions"`
	Clients            int     `json:"clients"`
	TriggersPerSec     float64 `json:"triggers_accepted_per_sec"`
	StatusesPersisted  int     `json:"statuses_persisted"`
	StatusesPerSec     float64 `json:"statuses_persisted_per_sec"`
	DrainAfterTriggers string  `json:"history_drained_after_last_trigger"`
	// LagAfterWorkers is the last completion's persistence after the
	// worker finished it (its completed_at; the bench polls every 50 ms).
	LagAfterWorkers string `json:"last_completion_persisted_after_workers"`
	// LagSamples (with --duration) is, each second, now less the
	// completed_at of the newest execution the store shows completed.
	LagSamples     []float64 `json:"lag_samples_sec,omitempty"`
	IdleExecutions int       `json:"idle_executions"`
	FirstNodeP50MS float64   `json:"trigger_to_first_node_p50_ms"`
	FirstNodeP99MS float64   `json:"trigger_to_first_node_p99_ms"`
	FirstNodeMaxMS float64   `json:"trigger_to_first_node_max_ms"`
	Schema         string    `json:"schema"`
}

// benchRig is a server on a fresh PostgreSQL schema with a worker and a
// scheduler in this process, and an HTTP client with a token for its API.
type benchRig struct {
	st   *postgres.Store
	tag  string
	base string
	tok  string
	hc   *http.Client
}

// post sends body to path with the rig's token, wants status want and
// returns the answer's id.
func (r *benchRig) post(ctx context.Context, path string, body []byte, want int) (string, error) {
	var x struct{ ID string }
	_, err := r.send(ctx, path, body, true, &x, want)
	return x.ID, err
}

// send posts body to path (with the rig's token when auth), fails unless
// the status is one of want, decodes the answer into out (when not nil)
// and returns the status.
func (r *benchRig) send(ctx context.Context, path string, body []byte, auth bool, out any, want ...int) (int, error) {
	return r.sendWith(ctx, path, body, auth, out, nil, want...)
}

func (r *benchRig) sendWith(ctx context.Context, path string, body []byte, auth bool, out any, header http.Header, want ...int) (int, error) {
	req, _ := http.NewRequestWithContext(ctx, "POST", r.base+path, bytes.NewReader(body))
	for k, v := range header {
		req.Header[k] = v
	}
	if auth {
		req.Header.Set("Authorization", "Bearer "+r.tok)
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if !slices.Contains(want, resp.StatusCode) {
		return resp.StatusCode, fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, data)
	}
	if out != nil {
		_ = json.Unmarshal(data, out)
	}
	return resp.StatusCode, nil
}

// startBenchServer starts a benchRig; stop ends it (and its processes' goroutines).
func startBenchServer(ctx context.Context, env *Env, srv *Deployment, b serverBench) (rig *benchRig, stop func(), err error) {
	if b.postgresURL == "" {
		return nil, nil, usagef("--mode %s needs --postgres (or RUNE_POSTGRES_URL), --amqp and --redis", b.mode)
	}
	if err := srv.check(true); err != nil {
		return nil, nil, err
	}
	var stops []func()
	stopAll := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	stop = stopAll
	defer func() {
		if err != nil {
			stopAll() // stop is nil: an error return clears it
		}
	}()
	var rb [4]byte
	_, _ = rand.Read(rb[:])
	tag := "bench_" + hex.EncodeToString(rb[:])
	if srv.Prefix == "" {
		srv.Prefix = strings.ReplaceAll(tag, "_", "-")
		stops = append(stops, func() { purgeDeployment(env, srv) })
	}
	log := env.Logger
	st, err := postgres.Open(ctx, b.postgresURL, tag)
	if err != nil {
		return nil, nil, fmt.Errorf("open PostgreSQL schema %s: %w", tag, err)
	}
	stops = append(stops, func() { st.Close() })
	srv.effectsPool = b.concurrency // as `rune worker` does (0: the default)
	rt, err := srv.connect(ctx, log, amqp.RoleAdmin)
	if err != nil {
		return nil, nil, err
	}
	stops = append(stops, rt.Close)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	stops = append(stops, func() { cancel(); wg.Wait() })
	wg.Go(func() {
		_ = worker.Run(ctx, worker.Config{Broker: rt.Broker, Engine: rt.Engine, Concurrency: b.concurrency, Logger: log})
	})
	wg.Go(func() {
		_ = scheduler.Run(ctx, scheduler.Config{Timers: rt.Timers, Broker: rt.Broker, Engine: rt.Engine, Logger: log})
	})
	s, err := server.New(server.Config{Store: st, Broker: rt.Broker, Engine: rt.Engine, Logger: log, Keys: b.keys})
	if err != nil {
		return nil, nil, err
	}
	wg.Go(func() { _ = s.Run(ctx) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	hs := &http.Server{Handler: s.Handler()}
	wg.Go(func() { _ = hs.Serve(ln) })
	stops = append(stops, func() { hs.Close() })
	tok, rec, err := server.NewToken("bench", time.Now())
	if err != nil {
		return nil, nil, err
	}
	if err := st.CreateToken(ctx, rec); err != nil {
		return nil, nil, err
	}
	return &benchRig{st: st, tag: tag, base: "http://" + ln.Addr().String(), tok: tok,
		hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: b.clients * 2}}}, stop, nil
}

func benchServer(ctx context.Context, env *Env, srv *Deployment, b serverBench) error {
	b.mode = "server"
	rig, stop, err := startBenchServer(ctx, env, srv, b)
	if err != nil {
		return err
	}
	defer stop()
	st, tag := rig.st, rig.tag
	post := func(path string, body []byte) (string, error) { return rig.post(ctx, path, body, http.StatusCreated) }
	if _, err := post("/v1/workflows", LinearWorkflow(b.nodes)); err != nil {
		return err
	}
	res := ServerBenchResult{Executions: b.executions, Clients: b.clients, IdleExecutions: b.idle, Schema: tag}
	fmt.Fprintf(env.Stderr, "rune bench: server on PostgreSQL (schema %s), a worker and a scheduler in this process; %d-node linear workflow\n", tag, b.nodes)

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
		res.FirstNodeP50MS, res.FirstNodeP99MS, res.FirstNodeMaxMS = ms(Percentile(lat, 0.5)), ms(Percentile(lat, 0.99)), ms(lat[len(lat)-1])
		fmt.Fprintf(env.Stderr, "idle: %d executions one at a time: trigger → first node p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
			len(lat), res.FirstNodeP50MS, res.FirstNodeP99MS, res.FirstNodeMaxMS)
	}

	// Load: every client triggers as fast as it can (or, with --duration,
	// for that long at --start-rate).
	var next, accepted atomic.Int64
	var firstErr error
	var errOnce sync.Once
	start := time.Now()
	more := func() bool {
		if b.duration == 0 {
			return next.Add(1) <= int64(b.executions)
		}
		n := next.Add(1)
		if b.rate > 0 {
			time.Sleep(time.Until(start.Add(time.Duration(n-1) * time.Second / time.Duration(b.rate))))
		}
		return time.Since(start) < b.duration
	}
	sampled := make(chan struct{})
	if b.duration > 0 {
		go func() {
			defer close(sampled)
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for time.Since(start) < b.duration+time.Second {
				<-tick.C
				page, err := st.ListExecutions(ctx, store.ExecutionFilter{Status: store.StatusCompleted, Limit: 1})
				if err != nil || len(page.Items) == 0 || page.Items[0].FinishedAt == nil {
					continue
				}
				lag := time.Since(*page.Items[0].FinishedAt).Seconds()
				res.LagSamples = append(res.LagSamples, lag)
				fmt.Fprintf(env.Stderr, "t=%3.0fs triggered %d, history lag %.2f s\n", time.Since(start).Seconds(), accepted.Load(), lag)
			}
		}()
	} else {
		close(sampled)
	}
	var cw sync.WaitGroup
	for range b.clients {
		cw.Go(func() {
			for more() {
				if _, err := post("/v1/workflows/bench_linear/executions", []byte(`{"seed":1}`)); err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				accepted.Add(1)
			}
		})
	}
	cw.Wait()
	if firstErr != nil {
		return firstErr
	}
	triggered := time.Since(start)
	n := int(accepted.Load())
	res.Executions = n
	res.TriggersPerSec = float64(n) / triggered.Seconds()
	fmt.Fprintf(env.Stderr, "load: %d triggers accepted in %s by %d clients: %.0f/s\n", n, triggered.Round(time.Millisecond), b.clients, res.TriggersPerSec)
	// History: every status of every execution persisted.
	lastDone, caughtUp, err := waitHistory(ctx, st, n+b.idle)
	if err != nil {
		return err
	}
	all := caughtUp.Sub(start)
	<-sampled
	res.StatusesPersisted = n * (1 + 2*b.nodes)
	res.StatusesPerSec = float64(res.StatusesPersisted) / all.Seconds()
	res.DrainAfterTriggers = (all - triggered).Round(time.Millisecond).String()
	res.LagAfterWorkers = caughtUp.Sub(lastDone).Round(time.Millisecond).String()
	fmt.Fprintf(env.Stderr, "history: %d statuses and %d completions persisted in %s: %.0f statuses/s (last completion persisted %s after the last trigger, %s after the workers finished it)\n",
		res.StatusesPersisted, n, all.Round(time.Millisecond), res.StatusesPerSec, res.DrainAfterTriggers, res.LagAfterWorkers)
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

// waitCompleted polls st until want executions are completed, or ctx ends.
func waitCompleted(ctx context.Context, st store.Store, want int) error {
	_, _, err := waitHistory(ctx, st, want)
	return err
}

// waitHistory polls st until want executions are completed, or ctx
// ends, and returns the latest completed_at among them (the workers' end)
// and when the poll saw none left unfinished. It polls with two one-row reads (nothing enqueued, nothing
// processing) every 50 ms, which cost the history little, then counts.
func waitHistory(ctx context.Context, st store.Store, want int) (last, at time.Time, err error) {
	for {
		busy := false
		for _, status := range []string{store.StatusEnqueued, store.StatusProcessing} {
			page, err := st.ListExecutions(ctx, store.ExecutionFilter{Status: status, Limit: 1})
			if err != nil {
				return last, at, fmt.Errorf("list %s executions: %w", status, err)
			}
			busy = busy || len(page.Items) > 0
		}
		if !busy {
			at = time.Now()
			n, err := eachExecution(ctx, st, store.ExecutionFilter{Status: store.StatusCompleted}, func(x *store.Execution) {
				if x.FinishedAt != nil && x.FinishedAt.After(last) {
					last = *x.FinishedAt
				}
			})
			if err != nil {
				return last, at, fmt.Errorf("count completed executions: %w", err)
			}
			if n >= want {
				return last, at, nil
			}
		}
		select {
		case <-ctx.Done():
			return last, at, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// countExecutions counts the executions f selects.
func countExecutions(ctx context.Context, st store.Store, f store.ExecutionFilter) (int, error) {
	return eachExecution(ctx, st, f, nil)
}

// eachExecution counts the executions f selects; each, when not nil, sees
// every one.
func eachExecution(ctx context.Context, st store.Store, f store.ExecutionFilter, each func(*store.Execution)) (int, error) {
	n := 0
	f.Limit = 500
	for {
		page, err := st.ListExecutions(ctx, f)
		if err != nil {
			return 0, err
		}
		n += len(page.Items)
		for _, x := range page.Items {
			if each != nil {
				each(x)
			}
		}
		if f.Cursor = page.Next; f.Cursor == "" {
			return n, nil
		}
	}
}
