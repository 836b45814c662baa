package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"syscall"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/rune-org/rune/embedded"
	"github.com/rune-org/rune/metrics"
	"github.com/rune-org/rune/tracing"
)

// instrumentation is one configuration rune bench --compare-metrics runs.
type instrumentation struct {
	Name string `json:"name"`
	// Rates are the node executions per second of each round; CPU this
	// process's CPU time per node execution, in microseconds (on a loaded
	// machine it varies far less than the rate).
	Rates []float64 `json:"node_executions_per_second"`
	CPU   []float64 `json:"cpu_us_per_node"`
	// Change and CPUChange compare the medians with the first configuration's.
	Change    float64 `json:"change"`
	CPUChange float64 `json:"cpu_change"`

	metrics, spans bool
}

// benchMetricsCompare runs the embedded linear bench rounds times in each
// of three configurations, in turn (so that the machine's drift hits all
// alike), each on a fresh runtime: instrumentation off; metrics on and
// tracing as a worker runs it without an OTLP endpoint (no Tracer); and
// metrics on with every span made and dropped (a TracerProvider with no
// exporter: what tracing costs before the export).
func benchMetricsCompare(ctx context.Context, env *Env, rounds, execs, inflight, nodes, concurrency int, asJSON bool) error {
	confs := []*instrumentation{
		{Name: "off"},
		{Name: "metrics on, tracing without endpoint", metrics: true},
		{Name: "metrics on, spans made, no exporter", metrics: true, spans: true},
	}
	fmt.Fprintf(env.Stderr, "rune bench: %d rounds of %d executions of %d set nodes in %d configurations, embedded runtime\n", rounds, execs, nodes, len(confs))
	for r := range rounds {
		for _, c := range confs {
			opts := embedded.Options{Logger: slog.New(slog.DiscardHandler), Concurrency: concurrency}
			if c.metrics {
				opts.Metrics = metrics.New(metrics.Config{})
			}
			if c.spans {
				opts.Tracer = tracing.New(sdktrace.NewTracerProvider())
			}
			rt, err := embedded.New(opts)
			if err != nil {
				return err
			}
			wf, err := rt.Engine.Compile(LinearWorkflow(nodes))
			if err != nil {
				rt.Close()
				return err
			}
			cpu0 := cpuTime()
			res, err := Run(ctx, rt.Broker, rt.Engine, wf, Config{Executions: execs, InFlight: inflight, Progress: io.Discard})
			cpu := float64((cpuTime() - cpu0).Microseconds())
			rt.Close()
			if err != nil {
				return err
			}
			perNode := cpu / float64(max(res.NodeExecutions, 1))
			c.Rates, c.CPU = append(c.Rates, res.NodesPerSecond), append(c.CPU, perNode)
			fmt.Fprintf(env.Stderr, "round %d, %s: %.0f node executions/s, %.1f µs CPU per node\n", r+1, c.Name, res.NodesPerSecond, perNode)
		}
	}
	base := confs[0]
	for _, c := range confs {
		c.Change = median(c.Rates)/median(base.Rates) - 1
		c.CPUChange = median(c.CPU)/median(base.CPU) - 1
	}
	if asJSON {
		return json.NewEncoder(env.Stdout).Encode(confs)
	}
	for _, c := range confs {
		fmt.Fprintf(env.Stdout, "%-38s %7.0f node executions/s (%+5.1f %%), %5.1f µs CPU per node (%+5.1f %%)\n",
			c.Name+":", median(c.Rates), 100*c.Change, median(c.CPU), 100*c.CPUChange)
	}
	fmt.Fprintf(env.Stdout, "(medians of %d rounds)\n", rounds)
	return nil
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// cpuTime is the CPU time this process has used (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
