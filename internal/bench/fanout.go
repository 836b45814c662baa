package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/client"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/message"
)

// FanoutWorkflow is split over $trigger.items → set → aggregator.
func FanoutWorkflow() []byte {
	return []byte(`{"id":"bench_fanout","name":"bench: split, set, aggregator","nodes":[
		{"id":"start","type":"trigger","trigger":true},
		{"id":"each","type":"split","parameters":{"input_array":"{{ $trigger.items }}"}},
		{"id":"work","type":"set","parameters":{"values":{"double":"{{ $item.n * 2 }}"}}},
		{"id":"gather","type":"aggregator","parameters":{"value":"{{ $work.double }}","timeout":3600}}],
		"edges":[{"id":"e1","src":"start","dst":"each"},{"id":"e2","src":"each","dst":"work"},{"id":"e3","src":"work","dst":"gather"}]}`)
}

// FanoutConfig is one fan-out run.
type FanoutConfig struct {
	// Items is the number of items split. Default 10,000.
	Items int
	// Sample, when set, is called about every 200 ms during the run; the
	// largest values it returns are reported (worker RSS, Redis memory).
	Sample func() (workerRSS, redisBytes uint64)
	// Progress, when set, receives the aggregator's progress once a second.
	Progress io.Writer
}

// FanoutResult summarises a fan-out run.
type FanoutResult struct {
	Items   int           `json:"items"`
	Elapsed time.Duration `json:"elapsed_ns"`
	Status  string        `json:"status"`
	// BranchBytes is the JSON size of one branch message.
	BranchBytes   int    `json:"branch_message_bytes"`
	PeakWorkerRSS uint64 `json:"peak_worker_rss_bytes"`
	PeakRedis     uint64 `json:"peak_redis_bytes"`
}

// Fanout runs one execution of FanoutWorkflow over cfg.Items items through
// b (whose workers must be running) and measures it.
func Fanout(ctx context.Context, b broker.Broker, e *engine.Engine, cfg FanoutConfig) (*FanoutResult, error) {
	if cfg.Items <= 0 {
		cfg.Items = 10000
	}
	wf, err := e.Compile(FanoutWorkflow())
	if err != nil {
		return nil, err
	}
	items := fanoutItems(cfg.Items)
	res := &FanoutResult{Items: cfg.Items}
	var mu sync.Mutex
	sample := func() {
		if cfg.Sample == nil {
			return
		}
		rss, rd := cfg.Sample()
		mu.Lock()
		res.PeakWorkerRSS = max(res.PeakWorkerRSS, rss)
		res.PeakRedis = max(res.PeakRedis, rd)
		mu.Unlock()
	}
	stopSampling := every(200*time.Millisecond, sample)
	step := max(cfg.Items/10, 1)
	var shown int
	onStatus := func(s *message.NodeStatus) {
		if cfg.Progress == nil || s.NodeID != "gather" || s.Status != message.StatusWaiting {
			return
		}
		n, _ := toInt(s.Details["processed"])
		if n/step > shown {
			shown = n / step
			fmt.Fprintf(cfg.Progress, "  %d/%d items gathered\n", n, cfg.Items)
		}
	}
	start := time.Now()
	comp, err := client.Run(ctx, b, e, wf, engine.NewExecutionID(start), map[string]any{"items": items}, onStatus)
	res.Elapsed = time.Since(start)
	stopSampling()
	sample()
	if err != nil {
		return nil, err
	}
	res.Status = comp.Status
	res.BranchBytes = branchBytes(cfg.Items)
	return res, nil
}

// branchBytes is the encoded size of a branch message of a split over n
// items, as the engine builds it: the split runs on an in-process engine
// with the same reference threshold the distributed runtime uses.
func branchBytes(n int) int {
	size := 0
	_ = probe(func(e *engine.Engine) error {
		wf, err := e.Compile(FanoutWorkflow())
		if err != nil {
			return err
		}
		var start, split engine.Effects
		if err := e.Start(context.Background(), wf, "size_probe", map[string]any{"items": fanoutItems(n)}, &start); err != nil {
			return err
		}
		if err := e.Handle(context.Background(), engine.Delivery{}, start.Next[0].Msg, &split); err != nil || len(split.Next) == 0 {
			return err
		}
		raw, err := json.Marshal(split.Next[0].Msg)
		size = len(raw)
		return err
	})
	return size
}

func fanoutItems(n int) []any {
	items := make([]any, n)
	for i := range items {
		items[i] = map[string]any{"n": i}
	}
	return items
}

func toInt(v any) (int, bool) {
	switch n := v.(type) {
	case int:
		return n, true
	case float64:
		return int(n), true
	}
	return 0, false
}

// Print writes r for people.
func (r *FanoutResult) Print(w io.Writer) {
	fmt.Fprintf(w, "fan-out: split over %d items → set → aggregator\n", r.Items)
	fmt.Fprintf(w, "  status:          %s in %s (%.0f items/s)\n", r.Status, r.Elapsed.Round(time.Millisecond), float64(r.Items)/r.Elapsed.Seconds())
	fmt.Fprintf(w, "  branch message:  %d bytes\n", r.BranchBytes)
	if r.PeakWorkerRSS > 0 || r.PeakRedis > 0 {
		fmt.Fprintf(w, "  peak worker RSS: %.1f MiB; peak Redis memory: %.1f MiB\n", float64(r.PeakWorkerRSS)/(1<<20), float64(r.PeakRedis)/(1<<20))
	}
}
