package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"

	"github.com/rune-org/rune/bench"
	"github.com/rune-org/rune/embedded"
)

func cmdBench(ctx context.Context, env *cliEnv, args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	execs := fs.Int("executions", 20000, "executions to run")
	inflight := fs.Int("inflight", 1000, "executions running at once")
	nodes := fs.Int("nodes", 10, "set nodes per execution (a linear workflow)")
	concurrency := fs.Int("concurrency", 0, "worker concurrency (default: the worker default)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "Usage: rune bench [flags]\n\nRuns executions of a linear workflow of set nodes on the embedded runtime and\nreports node executions per second, per-node latency p50/p99 and peak memory.")
		fs.PrintDefaults()
	}
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	if *execs <= 0 || *inflight <= 0 || *nodes <= 0 {
		return usagef("--executions, --inflight and --nodes must be positive")
	}
	rt, err := embedded.New(embedded.Options{Logger: cliLogger(env), Concurrency: *concurrency})
	if err != nil {
		return err
	}
	defer rt.Close()
	wf, err := rt.Engine.Compile(bench.LinearWorkflow(*nodes))
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stderr, "rune bench: %d executions of %d set nodes, %d in flight, embedded runtime\n", *execs, *nodes, *inflight)
	res, err := bench.Run(ctx, rt.Broker, rt.Engine, wf, bench.Config{Executions: *execs, InFlight: *inflight, Progress: env.stderr})
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(env.stdout).Encode(res)
	}
	res.Print(env.stdout, "embedded runtime, linear workflow of set nodes")
	return nil
}
