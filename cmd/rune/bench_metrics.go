package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"syscall"
	"time"

	"github.com/rune-org/rune/bench"
	"github.com/rune-org/rune/embedded"
	"github.com/rune-org/rune/metrics"
)

// metricsComparison is what rune bench --compare-metrics measured.
type metricsComparison struct {
	Rounds int `json:"rounds"`
	// Off and On are the node rates of each round, metrics off and on.
	Off []float64 `json:"off_node_executions_per_second"`
	On  []float64 `json:"on_node_executions_per_second"`
	// OffCPU and OnCPU are this process's CPU time per node execution in
	// each round, in microseconds: on a loaded machine they vary far less
	// than the rates.
	OffCPU []float64 `json:"off_cpu_us_per_node"`
	OnCPU  []float64 `json:"on_cpu_us_per_node"`
	// Change is median(On) / median(Off) − 1; CPUChange the same of the
	// CPU times.
	Change    float64 `json:"change"`
	CPUChange float64 `json:"cpu_change"`
}

// benchMetricsCompare runs the embedded linear bench rounds times with
// metrics off and on, alternating (so that the machine's drift hits both
// alike), each on a fresh runtime, and reports both medians.
func benchMetricsCompare(ctx context.Context, env *cliEnv, rounds, execs, inflight, nodes, concurrency int, asJSON bool) error {
	rep := metricsComparison{Rounds: rounds}
	fmt.Fprintf(env.stderr, "rune bench: %d rounds of %d executions of %d set nodes, metrics off then on, embedded runtime\n", rounds, execs, nodes)
	for r := range rounds {
		for _, on := range []bool{false, true} {
			var rec *metrics.Recorder
			if on {
				rec = metrics.New(metrics.Config{})
			}
			rt, err := embedded.New(embedded.Options{Logger: slog.New(slog.DiscardHandler), Concurrency: concurrency, Metrics: rec})
			if err != nil {
				return err
			}
			wf, err := rt.Engine.Compile(bench.LinearWorkflow(nodes))
			if err != nil {
				rt.Close()
				return err
			}
			cpu0 := cpuTime()
			res, err := bench.Run(ctx, rt.Broker, rt.Engine, wf, bench.Config{Executions: execs, InFlight: inflight, Progress: io.Discard})
			cpu := float64((cpuTime() - cpu0).Microseconds())
			rt.Close()
			if err != nil {
				return err
			}
			perNode := cpu / float64(max(res.NodeExecutions, 1))
			if on {
				rep.On, rep.OnCPU = append(rep.On, res.NodesPerSecond), append(rep.OnCPU, perNode)
			} else {
				rep.Off, rep.OffCPU = append(rep.Off, res.NodesPerSecond), append(rep.OffCPU, perNode)
			}
			fmt.Fprintf(env.stderr, "round %d, metrics %-3s: %.0f node executions/s, %.1f µs CPU per node\n", r+1, onOff(on), res.NodesPerSecond, perNode)
		}
	}
	off, on := median(rep.Off), median(rep.On)
	rep.Change = on/off - 1
	offCPU, onCPU := median(rep.OffCPU), median(rep.OnCPU)
	rep.CPUChange = onCPU/offCPU - 1
	if asJSON {
		return json.NewEncoder(env.stdout).Encode(rep)
	}
	fmt.Fprintf(env.stdout, "metrics off: %.0f node executions/s, %.1f µs CPU per node (medians of %d)\n", off, offCPU, rounds)
	fmt.Fprintf(env.stdout, "metrics on:  %.0f node executions/s, %.1f µs CPU per node\n", on, onCPU)
	fmt.Fprintf(env.stdout, "change:      %+.1f %% node rate, %+.1f %% CPU per node\n", 100*rep.Change, 100*rep.CPUChange)
	return nil
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
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
