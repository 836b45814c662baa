// Package bench measures Rune: executions driven through a broker while
// per-hop latencies are recorded, summarised as throughput, percentiles and
// memory. `rune bench` prints its reports.
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/client"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/message"
)

// LinearWorkflow returns a definition of a trigger followed by n set nodes in
// a line, each reading the previous node's output through an expression.
func LinearWorkflow(n int) []byte {
	type obj = map[string]any
	nodes := []obj{{"id": "start", "type": "trigger", "trigger": true}}
	var edges []obj
	prev := "start"
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("step_%d", i)
		val := "{{ $trigger.seed }}"
		if i > 1 {
			val = fmt.Sprintf("{{ $%s.value + 1 }}", prev)
		}
		nodes = append(nodes, obj{"id": id, "type": "set", "parameters": obj{"values": obj{"value": val, "label": "step " + id}}})
		edges = append(edges, obj{"id": fmt.Sprintf("e%d", i), "src": prev, "dst": id})
		prev = id
	}
	raw, _ := json.Marshal(obj{"id": "bench_linear", "name": "bench: linear set nodes", "nodes": nodes, "edges": edges})
	return raw
}

// HTTPWorkflow returns a linear workflow of n http nodes, each a GET of url:
// every node a hop of its own (http nodes are never fused).
func HTTPWorkflow(n int, url string) []byte {
	type obj = map[string]any
	nodes := []obj{{"id": "start", "type": "trigger", "trigger": true}}
	var edges []obj
	prev := "start"
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("call_%d", i)
		nodes = append(nodes, obj{"id": id, "type": "http", "parameters": obj{"method": "GET", "url": url}})
		edges = append(edges, obj{"id": fmt.Sprintf("e%d", i), "src": prev, "dst": id})
		prev = id
	}
	raw, _ := json.Marshal(obj{"id": "bench_http", "name": "bench: linear http nodes", "nodes": nodes, "edges": edges})
	return raw
}

// Config is one benchmark run.
type Config struct {
	// Executions is how many executions to run. Default 10,000.
	Executions int
	// InFlight is how many executions run at once. Default 1,000.
	InFlight int
	// Progress, when set, receives a line about progress every second.
	Progress io.Writer
	// Stall, for RunWatching: fail when no execution completes for this
	// long (no worker running, say). Default 30s.
	Stall time.Duration
	// Starters, for RunWatching, is how many executions are being started
	// at once, as a server taking triggers from many clients starts them.
	// Default 64, at most InFlight. A start is a Redis round trip and a
	// confirmed publish, and starts published while a confirm is awaited
	// share a RabbitMQ message: too few starters hold the start rate, and
	// the starts per RabbitMQ message, below what the workers could take
	// (with 8, RabbitMQ did about 1.6 times the work per node of the fused
	// chain: docs/benchmarks.md, round 13).
	Starters int
	// Start, for Run, starts execution id with input in place of publishing
	// its first messages (client.Start): a server's bench enqueues it in its
	// store, for its dispatcher. Run follows id before calling it. Default
	// nil: Run publishes them itself.
	Start func(ctx context.Context, id string, input any) error
	// IDs, for Run, names executions ("bench_<start>_<i>" by default).
	IDs func(i int) string
}

// DefaultStarters is Config.Starters' default.
const DefaultStarters = 64

// Result summarises a run.
type Result struct {
	Executions     int           `json:"executions"`
	NodeExecutions int           `json:"node_executions"`
	Elapsed        time.Duration `json:"elapsed_ns"`
	NodesPerSecond float64       `json:"node_executions_per_second"`
	// HopP50 and HopP99 are per-node latencies: from the previous node's
	// success (the trigger's, for the first) to this node's success, as the
	// engine timestamps them: queueing, handling and publishing included.
	HopP50 time.Duration `json:"hop_p50_ns"`
	HopP99 time.Duration `json:"hop_p99_ns"`
	// Statuses is how many status messages RunWatching consumed: one per
	// hop (a node's, or a fused hop's, statuses), the trigger's, and the
	// running statuses published alone (nodes running past the threshold).
	Statuses int `json:"status_messages,omitempty"`
	// ExecP50 and ExecP99 are end-to-end latencies of an execution: from
	// the trigger's success to the last node's.
	ExecP50 time.Duration `json:"execution_p50_ns,omitempty"`
	ExecP99 time.Duration `json:"execution_p99_ns,omitempty"`
	// DuplicateCompletions is how many completion messages RunWatching
	// received for executions already completed.
	DuplicateCompletions int `json:"duplicate_completions,omitempty"`
	// PeakRSS is this process's peak resident set size.
	PeakRSS   uint64 `json:"peak_rss_bytes"`
	Failed    int    `json:"failed_executions"`
	GoMaxProc int    `json:"gomaxprocs"`
	// Starters is RunWatching's Config.Starters, its default applied.
	Starters int `json:"starters,omitempty"`
}

// Run drives cfg.Executions executions of wf through b (whose workers must be
// running) and measures them.
func Run(ctx context.Context, b broker.Broker, e *engine.Engine, wf *engine.Workflow, cfg Config) (*Result, error) {
	if cfg.Executions <= 0 {
		cfg.Executions = 10000
	}
	if cfg.InFlight <= 0 {
		cfg.InFlight = 1000
	}
	var (
		mu     sync.Mutex
		hops   = make([]time.Duration, 0, cfg.Executions*(len(wf.Def.Nodes)-1))
		done   atomic.Int64
		failed atomic.Int64
		nodes  atomic.Int64
		first  error
	)
	stopProgress := reportCount(cfg.Progress, "executions", cfg.Executions, &done)
	defer stopProgress()
	sem := make(chan struct{}, cfg.InFlight)
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < cfg.Executions && ctx.Err() == nil; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			var local []time.Duration
			last := time.Time{}
			// Hops are measured between the times the engine reports
			// successes, not when this follower reads them: followers read
			// in bursts.
			onStatus := func(s *message.NodeStatus) {
				if s.Status != message.StatusSuccess {
					return
				}
				if !last.IsZero() {
					local = append(local, s.ExecutedAt.Sub(last))
					nodes.Add(1)
				}
				last = s.ExecutedAt
			}
			id := fmt.Sprintf("bench_%d_%d", start.UnixNano(), i)
			if cfg.IDs != nil {
				id = cfg.IDs(i)
			}
			comp, err := run(ctx, b, e, wf, id, map[string]any{"seed": i}, onStatus, cfg.Start)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if first == nil {
					first = err
				}
				return
			}
			if comp.Status != message.CompletionCompleted {
				failed.Add(1)
			}
			hops = append(hops, local...)
			done.Add(1)
		}(i)
	}
	wg.Wait()
	elapsed := time.Since(start)
	if first != nil {
		return nil, first
	}
	return measured(int(done.Load()), int(nodes.Load()), elapsed, hops, int(failed.Load())), nil
}

// measured is the Result Run and RunWatching share: executions done, n
// node executions in elapsed, the percentiles of hops (sorted here),
// failed executions, and this process's peak RSS and GOMAXPROCS.
func measured(executions, n int, elapsed time.Duration, hops []time.Duration, failed int) *Result {
	sort.Slice(hops, func(i, j int) bool { return hops[i] < hops[j] })
	return &Result{
		Executions:     executions,
		NodeExecutions: n,
		Elapsed:        elapsed,
		NodesPerSecond: float64(n) / elapsed.Seconds(),
		HopP50:         Percentile(hops, 0.50),
		HopP99:         Percentile(hops, 0.99),
		PeakRSS:        PeakRSS(),
		Failed:         failed,
		GoMaxProc:      runtime.GOMAXPROCS(0),
	}
}

// run is client.Run, with start (when not nil) in place of client.Start.
func run(ctx context.Context, b broker.Broker, e *engine.Engine, wf *engine.Workflow, id string, input any,
	onStatus func(*message.NodeStatus), start func(context.Context, string, any) error) (*message.Completion, error) {
	if start == nil {
		return client.Run(ctx, b, e, wf, id, input, onStatus)
	}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, err := b.Follow(fctx, id)
	if err != nil {
		return nil, err
	}
	if err := start(ctx, id, input); err != nil {
		return nil, err
	}
	return client.Wait(ctx, events, onStatus)
}

// RunWatching drives cfg.Executions executions of wf through b (whose
// workers must be running) and measures them, like Run; but rather than
// following each execution, which on RabbitMQ binds a queue of its own per
// execution and costs the broker more than the work measured, it consumes
// the Status and Completion topics as a master does. It takes every message
// on them, so it needs a deployment (a prefix) of its own; messages of other
// executions are dropped.
//
// Every node of wf must succeed once per execution, as in LinearWorkflow:
// the hops of an execution are the intervals between its successes in time
// order, as the engine timestamps them.
func RunWatching(ctx context.Context, b broker.Broker, e *engine.Engine, wf *engine.Workflow, cfg Config) (*Result, error) {
	if cfg.Executions <= 0 {
		cfg.Executions = 10000
	}
	if cfg.InFlight <= 0 {
		cfg.InFlight = 1000
	}
	if cfg.Stall <= 0 {
		cfg.Stall = 30 * time.Second
	}
	if cfg.Starters <= 0 {
		cfg.Starters = DefaultStarters
	}
	cfg.Starters = min(cfg.Starters, cfg.InFlight)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	runID := fmt.Sprintf("bench_%d_", time.Now().UnixNano())
	perExec := len(wf.Def.Nodes) // successes per execution, the trigger's included
	var (
		mu        sync.Mutex
		successes = make(map[string][]time.Time, cfg.Executions)
		nsucc     int
		completed = make(map[string]bool, cfg.Executions)
		dups      int
		failed    int
		statuses  atomic.Int64
		done      atomic.Int64
		lastDone  atomic.Int64 // when the last execution completed, Unix ns
		finished  = make(chan struct{})
		allStatus = make(chan struct{})
		sem       = make(chan struct{}, cfg.InFlight)
	)
	var consumers sync.WaitGroup
	consume := func(topic broker.Topic, opts broker.ConsumeOptions, h broker.Handler) {
		consumers.Go(func() {
			if err := b.Consume(ctx, topic, opts, h); err != nil && ctx.Err() == nil {
				cancel(fmt.Errorf("bench: consume %s: %w", topic, err))
			}
		})
	}
	consume(broker.Status, broker.ConsumeOptions{Concurrency: 2, Prefetch: 2000}, func(_ context.Context, d *broker.Delivery) error {
		ss := message.StatusesOf(d.Body)
		if len(ss) == 0 || !strings.HasPrefix(ss[0].ExecutionID, runID) {
			return nil
		}
		statuses.Add(1) // status messages, each one hop's statuses
		for _, s := range ss {
			if s.Status != message.StatusSuccess {
				continue
			}
			mu.Lock()
			successes[s.ExecutionID] = append(successes[s.ExecutionID], s.ExecutedAt)
			if nsucc++; nsucc == cfg.Executions*perExec {
				close(allStatus)
			}
			mu.Unlock()
		}
		return nil
	})
	consume(broker.Completion, broker.ConsumeOptions{Concurrency: 1, Prefetch: 1000}, func(_ context.Context, d *broker.Delivery) error {
		c, ok := d.Body.(*message.Completion)
		if !ok || !strings.HasPrefix(c.ExecutionID, runID) {
			return nil
		}
		mu.Lock()
		if completed[c.ExecutionID] {
			dups++
			mu.Unlock()
			return nil
		}
		completed[c.ExecutionID] = true
		if c.Status != message.CompletionCompleted {
			failed++
		}
		mu.Unlock()
		lastDone.Store(time.Now().UnixNano())
		<-sem
		if done.Add(1) == int64(cfg.Executions) {
			close(finished)
		}
		return nil
	})

	start := time.Now()
	lastDone.Store(start.UnixNano())
	stopProgress := reportCount(cfg.Progress, "executions", cfg.Executions, &done)
	defer stopProgress()
	// Several starters: one start is a Redis round trip and a confirmed
	// publish, and one at a time would hold the rate below the workers'.
	var next atomic.Int64
	var starters sync.WaitGroup
	for range cfg.Starters {
		starters.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= cfg.Executions {
					return
				}
				select {
				case sem <- struct{}{}:
				case <-ctx.Done():
					return
				}
				id := runID + strconv.Itoa(i)
				if err := client.Start(ctx, b, e, wf, id, map[string]any{"seed": i}); err != nil {
					cancel(fmt.Errorf("bench: %w", err))
					return
				}
			}
		})
	}
	stall := time.NewTicker(time.Second)
	defer stall.Stop()
wait:
	for {
		select {
		case <-finished:
			break wait
		case <-ctx.Done():
			starters.Wait()
			consumers.Wait()
			return nil, context.Cause(ctx)
		case <-stall.C:
			if since := time.Since(time.Unix(0, lastDone.Load())); since > cfg.Stall {
				cancel(fmt.Errorf("bench: no execution completed for %v (%d of %d completed): are workers running on this broker, with this prefix?",
					since.Round(time.Second), done.Load(), cfg.Executions))
			}
		}
	}
	elapsed := time.Since(start)
	// Statuses are published before their execution's completion but come
	// from another queue: wait for the last ones.
	select {
	case <-allStatus:
	case <-time.After(cfg.Stall):
	case <-ctx.Done():
	}
	cancel(nil)
	starters.Wait()
	consumers.Wait()

	mu.Lock()
	defer mu.Unlock()
	hops := make([]time.Duration, 0, cfg.Executions*(perExec-1))
	execs := make([]time.Duration, 0, len(successes))
	for _, ts := range successes {
		sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
		for i := 1; i < len(ts); i++ {
			hops = append(hops, ts[i].Sub(ts[i-1]))
		}
		if len(ts) > 1 {
			execs = append(execs, ts[len(ts)-1].Sub(ts[0]))
		}
	}
	sort.Slice(execs, func(i, j int) bool { return execs[i] < execs[j] })
	// Node executions: those seen succeeding, the triggers' not counted.
	res := measured(int(done.Load()), len(hops), elapsed, hops, failed)
	res.ExecP50, res.ExecP99 = Percentile(execs, 0.50), Percentile(execs, 0.99)
	res.Statuses, res.DuplicateCompletions, res.Starters = int(statuses.Load()), dups, cfg.Starters
	return res, nil
}

// every calls f every d until the returned stop is called; stop waits for
// a call in progress.
func every(d time.Duration, f func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				f()
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// reportCount writes "done/total what (percent)" to w every second, until
// the returned stop is called; with no w it does nothing.
func reportCount(w io.Writer, what string, total int, done *atomic.Int64) (stop func()) {
	if w == nil {
		return func() {}
	}
	return every(time.Second, func() {
		d := done.Load()
		fmt.Fprintf(w, "  %d/%d %s (%.0f%%)\n", d, total, what, 100*float64(d)/float64(total))
	})
}

// Percentile returns the q-th quantile (0..1) of sorted durations.
func Percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	if i < 0 {
		i = 0
	}
	return sorted[i]
}

// PeakRSS is the peak resident set size of this process.
func PeakRSS() uint64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return uint64(ru.Maxrss) * 1024 // Linux reports kilobytes
}

// Print writes r for people.
func (r *Result) Print(w io.Writer, title string) {
	fmt.Fprintf(w, "%s\n", title)
	fmt.Fprintf(w, "  executions:       %d (%d not completed)\n", r.Executions, r.Failed)
	fmt.Fprintf(w, "  node executions:  %d in %s = %.0f /s\n", r.NodeExecutions, r.Elapsed.Round(time.Millisecond), r.NodesPerSecond)
	fmt.Fprintf(w, "  per-node latency: p50 %s, p99 %s\n", r.HopP50.Round(time.Microsecond), r.HopP99.Round(time.Microsecond))
	if r.ExecP50 > 0 {
		fmt.Fprintf(w, "  execution latency (trigger to last node): p50 %s, p99 %s\n", r.ExecP50.Round(time.Microsecond), r.ExecP99.Round(time.Microsecond))
	}
	if r.Statuses > 0 {
		fmt.Fprintf(w, "  status messages:  %d = %.0f /s (%.2f per node)\n", r.Statuses, float64(r.Statuses)/r.Elapsed.Seconds(), float64(r.Statuses)/float64(max(r.NodeExecutions, 1)))
	}
	if r.DuplicateCompletions > 0 {
		fmt.Fprintf(w, "  duplicate completions: %d\n", r.DuplicateCompletions)
	}
	fmt.Fprintf(w, "  peak RSS:         %.1f MiB (GOMAXPROCS %d)\n", float64(r.PeakRSS)/(1<<20), r.GoMaxProc)
}
