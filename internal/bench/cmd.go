package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/rune-org/rune/broker/amqp"
	coordredis "github.com/rune-org/rune/coord/redis"
	"github.com/rune-org/rune/embedded"
	"github.com/rune-org/rune/internal/sqlitedb"
	"github.com/rune-org/rune/worker"
)

// Defaults of rune bench.
const (
	benchEmbeddedExecutions    = 20000
	benchDistributedExecutions = 3000
)

// Command adds the flags of `rune bench` to fs, which holds the rune
// command's flags of a deployment already, and returns what runs the bench
// once fs is parsed, on the deployment those flags name. An error it
// returns is a UsageError when the flags are wrong.
func Command(fs *flag.FlagSet, env *Env) func(ctx context.Context, srv Deployment) error {
	execs := fs.Int("executions", 0, fmt.Sprintf("executions to run (default %d embedded, %d distributed)", benchEmbeddedExecutions, benchDistributedExecutions))
	inflight := fs.Int("inflight", 1000, "executions running at once")
	starters := fs.Int("starters", DefaultStarters, "distributed: executions being started at once (each a Redis round trip and a confirmed publish), at most --inflight")
	nodes := fs.Int("nodes", 10, "set nodes per execution (a linear workflow)")
	concurrency := fs.Int("concurrency", 0, "handlers per worker: the embedded worker's, the spawned workers' (their --concurrency), and the raw ceiling's per worker (default 128 × GOMAXPROCS, the worker default)")
	prefetch := fs.Int("prefetch", 0, "distributed, with --spawn-workers: the workers' --prefetch (default: the worker default)")
	spawn := fs.Int("spawn-workers", 0, "distributed: start this many `rune worker` processes (this binary, same flags) for the run and stop them at the end")
	idle := fs.Int("idle-executions", 200, "distributed: then run this many executions one at a time, for the per-node latency of an idle system (0: skip)")
	rawHops := fs.Int("raw-hops", 0, "distributed: hops of the raw RabbitMQ ceiling (default: as many as node executions; negative: skip)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	chain := fs.String("chain", "set", "linear, distributed: the nodes of the chain, set (pure) or http (a GET of an HTTP server in this process per node, every node a hop); all: with --spawn-workers, the set chain fused, the set chain unfused (workers with --no-fuse) and the http chain in one run, then a table of the three")
	base := fs.String("base", "", "with --chain all: first run this rune binary's bench (an earlier build) on the set chain with the same --executions, --inflight, --nodes, --concurrency, --prefetch and --spawn-workers, and report each chain's rate over it (× base); it starts executions as that build does (builds before --starters: 8 at once)")
	noFuse := fs.Bool("no-fuse", false, "distributed, with --spawn-workers: start the workers with --no-fuse (every node a hop of its own)")
	compareMetrics := fs.Int("compare-metrics", 0, "linear, embedded: run this many rounds with instrumentation off, metrics on, and metrics and spans on (no exporter), in turn, and report node rate and CPU per node of each (0: off)")
	mode := fs.String("mode", "linear", "linear (executions of set nodes), embedded-server (the durable embedded `rune server`, in this process: node executions per second and the history's lag at the end), fanout (one split over --items items), campaign (the durable embedded rune server and the catcher in this process: --subscribers imported, one campaign with preferences on, then the same campaign bare; sends per second, exactness checked), timers (distributed: --executions waiting --wait each, started --start-rate per second, then a backlog of --pending timers), server (rune server on --postgres: triggers accepted per second over HTTP, trigger → first node latency, statuses persisted per second), webhooks (rune server on --postgres: signed webhook requests accepted per second into executions, replays starting none), or chaos (distributed: --executions of an http, split, aggregator and wait workflow on --spawn-workers workers and a scheduler, with a fault of --faults every --fault-every)")
	postgresURL := fs.String("postgres", env.Getenv("RUNE_POSTGRES_URL"), "server: PostgreSQL URL (env RUNE_POSTGRES_URL); the bench uses a fresh schema of its own")
	clients := fs.Int("clients", 32, "server: HTTP clients triggering at once")
	faults := fs.String("faults", strings.Join(chaosFaults, ","), "chaos: the faults to inject, in turn")
	faultEvery := fs.Duration("fault-every", 5*time.Second, "chaos: the pause between faults")
	stopFor := fs.Duration("stop-for", 5*time.Second, "chaos: how long stop-scheduler freezes the scheduler (past its 3 s lease)")
	items := fs.Int("items", 10000, "fanout: items split")
	wait := fs.Duration("wait", 2*time.Second, "timers: how long each execution waits")
	pending := fs.Int("pending", 1000000, "timers: pending timers in the backlog (0: skip the backlog)")
	rate := fs.Int("rate", 5000, "timers: backlog timers coming due per second while lateness is measured")
	httpProbe := fs.String("http-probe", "", "internal, for --chain http: make 200 GETs of this URL one at a time, 1 ms apart, and print their p50 in nanoseconds (the bench runs it in a process of its own)")
	durable := fs.Bool("durable", false, "linear, embedded: run the embedded runtime on SQLite (a temporary runtime.db), as `rune server` does, without the server's store")
	memoryRuntime := fs.Bool("memory-runtime", false, "embedded-server: run the runtime in memory (the store stays on SQLite), as `rune server` did before it was durable")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of this process's run to this file (the bench, and the embedded runtime or server when it runs in this process)")
	benchData := fs.String("data", "", "embedded-server, campaign: the data directory (default: a temporary one, removed at the end)")
	taskSleep := fs.Duration("task-sleep", 0, "--chain http (linear distributed, embedded-server): the in-process endpoint sleeps this long per call, a task's work; with --inflight 1 the bench reports each execution's time and the overhead per step (time minus the sleeps, over the steps). Windmill's 400 tasks: --nodes 400 --task-sleep 10ms --executions 1 --inflight 1; the 3-step overhead: --nodes 3 --executions 200 --inflight 1")
	duration := fs.Duration("duration", 0, "server: trigger for this long (at --start-rate per second, or as fast as accepted) instead of --executions, printing the history's lag each second (0: off)")
	campaignSubs := fs.Int("subscribers", 100000, "campaign: subscribers imported and sent to")
	optedOutPct := fs.Int("opted-out-percent", 10, "campaign: the share of subscribers (0 to 50) whose preferences turn the campaign's category off")
	channel := fs.String("channel", "email", "campaign: email or sms")
	bareFirst := fs.Bool("bare-first", false, "campaign: run the bare campaign first (the second runs on a store holding the first one's history)")
	startRate := fs.Int("start-rate", 0, "timers, server with --duration: executions started per second, paced evenly (timers: so that their waits come due at that rate) (default 0: as fast as possible)")
	fs.Usage = func() {
		fmt.Fprintln(env.Stderr, `Usage: rune bench [flags]
       rune bench --amqp URL --redis URL [--prefix P] [--spawn-workers N] [flags]

Runs executions of a linear workflow of set nodes and reports node executions
per second, per-node latency p50/p99 and peak memory.

Without --amqp it measures the embedded runtime, in this process.

With --amqp and --redis (or RUNE_AMQP_URL, RUNE_REDIS_URL) it measures the
distributed runtime: it starts the executions on RUNNING workers, e.g.

    rune worker --amqp URL --redis URL --prefix bench &     # one or more
    rune bench  --amqp URL --redis URL --prefix bench

and watches them by consuming the prefix's workflow.node.status and
workflow.completion queues, so give the bench a --prefix no one else uses.
--spawn-workers N starts N workers itself (on a fresh prefix unless --prefix
is given, deleted at the end), so that one command measures everything.
In the same run it measures executions one at a time (the latency of an idle
system) and the raw ceiling of RabbitMQ, twice, with the bare client and as
many handlers as the workers have: one consume + one confirmed persistent
publish + one ack per hop; then the same with the workflow's own message sizes
and as many status messages per hop as a node sends, with as many messages in
flight as executions. It prints the node rate over each: the first is
RabbitMQ's bare ceiling; the second moves the same bytes as Rune does, so
what the node rate misses of it is the engine's own cost (Redis, encoding,
the nodes).`)
		fs.PrintDefaults()
	}
	return func(ctx context.Context, srv Deployment) error {
		if *taskSleep < 0 || (*taskSleep > 0 && *chain != "http") {
			return usagef("--task-sleep %v: want a duration not negative, with --chain http", *taskSleep)
		}
		if *execs < 0 || *inflight <= 0 || *nodes <= 0 || *concurrency < 0 || *prefetch < 0 || *spawn < 0 || *idle < 0 || *startRate < 0 || *duration < 0 {
			return usagef("--executions, --inflight and --nodes must be positive; --concurrency, --prefetch, --spawn-workers, --idle-executions, --start-rate and --duration not negative")
		}
		if *httpProbe != "" {
			p50, err := timeGETs(ctx, *httpProbe, time.Millisecond)
			if err != nil {
				return err
			}
			fmt.Fprintln(env.Stdout, int64(p50))
			return nil
		}
		if *cpuProfile != "" {
			f, err := os.Create(*cpuProfile)
			if err != nil {
				return err
			}
			defer f.Close()
			if err := pprof.StartCPUProfile(f); err != nil {
				return err
			}
			defer pprof.StopCPUProfile()
		}
		switch *mode {
		case "linear":
		case "embedded-server":
			if *execs == 0 {
				*execs = benchEmbeddedExecutions
			}
			if *chain != "set" && *chain != "http" {
				return usagef("--chain %q: --mode embedded-server wants set or http", *chain)
			}
			return benchEmbeddedServer(ctx, env, embeddedServerBench{executions: *execs, inflight: *inflight, nodes: *nodes, concurrency: *concurrency,
				data: *benchData, asJSON: *asJSON, memory: *memoryRuntime, chain: *chain, taskSleep: *taskSleep})
		case "campaign":
			return benchCampaign(ctx, env, campaignBench{subscribers: *campaignSubs, optedOut: *optedOutPct, channel: *channel, concurrency: *concurrency,
				clients: max(*clients, 1), data: *benchData, asJSON: *asJSON, bareFirst: *bareFirst})
		case "fanout":
			return benchFanout(ctx, env, &srv, *items, *spawn, *concurrency, *asJSON)
		case "server":
			if *execs == 0 {
				*execs = benchDistributedExecutions
			}
			return benchServer(ctx, env, &srv, serverBench{postgresURL: *postgresURL, executions: *execs, clients: max(*clients, 1),
				idle: *idle, nodes: *nodes, concurrency: *concurrency, asJSON: *asJSON, duration: *duration, rate: *startRate})
		case "webhooks":
			if *execs == 0 {
				*execs = 5000
			}
			return benchWebhooks(ctx, env, &srv, serverBench{postgresURL: *postgresURL, executions: *execs, clients: max(*clients, 1),
				nodes: *nodes, concurrency: *concurrency, asJSON: *asJSON})
		case "timers":
			if *execs == 0 {
				*execs = 10000
			}
			return benchTimers(ctx, env, &srv, timerBench{executions: *execs, wait: *wait, startRate: *startRate, pending: *pending, rate: *rate, spawn: *spawn, concurrency: *concurrency, asJSON: *asJSON})
		case "chaos":
			if *execs == 0 {
				*execs = 1000
			}
			if *faultEvery <= 0 || *stopFor <= 0 {
				return usagef("--fault-every and --stop-for must be positive")
			}
			var list []string
			if *faults != "" {
				list = strings.Split(*faults, ",")
			}
			return benchChaos(ctx, env, &srv, chaosBench{executions: *execs, workers: *spawn, faults: list, every: *faultEvery, stopFor: *stopFor, asJSON: *asJSON})
		default:
			return usagef("--mode %q: want linear, embedded-server, campaign, fanout, timers, server, webhooks or chaos", *mode)
		}
		switch *chain {
		case "set", "http":
		case "all":
			if srv.AMQPURL == "" || *spawn == 0 || *noFuse {
				return usagef("--chain all needs --amqp, --redis and --spawn-workers (it starts the workers with and without --no-fuse itself), and no --no-fuse")
			}
		default:
			return usagef("--chain %q: want set, http or all", *chain)
		}
		if *base != "" && *chain != "all" {
			return usagef("--base needs --chain all")
		}
		if srv.AMQPURL != "" {
			if *execs == 0 {
				*execs = benchDistributedExecutions
			}
			o := distributedBench{
				executions: *execs, inflight: *inflight, nodes: *nodes, concurrency: *concurrency, prefetch: *prefetch, noFuse: *noFuse, chain: *chain,
				spawn: *spawn, idle: *idle, rawHops: *rawHops, asJSON: *asJSON, base: *base, starters: *starters, taskSleep: *taskSleep,
			}
			if *chain == "all" {
				return benchChains(ctx, env, srv, o)
			}
			return benchDistributed(ctx, env, &srv, o)
		}
		if *spawn > 0 || *prefetch > 0 {
			return usagef("--spawn-workers and --prefetch need --amqp and --redis (the distributed runtime)")
		}
		if *execs == 0 {
			*execs = benchEmbeddedExecutions
		}
		if *compareMetrics > 0 {
			return benchMetricsCompare(ctx, env, *compareMetrics, *execs, *inflight, *nodes, *concurrency, *asJSON)
		}
		opts := embedded.Options{Logger: env.Logger, Concurrency: *concurrency}
		what := "embedded runtime"
		if *durable {
			dir, err := os.MkdirTemp("", "rune-bench-runtime-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			db, err := sqlitedb.Open(ctx, filepath.Join(dir, runtimeDB), sqlitedb.Options{})
			if err != nil {
				return err
			}
			defer db.Close()
			opts.DB, what = db, "durable embedded runtime (SQLite)"
		}
		rt, err := embedded.New(opts)
		if err != nil {
			return err
		}
		defer rt.Close()
		wf, err := rt.Engine.Compile(LinearWorkflow(*nodes))
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stderr, "rune bench: %d executions of %d set nodes, %d in flight, %s\n", *execs, *nodes, *inflight, what)
		res, err := Run(ctx, rt.Broker, rt.Engine, wf, Config{Executions: *execs, InFlight: *inflight, Progress: env.Stderr})
		if err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(env.Stdout).Encode(res)
		}
		res.Print(env.Stdout, what+", linear workflow of set nodes")
		return nil
	}
}

// distributedBench is the parsed flags of a distributed rune bench.
type distributedBench struct {
	executions, inflight, nodes int
	concurrency, prefetch       int
	starters                    int
	spawn, idle, rawHops        int
	asJSON                      bool
	// noFuse starts the spawned workers with --no-fuse.
	noFuse bool
	// chain is "set" or "http" ("all" is benchChains).
	chain string
	// taskSleep is how long the http chain's endpoint sleeps per call.
	taskSleep time.Duration
	// base is --base: the rune binary whose set chain benchChains measures
	// first.
	base string
}

// distributedReport is what a distributed rune bench measured.
type distributedReport struct {
	Runtime string `json:"runtime"`
	Prefix  string `json:"prefix"`
	// Workers is how many workers the bench spawned (0: they were running).
	Workers     int `json:"spawned_workers"`
	Concurrency int `json:"worker_concurrency"`
	Prefetch    int `json:"worker_prefetch,omitempty"`
	InFlight    int `json:"inflight"`
	// WorkerPeakRSS is the largest peak RSS of the spawned workers (Linux).
	WorkerPeakRSS uint64 `json:"worker_peak_rss_bytes,omitempty"`
	// WorkerCPUPerNode is the spawned workers' CPU time over the node
	// executions of the throughput run (Linux, 10 ms resolution).
	WorkerCPUPerNode time.Duration `json:"worker_cpu_per_node_ns,omitempty"`
	// CPU is the CPU time per node execution of every process of the
	// throughput run that this machine can see (Worker is WorkerCPUPerNode).
	CPU        cpuPerNode `json:"cpu_per_node"`
	Throughput *Result    `json:"throughput"`
	Idle       *Result    `json:"idle,omitempty"`
	Raw        *HopResult `json:"raw_ceiling,omitempty"`
	// Ratio is the node execution rate over the raw hop rate.
	Ratio float64 `json:"ratio_to_raw_ceiling,omitempty"`
	// Sizes are the workflow's messages; RawSame is the raw ceiling for
	// hops that move the same bytes and as many status messages, and
	// RatioSame the node rate over it: what is left is the engine's cost.
	Sizes     *Sizes     `json:"message_sizes,omitempty"`
	RawSame   *HopResult `json:"raw_ceiling_same_messages,omitempty"`
	RatioSame float64    `json:"ratio_to_raw_ceiling_same_messages,omitempty"`
	// NoFuse is whether the spawned workers ran with --no-fuse.
	NoFuse bool `json:"no_fuse"`
	// TimesBase is the set chain's node rate over --base's (--chain all).
	TimesBase float64 `json:"times_base,omitempty"`
	// Chain is the chain's node type; HTTPCallP50 is, for http, the p50 of
	// the same GET made by the bench itself: the call without Rune.
	// HTTPCallOtherP50 is that of the GET made from a process of its own,
	// 1 ms apart, as a worker makes it in the idle run: the call includes
	// waking the serving process.
	Chain            string        `json:"chain"`
	HTTPCallP50      time.Duration `json:"http_call_p50_ns,omitempty"`
	HTTPCallOtherP50 time.Duration `json:"http_call_other_process_p50_ns,omitempty"`
	// Sequence is, for executions run one at a time, each one's time and
	// the overhead per step.
	Sequence *Sequence `json:"sequence,omitempty"`
}

func benchDistributed(ctx context.Context, env *Env, srv *Deployment, o distributedBench) error {
	rep, err := measureDistributed(ctx, env, srv, o)
	if err != nil {
		return err
	}
	if o.asJSON {
		return json.NewEncoder(env.Stdout).Encode(rep)
	}
	rep.print(env.Stdout, o.nodes)
	return nil
}

// measureDistributed runs one distributed bench (workers, throughput, idle
// latency, raw ceilings) and returns what it measured.
func measureDistributed(ctx context.Context, env *Env, srv *Deployment, o distributedBench) (*distributedReport, error) {
	if err := srv.check(true); err != nil {
		return nil, err
	}
	conc := o.concurrency
	if conc == 0 {
		conc = worker.DefaultConcurrency()
	}
	rep := &distributedReport{Runtime: "distributed", Workers: o.spawn, Concurrency: conc, Prefetch: o.prefetch, InFlight: o.inflight, NoFuse: o.noFuse}
	log := env.Logger
	defer ownPrefix(env, srv, o.spawn)()
	if srv.Prefix == "" {
		fmt.Fprintln(env.Stderr, "rune bench: warning: no --prefix: the bench consumes the production workflow.node.status and workflow.completion queues")
	}
	rep.Prefix = srv.Prefix

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var workers *workerGroup
	if o.spawn > 0 {
		wargs := append(append([]string{"worker"}, srv.args()...),
			"--concurrency", strconv.Itoa(conc))
		if o.prefetch > 0 {
			wargs = append(wargs, "--prefetch", strconv.Itoa(o.prefetch))
		}
		if o.noFuse {
			wargs = append(wargs, "--no-fuse")
		}
		var err error
		if workers, err = spawnWorkers(o.spawn, wargs, cancel); err != nil {
			return nil, err
		}
		defer workers.stop(env)
		fmt.Fprintf(env.Stderr, "rune bench: %d worker(s) started (concurrency %d, prefetch %s), prefix %q\n",
			o.spawn, conc, orDefault(o.prefetch), srv.Prefix)
	}

	rt, err := srv.connect(ctx, log, amqp.RoleMaster)
	if err != nil {
		return nil, err
	}
	defer rt.Close()
	b, eng := rt.Broker, rt.Engine
	def := LinearWorkflow(o.nodes)
	rep.Chain = "set"
	if o.chain == "http" {
		url, callP50, stop, err := benchHTTPServer(ctx, o.taskSleep)
		if err != nil {
			return nil, err
		}
		defer stop()
		def, rep.Chain, rep.HTTPCallP50 = HTTPWorkflow(o.nodes, url), "http", callP50
		if rep.HTTPCallOtherP50, err = probeFromProcess(ctx, url); err != nil {
			return nil, err
		}
	}
	wf, err := eng.Compile(def)
	if err != nil {
		return nil, err
	}

	fmt.Fprintf(env.Stderr, "rune bench: %d executions of %d %s nodes, %d in flight, distributed runtime\n", o.executions, o.nodes, rep.Chain, o.inflight)
	cpu := newCPUMeter(workers, srv)
	rep.Throughput, err = RunWatching(ctx, b, eng, wf, Config{Executions: o.executions, InFlight: o.inflight, Starters: o.starters, Progress: env.Stderr})
	if err != nil {
		return nil, workers.explain(err)
	}
	rep.CPU = cpu.perNode(rep.Throughput.NodeExecutions)
	rep.Sequence = sequenceOf(rep.Throughput, o.inflight, o.nodes, o.taskSleep, rep.HTTPCallP50)
	rep.WorkerCPUPerNode = rep.CPU.Worker
	if o.idle > 0 {
		fmt.Fprintf(env.Stderr, "rune bench: %d executions one at a time (idle latency)\n", o.idle)
		rep.Idle, err = RunWatching(ctx, b, eng, wf, Config{Executions: o.idle, InFlight: 1})
		if err != nil {
			return nil, workers.explain(err)
		}
	}
	if workers != nil {
		rep.WorkerPeakRSS = workers.peakRSS()
		workers.stop(env) // the raw ceiling gets the machine to itself
	}
	if o.rawHops >= 0 {
		hops := o.rawHops
		if hops == 0 {
			hops = rep.Throughput.NodeExecutions
		}
		handlers := conc * max(o.spawn, 1)
		prefix := srv.Prefix
		if prefix != "" {
			prefix += "."
		}
		sizes, err := LinearSizes(o.nodes)
		if err != nil {
			return nil, err
		}
		rep.Sizes = &sizes
		same := HopPattern{Body: sizes.Execution, Statuses: int(sizes.StatusesPerNode + 0.5), StatusBody: sizes.Status, InFlight: o.inflight}
		for _, c := range []struct {
			pattern HopPattern
			result  **HopResult
			ratio   *float64
		}{{HopPattern{}, &rep.Raw, &rep.Ratio}, {same, &rep.RawSame, &rep.RatioSame}} {
			fmt.Fprintf(env.Stderr, "rune bench: raw RabbitMQ ceiling, %d hops, %d handlers: %s\n", hops, handlers, c.pattern)
			raw, err := RawHopBenchmark(ctx, RawConfig{URL: srv.AMQPURL, Prefix: prefix, Name: "rune bench"}, hops, handlers, c.pattern)
			if err != nil {
				return nil, err
			}
			*c.result = &raw
			*c.ratio = rep.Throughput.NodesPerSecond / raw.HopsPerSec
		}
	}
	return rep, nil
}

// chainsReport is what `rune bench --chain all` measured: one report a
// chain, each on a deployment (prefix) and workers of its own, and with
// --base the node rate of the earlier build's set chain, measured first.
type chainsReport struct {
	Base *baseRun             `json:"base,omitempty"`
	Runs []*distributedReport `json:"runs"`
}

// baseRun is the set chain of an earlier build (--base).
type baseRun struct {
	Binary         string  `json:"binary"`
	NodesPerSecond float64 `json:"node_executions_per_second"`
}

// benchBase runs bin's bench on the set chain, with spawned workers and the
// flags every build since the distributed bench understands, and returns its
// node rate. Its progress goes to stderr.
func benchBase(ctx context.Context, env *Env, srv Deployment, o distributedBench, bin string) (*baseRun, error) {
	args := []string{"bench", "--amqp", srv.AMQPURL, "--redis", srv.RedisURL, "--spawn-workers", strconv.Itoa(o.spawn),
		"--executions", strconv.Itoa(o.executions), "--inflight", strconv.Itoa(o.inflight), "--nodes", strconv.Itoa(o.nodes),
		"--idle-executions", "0", "--raw-hops", "-1", "--json"}
	if o.concurrency > 0 {
		args = append(args, "--concurrency", strconv.Itoa(o.concurrency))
	}
	if o.prefetch > 0 {
		args = append(args, "--prefetch", strconv.Itoa(o.prefetch))
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stderr = env.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("--base %s: %w", bin, err)
	}
	var rep struct {
		Throughput struct {
			NodesPerSecond float64 `json:"node_executions_per_second"`
		} `json:"throughput"`
	}
	if err := json.Unmarshal(out, &rep); err != nil || rep.Throughput.NodesPerSecond <= 0 {
		return nil, fmt.Errorf("--base %s: its bench printed no node rate (want the JSON of rune bench --json): %v", bin, err)
	}
	return &baseRun{Binary: bin, NodesPerSecond: rep.Throughput.NodesPerSecond}, nil
}

// benchChains runs the set chain fused, the set chain unfused and the http
// chain one after another, each with workers of its own, and measures the
// raw ceilings once, after the last (every run's ratios are over them):
// issue 11's rows in one run.
func benchChains(ctx context.Context, env *Env, srv Deployment, o distributedBench) error {
	var all chainsReport
	if o.base != "" {
		fmt.Fprintf(env.Stderr, "rune bench: the base, %s, on the set chain\n", o.base)
		var err error
		if all.Base, err = benchBase(ctx, env, srv, o, o.base); err != nil {
			return err
		}
	}
	runs := []struct {
		chain  string
		noFuse bool
	}{{"set", false}, {"set", true}, {"http", false}}
	for i, r := range runs {
		run, s := o, srv // each run on a prefix of its own (a fresh one unless --prefix is given)
		run.chain, run.noFuse = r.chain, r.noFuse
		if i < len(runs)-1 {
			run.rawHops = -1
		}
		if s.Prefix != "" {
			s.Prefix += "-" + strconv.Itoa(i+1)
		}
		fmt.Fprintf(env.Stderr, "rune bench: chain %d of %d: %s\n", i+1, len(runs), chainLabel(r.chain, r.noFuse))
		rep, err := measureDistributed(ctx, env, &s, run)
		if err != nil {
			return err
		}
		all.Runs = append(all.Runs, rep)
	}
	last := all.Runs[len(all.Runs)-1]
	for _, rep := range all.Runs[:len(all.Runs)-1] {
		rep.Sizes, rep.Raw, rep.RawSame = last.Sizes, last.Raw, last.RawSame
		if last.Raw != nil {
			rep.Ratio = rep.Throughput.NodesPerSecond / last.Raw.HopsPerSec
			rep.RatioSame = rep.Throughput.NodesPerSecond / last.RawSame.HopsPerSec
		}
	}
	if all.Base != nil {
		for _, rep := range all.Runs {
			if rep.Chain == "set" { // the base ran the set chain
				rep.TimesBase = rep.Throughput.NodesPerSecond / all.Base.NodesPerSecond
			}
		}
	}
	if o.asJSON {
		return json.NewEncoder(env.Stdout).Encode(all)
	}
	for i, rep := range all.Runs {
		fmt.Fprintf(env.Stdout, "== %s\n", chainLabel(rep.Chain, rep.NoFuse))
		if i < len(all.Runs)-1 {
			rep.printRun(env.Stdout, o.nodes) // the ceilings once, below
		} else {
			rep.print(env.Stdout, o.nodes)
		}
	}
	all.print(env.Stdout)
	return nil
}

func chainLabel(chain string, noFuse bool) string {
	switch {
	case chain == "http":
		return "http chain (every node a hop)"
	case noFuse:
		return "set chain, unfused (every node a hop)"
	default:
		return "set chain, fused (pure nodes in one hop)"
	}
}

// print writes the table of the runs, one row a chain.
func (a *chainsReport) print(w io.Writer) {
	fmt.Fprintln(w, "== the chains side by side")
	if a.Base != nil {
		fmt.Fprintf(w, "  base (%s), set chain: %.0f node executions/s\n", a.Base.Binary, a.Base.NodesPerSecond)
	}
	tw := tabwriter.NewWriter(w, 2, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  chain\tnode executions/s\t× base\tstatus messages per node\tCPU per node: worker\tRabbitMQ\ttotal\tidle per-node p50\tidle execution p50\tof the raw 8-byte ceiling")
	for _, r := range a.Runs {
		times := "—"
		if r.TimesBase > 0 {
			times = fmt.Sprintf("%.2f", r.TimesBase)
		}
		ratio := "—"
		if r.Raw != nil {
			ratio = fmt.Sprintf("%.0f%%", 100*r.Ratio)
		}
		idleNode, idleExec := "—", "—"
		if r.Idle != nil {
			idleNode, idleExec = r.Idle.HopP50.Round(time.Microsecond).String(), r.Idle.ExecP50.Round(time.Microsecond).String()
		}
		fmt.Fprintf(tw, "  %s\t%.0f\t%s\t%.2f\t%s\t%s\t%s\t%s\t%s\t%s\n", chainLabel(r.Chain, r.NoFuse), r.Throughput.NodesPerSecond, times,
			float64(r.Throughput.Statuses)/float64(max(r.Throughput.NodeExecutions, 1)),
			orDash(r.CPU.Worker), orDash(r.CPU.RabbitMQ), orDash(r.CPU.total()), idleNode, idleExec, ratio)
	}
	_ = tw.Flush()
	for _, r := range a.Runs {
		if r.HTTPCallOtherP50 > 0 && r.Idle != nil {
			fmt.Fprintf(w, "  http: idle per-node p50 %s above the call from another process (%s)\n",
				(r.Idle.HopP50 - r.HTTPCallOtherP50).Round(time.Microsecond), r.HTTPCallOtherP50.Round(time.Microsecond))
		}
	}
}

// orDash is d rounded to the microsecond, or a dash when it was not measured.
func orDash(d time.Duration) string {
	if d <= 0 {
		return "—"
	}
	return d.Round(time.Microsecond).String()
}

// benchHTTPServer serves the http chain's GETs on 127.0.0.1, each after
// sleeping sleep (a task's work), and returns its URL and the p50 of 200
// GETs made directly: the call itself.
func benchHTTPServer(ctx context.Context, sleep time.Duration) (url string, callP50 time.Duration, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", 0, nil, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if sleep > 0 {
			time.Sleep(sleep)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	url = "http://" + ln.Addr().String() + "/"
	if callP50, err = timeGETs(ctx, url, 0); err != nil {
		_ = srv.Close()
		return "", 0, nil, err
	}
	return url, callP50, func() { _ = srv.Close() }, nil
}

// timeGETs makes 200 GETs of url one at a time, gap apart, on one
// kept-alive connection, and returns their p50.
func timeGETs(ctx context.Context, url string, gap time.Duration) (time.Duration, error) {
	calls := make([]time.Duration, 0, 200)
	client := &http.Client{Timeout: 10 * time.Second}
	for range 200 {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, err
		}
		t0 := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		calls = append(calls, time.Since(t0))
		time.Sleep(gap)
	}
	sort.Slice(calls, func(i, j int) bool { return calls[i] < calls[j] })
	return Percentile(calls, 0.5), nil
}

// probeFromProcess times the GETs of url from a process of its own (this
// binary, --http-probe), as a worker makes them.
func probeFromProcess(ctx context.Context, url string) (time.Duration, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, fmt.Errorf("http probe: %w", err)
	}
	out, err := exec.CommandContext(ctx, exe, "bench", "--http-probe", url).Output()
	if err != nil {
		return 0, fmt.Errorf("http probe: %w", err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("http probe: reading %q: %w", out, err)
	}
	return time.Duration(ns), nil
}

func orDefault(n int) string {
	if n == 0 {
		return "default"
	}
	return strconv.Itoa(n)
}

func (r *distributedReport) print(w io.Writer, nodes int) {
	r.printRun(w, nodes)
	r.printCeilings(w)
}

// printRun writes what the chain's runs measured, printCeilings the raw
// ceilings.
func (r *distributedReport) printRun(w io.Writer, nodes int) {
	who := "running workers"
	if r.Workers > 0 {
		who = fmt.Sprintf("%d spawned worker(s)", r.Workers)
	}
	r.Throughput.Print(w, fmt.Sprintf("distributed runtime (RabbitMQ, Redis), linear workflow of %d %s nodes, %d in flight (%d starting at once), %s, concurrency %d, prefetch %s",
		nodes, r.Chain, r.InFlight, r.Throughput.Starters, who, r.Concurrency, orDefault(r.Prefetch)))
	if r.HTTPCallP50 > 0 {
		fmt.Fprintf(w, "  the HTTP call itself (200 GETs by the bench): p50 %s; from another process, 1 ms apart: p50 %s\n",
			r.HTTPCallP50.Round(time.Microsecond), r.HTTPCallOtherP50.Round(time.Microsecond))
	}
	if r.WorkerPeakRSS > 0 {
		fmt.Fprintf(w, "  worker peak RSS:  %.1f MiB\n", float64(r.WorkerPeakRSS)/(1<<20))
	}
	r.CPU.print(w)
	r.Sequence.print(w)
	if r.Idle != nil {
		fmt.Fprintf(w, "idle system, one execution at a time (%d executions)\n", r.Idle.Executions)
		fmt.Fprintf(w, "  per-node latency: p50 %s, p99 %s (%.0f node executions/s)\n",
			r.Idle.HopP50.Round(time.Microsecond), r.Idle.HopP99.Round(time.Microsecond), r.Idle.NodesPerSecond)
		fmt.Fprintf(w, "  execution latency (trigger to last node): p50 %s, p99 %s\n",
			r.Idle.ExecP50.Round(time.Microsecond), r.Idle.ExecP99.Round(time.Microsecond))
	}
}

func (r *distributedReport) printCeilings(w io.Writer) {
	if r.Sizes != nil {
		fmt.Fprintf(w, "messages of an unfused hop: node message %d bytes, %.2f status messages of %d bytes per node\n",
			r.Sizes.Execution, r.Sizes.StatusesPerNode, r.Sizes.Status)
	}
	for _, c := range []struct {
		what  string
		raw   *HopResult
		ratio float64
	}{{"raw RabbitMQ ceiling", r.Raw, r.Ratio}, {"raw RabbitMQ ceiling for the same messages", r.RawSame, r.RatioSame}} {
		if c.raw == nil {
			continue
		}
		fmt.Fprintf(w, "%s (%s, %d handlers)\n", c.what, c.raw.Pattern, c.raw.Concurrency)
		fmt.Fprintf(w, "  hops:             %d in %s = %.0f /s\n", c.raw.Hops, c.raw.Elapsed.Round(time.Millisecond), c.raw.HopsPerSec)
		fmt.Fprintf(w, "  hop latency:      p50 %s, p99 %s\n", c.raw.P50.Round(time.Microsecond), c.raw.P99.Round(time.Microsecond))
		fmt.Fprintf(w, "  node executions / raw hops: %.0f%%\n", 100*c.ratio)
	}
}

// workerGroup is the `rune worker` processes a bench spawned.
type workerGroup struct {
	procs []*workerProc
	mu    sync.Mutex
	ended bool // stopping on purpose: exits are expected
}

type workerProc struct {
	n    int
	cmd  *exec.Cmd
	log  *logTail
	done chan struct{}
	err  error
}

// spawnWorkers starts n workers of this binary with args and waits until
// each has started. A worker that exits before stop cancels the run, with
// its log as the cause.
func spawnWorkers(n int, args []string, cancel context.CancelCauseFunc) (*workerGroup, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("spawn workers: %w", err)
	}
	g := &workerGroup{}
	for i := range n {
		p := &workerProc{n: i + 1, log: newLogTail("worker started"), done: make(chan struct{})}
		p.cmd = exec.Command(exe, append(args, egressAllow...)...)
		p.cmd.Stderr = p.log
		if err := p.cmd.Start(); err != nil {
			g.kill()
			return nil, fmt.Errorf("spawn worker %d: %w", p.n, err)
		}
		g.procs = append(g.procs, p)
		go func() {
			p.err = p.cmd.Wait()
			close(p.done)
			if !g.stopping() {
				cancel(fmt.Errorf("worker %d exited during the bench (%v); its log:\n%s", p.n, p.err, p.log.String()))
			}
		}()
	}
	deadline := time.After(30 * time.Second)
	for _, p := range g.procs {
		select {
		case <-p.log.found:
		case <-p.done:
			g.kill()
			return nil, fmt.Errorf("worker %d exited at start-up (%v); its log:\n%s", p.n, p.err, p.log.String())
		case <-deadline:
			g.kill()
			return nil, fmt.Errorf("worker %d did not start within 30s; its log:\n%s", p.n, p.log.String())
		}
	}
	return g, nil
}

func (g *workerGroup) stopping() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ended
}

func (g *workerGroup) setStopping() {
	g.mu.Lock()
	g.ended = true
	g.mu.Unlock()
}

// kill ends every worker at once.
func (g *workerGroup) kill() {
	g.setStopping()
	for _, p := range g.procs {
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// stop sends every worker SIGTERM and waits for it to drain and exit (a
// minute at most, then it is killed). It is idempotent.
func (g *workerGroup) stop(env *Env) {
	if g == nil || g.stopping() && g.allDone() {
		return
	}
	g.setStopping()
	for _, p := range g.procs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	deadline := time.After(time.Minute)
	for _, p := range g.procs {
		select {
		case <-p.done:
			if p.err != nil {
				fmt.Fprintf(env.Stderr, "rune bench: worker %d: %v; its log:\n%s", p.n, p.err, p.log.String())
			}
		case <-deadline:
			fmt.Fprintf(env.Stderr, "rune bench: worker %d did not stop within a minute after SIGTERM; killing it\n", p.n)
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
}

func (g *workerGroup) allDone() bool {
	for _, p := range g.procs {
		select {
		case <-p.done:
		default:
			return false
		}
	}
	return true
}

// explain adds the workers' logs to a failed run's error when they hold
// warnings or errors.
func (g *workerGroup) explain(err error) error {
	if g == nil {
		return err
	}
	var b strings.Builder
	for _, p := range g.procs {
		if l := p.log.String(); strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
			fmt.Fprintf(&b, "\nworker %d log:\n%s", p.n, l)
		}
	}
	if b.Len() == 0 {
		return err
	}
	return fmt.Errorf("%w%s", err, b.String())
}

// pids are the workers' process IDs.
func (g *workerGroup) pids() []int {
	pids := make([]int, len(g.procs))
	for i, p := range g.procs {
		pids[i] = p.cmd.Process.Pid
	}
	return pids
}

// peakRSS is the largest peak resident set size among the workers, from
// /proc (0 where there is none).
func (g *workerGroup) peakRSS() uint64 {
	var peak uint64
	for _, p := range g.procs {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(data)) {
			if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				f := strings.Fields(rest)
				if len(f) == 2 && f[1] == "kB" {
					if kb, err := strconv.ParseUint(f[0], 10, 64); err == nil {
						peak = max(peak, kb*1024)
					}
				}
			}
		}
	}
	return peak
}

// logTail keeps the last 64 KiB written to it and signals when a marker was
// written.
type logTail struct {
	mu     sync.Mutex
	buf    []byte
	marker string
	found  chan struct{}
	seen   bool
}

const logTailSize = 64 << 10

func newLogTail(marker string) *logTail {
	return &logTail{marker: marker, found: make(chan struct{})}
}

func (l *logTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	if !l.seen && bytes.Contains(l.buf, []byte(l.marker)) {
		l.seen = true
		close(l.found)
	}
	if len(l.buf) > logTailSize {
		l.buf = append(l.buf[:0], l.buf[len(l.buf)-logTailSize:]...)
	}
	return len(p), nil
}

func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.buf)
}

// purgeDeployment deletes the queues, exchanges (the names of
// broker/amqp/topology.go) and Redis keys of a prefix the bench made up.
func purgeDeployment(env *Env, srv *Deployment) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	if rc := srv.redisClient(); rc != nil {
		if err := coordredis.DeleteKeys(ctx, rc, srv.Prefix+":*"); err != nil {
			errs = append(errs, err)
		}
		rc.Close()
	}
	conn, err := amqp091.Dial(strings.Split(srv.AMQPURL, ",")[0]) // a cluster: its first node
	if err != nil {
		errs = append(errs, err)
	} else {
		p := srv.Prefix + "."
		queues := []string{"workflow.execution", "workflow.node.status", "workflow.completion", "workflow.completion.receipts", "workflow.timeout.process", "workflow.dlq"}
		for i := 1; i < srv.ExecutionQueues; i++ {
			queues = append(queues, "workflow.execution.shard."+strconv.Itoa(i))
		}
		for _, q := range queues {
			if ch, err := conn.Channel(); err == nil {
				if _, err := ch.QueueDelete(p+q, false, false, false); err != nil {
					errs = append(errs, err)
				}
				_ = ch.Close()
			}
		}
		for _, x := range []string{"workflow.execution.x", "workflow.events", "workflow.timeout.x", "workflow.execution.dlx"} {
			if ch, err := conn.Channel(); err == nil {
				if err := ch.ExchangeDelete(p+x, false, false); err != nil {
					errs = append(errs, err)
				}
				_ = ch.Close()
			}
		}
		_ = conn.Close()
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(env.Stderr, "rune bench: cleaning up prefix %q: %v\n", srv.Prefix, err)
	}
}
