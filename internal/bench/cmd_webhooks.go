package bench

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rune-org/rune/secrets"
	"github.com/rune-org/rune/store"
)

// WebhookBenchResult is what `rune bench --mode webhooks` reports.
type WebhookBenchResult struct {
	Requests          int     `json:"requests"`
	Clients           int     `json:"clients"`
	Signed            bool    `json:"signed"`
	AcceptedPerSec    float64 `json:"hook_requests_accepted_per_sec"`
	AcceptP50MS       float64 `json:"accept_p50_ms"`
	AcceptP99MS       float64 `json:"accept_p99_ms"`
	Replays           int     `json:"replays"`
	ReplayExecutions  int     `json:"replay_executions_started"`
	CompletedPerSec   float64 `json:"executions_completed_per_sec"`
	AllocPerRequestKB float64 `json:"process_alloc_per_request_kb"`
	Schema            string  `json:"schema"`
}

// benchWebhooks measures a signed webhook on `rune server` (PostgreSQL,
// RabbitMQ, Redis; a worker and a scheduler in this process): requests
// accepted per second into executions by b.clients senders, each with its
// own delivery id, then a replay of every tenth delivery (none may start
// an execution), then until every execution completed.
func benchWebhooks(ctx context.Context, env *Env, srv *Deployment, b serverBench) error {
	b.mode = "webhooks"
	dir, err := os.MkdirTemp("", "rune-bench-keys")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if b.keys, err = secrets.LoadKeys("", filepath.Join(dir, "secret.key"), true); err != nil {
		return err
	}
	rig, stop, err := startBenchServer(ctx, env, srv, b)
	if err != nil {
		return err
	}
	defer stop()
	// The linear workflow reads $trigger.seed: a hook's body is $trigger.body.
	def := bytes.ReplaceAll(LinearWorkflow(b.nodes), []byte("$trigger.seed"), []byte("$trigger.body.seed"))
	if _, err := rig.post(ctx, "/v1/workflows", def, http.StatusCreated); err != nil {
		return err
	}
	var hook struct {
		URL           string `json:"url"`
		SigningSecret string `json:"signing_secret"`
	}
	if _, err := rig.send(ctx, "/v1/workflows/bench_linear/hooks", []byte(`{"name":"bench","signature":{}}`), true, &hook, http.StatusCreated); err != nil {
		return err
	}
	fmt.Fprintf(env.Stderr, "rune bench: webhooks on rune server, PostgreSQL schema %s, a worker and a scheduler in this process; signed hook into a %d-node linear workflow\n", rig.tag, b.nodes)
	// Each delivery has a body of its own, as a real sender's events do:
	// the same body signed in the same second is the same signature, which
	// the hook answers as a replay (200, duplicate), starting nothing.
	deliver := func(id int, want ...int) (time.Duration, error) {
		body := fmt.Appendf(nil, `{"event":"push","ref":"main","seed":1,"delivery":%d}`, id)
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		mac := hmac.New(sha256.New, []byte(hook.SigningSecret))
		mac.Write([]byte(ts + "."))
		mac.Write(body)
		h := http.Header{}
		h.Set("Content-Type", "application/json")
		h.Set("X-Request-Id", "d-"+strconv.Itoa(id))
		h.Set("X-Rune-Timestamp", ts)
		h.Set("X-Rune-Signature", "sha256="+hex.EncodeToString(mac.Sum(nil)))
		t0 := time.Now()
		_, err := rig.sendWith(ctx, hook.URL, body, false, nil, h, want...)
		return time.Since(t0), err
	}
	res := WebhookBenchResult{Requests: b.executions, Clients: b.clients, Signed: true, Schema: rig.tag}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var next atomic.Int64
	lat := make([]time.Duration, b.executions)
	var firstErr error
	var errOnce sync.Once
	start := time.Now()
	var cw sync.WaitGroup
	for range b.clients {
		cw.Go(func() {
			for i := next.Add(1) - 1; i < int64(b.executions); i = next.Add(1) - 1 {
				d, err := deliver(int(i), http.StatusAccepted) // a new delivery starts an execution
				if err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("delivery %d: %w", i, err) })
					return
				}
				lat[i] = d
			}
		})
	}
	cw.Wait()
	if firstErr != nil {
		return firstErr
	}
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	res.AcceptedPerSec = float64(b.executions) / took.Seconds()
	res.AllocPerRequestKB = float64(after.TotalAlloc-before.TotalAlloc) / float64(b.executions) / 1024
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	res.AcceptP50MS, res.AcceptP99MS = ms(Percentile(lat, 0.5)), ms(Percentile(lat, 0.99))
	fmt.Fprintf(env.Stderr, "load: %d signed deliveries accepted (202) in %s by %d clients: %.0f/s, p50 %.1f ms, p99 %.1f ms; %.0f KB allocated per request (whole process)\n",
		b.executions, took.Round(time.Millisecond), b.clients, res.AcceptedPerSec, res.AcceptP50MS, res.AcceptP99MS, res.AllocPerRequestKB)

	// Replays: a sender retrying every tenth delivery starts nothing.
	for i := 0; i < b.executions; i += 10 {
		if _, err := deliver(i, http.StatusAccepted, http.StatusOK); err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		res.Replays++
	}
	if err := waitCompleted(ctx, rig.st, b.executions); err != nil {
		return err
	}
	all := time.Since(start)
	total, err := countExecutions(ctx, rig.st, store.ExecutionFilter{WorkflowID: "bench_linear"})
	if err != nil {
		return err
	}
	res.ReplayExecutions = total - b.executions
	res.CompletedPerSec = float64(b.executions) / all.Seconds()
	fmt.Fprintf(env.Stderr, "replays: %d repeated delivery ids started %d executions; all %d executions completed in %s: %.0f/s\n",
		res.Replays, res.ReplayExecutions, b.executions, all.Round(time.Millisecond), res.CompletedPerSec)
	if res.ReplayExecutions != 0 {
		return fmt.Errorf("replayed deliveries started %d executions, want 0", res.ReplayExecutions)
	}
	if b.asJSON {
		return printJSON(env, res)
	}
	return nil
}
