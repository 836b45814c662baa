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

// Config is one benchmark run.
type Config struct {
	// Executions is how many executions to run. Default 10,000.
	Executions int
	// InFlight is how many executions run at once. Default 1,000.
	InFlight int
	// Progress, when set, receives a line about progress every second.
	Progress io.Writer
}

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
	// PeakRSS is this process's peak resident set size.
	PeakRSS   uint64 `json:"peak_rss_bytes"`
	Failed    int    `json:"failed_executions"`
	GoMaxProc int    `json:"gomaxprocs"`
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
	stopProgress := reportProgress(cfg, &done)
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
			comp, err := client.Run(ctx, b, e, wf, id, map[string]any{"seed": i}, onStatus)
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
	sort.Slice(hops, func(i, j int) bool { return hops[i] < hops[j] })
	n := int(nodes.Load())
	return &Result{
		Executions:     int(done.Load()),
		NodeExecutions: n,
		Elapsed:        elapsed,
		NodesPerSecond: float64(n) / elapsed.Seconds(),
		HopP50:         Percentile(hops, 0.50),
		HopP99:         Percentile(hops, 0.99),
		PeakRSS:        PeakRSS(),
		Failed:         int(failed.Load()),
		GoMaxProc:      runtime.GOMAXPROCS(0),
	}, nil
}

func reportProgress(cfg Config, done *atomic.Int64) func() {
	if cfg.Progress == nil {
		return func() {}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				d := done.Load()
				fmt.Fprintf(cfg.Progress, "  %d/%d executions (%.0f%%)\n", d, cfg.Executions, 100*float64(d)/float64(cfg.Executions))
			}
		}
	}()
	return func() { close(stop); wg.Wait() }
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
	fmt.Fprintf(w, "  peak RSS:         %.1f MiB (GOMAXPROCS %d)\n", float64(r.PeakRSS)/(1<<20), r.GoMaxProc)
}
