package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/rune-org/rune/broker/amqp"
	"github.com/rune-org/rune/broker/sign"
	"github.com/rune-org/rune/client"
	coordredis "github.com/rune-org/rune/coord/redis"
	"github.com/rune-org/rune/distributed"
	"github.com/rune-org/rune/egress"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/internal/fault"
	"github.com/rune-org/rune/metrics"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/nodes"
	"github.com/rune-org/rune/scheduler"
	"github.com/rune-org/rune/secrets"
	"github.com/rune-org/rune/subscribers"
	"github.com/rune-org/rune/templates"
	"github.com/rune-org/rune/worker"
)

// servers holds the connection flags shared by the distributed commands.
type servers struct {
	amqpURL, redisURL, prefix string
	// eventRetention is rune server's --event-retention (issue 34).
	eventRetention time.Duration
	// queueType and executionQueues are amqp.Config's QueueType and
	// ExecutionQueues (--queue-type, --execution-queues).
	queueType       string
	executionQueues int
	// messageBatch is amqp.Config.MessageBatch (--message-batch), and
	// badBatch a RUNE_MESSAGE_BATCH that is not a number.
	messageBatch int
	badBatch     string
	// signingKeys is RUNE_SIGNING_KEY: from the environment only, since
	// flags show in process listings.
	signingKeys string
	// fault, when set, is the notification nodes' fault hook (internal/fault).
	fault func(point, key string)
	// templates, when set, are the message templates the email and sms
	// nodes render (a worker's --postgres: the server's store).
	templates templates.Source
	// noFuse is the worker's --no-fuse.
	noFuse bool
	// effectsPool is distributed.Config.EffectsPool: the worker's
	// --concurrency.
	effectsPool int
	// egress is the nodes' egress policy (--egress-deny, --egress-allow);
	// nil connects anywhere.
	egress *egress.Policy
	// subscribers is where email and sms nodes find subscribers (issue
	// 36): the server's store, for a worker given --postgres.
	subscribers nodes.Subscribers
}

func (s *servers) flags(fs *flag.FlagSet, env *cliEnv, needRedis bool) {
	fs.StringVar(&s.amqpURL, "amqp", env.getenv("RUNE_AMQP_URL"), "RabbitMQ URL (env RUNE_AMQP_URL), e.g. amqp://guest:guest@127.0.0.1:5672/; a cluster's nodes comma-separated, tried in turn when a connection is lost: amqp://u:p@h1:5672/,amqp://u:p@h2:5672/")
	if needRedis {
		fs.StringVar(&s.redisURL, "redis", env.getenv("RUNE_REDIS_URL"), "Redis URL (env RUNE_REDIS_URL), e.g. redis://127.0.0.1:6379/0; a Redis Cluster: redis://host1:6379,host2:6379?shards=16 or ?cluster=true; &ttl=7d: how long an execution's state outlives its last activity and what it waits for")
	}
	fs.StringVar(&s.prefix, "prefix", env.getenv("RUNE_PREFIX"), "prefix of every queue, exchange and Redis key (env RUNE_PREFIX); isolates deployments sharing servers")
	fs.StringVar(&s.queueType, "queue-type", orString(env.getenv("RUNE_QUEUE_TYPE"), amqp.QueueClassic), "type of the durable RabbitMQ queues (env RUNE_QUEUE_TYPE): classic or quorum (replicated; no priorities; see docs/scaling.md); a queue cannot change type in place")
	queues, _ := strconv.Atoi(env.getenv("RUNE_EXECUTION_QUEUES"))
	fs.IntVar(&s.executionQueues, "execution-queues", max(queues, 1), "execution queues (env RUNE_EXECUTION_QUEUES): executions are spread over them by id and every worker consumes all; every process of a deployment must use the same number (see docs/scaling.md)")
	batch, err := strconv.Atoi(env.getenv("RUNE_MESSAGE_BATCH"))
	if err != nil && env.getenv("RUNE_MESSAGE_BATCH") != "" {
		s.badBatch = env.getenv("RUNE_MESSAGE_BATCH")
	}
	fs.IntVar(&s.messageBatch, "message-batch", batch, "at most this many execution, status or completion messages in one RabbitMQ message (env RUNE_MESSAGE_BATCH; default 32): those published while the last batch waits for its confirm go out together; 1 sends each alone, which processes of a Rune before batches need")
	s.signingKeys = env.getenv(sign.EnvVar)
}

// orString is s, or def when s is empty.
func orString(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// args are the flags that give another rune process (a worker the bench
// spawns) the same servers, prefix, queue layout and batches.
func (s *servers) args() []string {
	return []string{"--amqp", s.amqpURL, "--redis", s.redisURL, "--prefix", s.prefix,
		"--queue-type", s.queueType, "--execution-queues", strconv.Itoa(s.executionQueues),
		"--message-batch", strconv.Itoa(s.messageBatch)}
}

func (s *servers) check(needRedis bool) error {
	if s.amqpURL == "" {
		return usagef("--amqp (or RUNE_AMQP_URL) is required")
	}
	if needRedis && s.redisURL == "" {
		return usagef("--redis (or RUNE_REDIS_URL) is required")
	}
	if s.badBatch != "" {
		return usagef("RUNE_MESSAGE_BATCH=%q: want a whole number of messages (1: every message alone)", s.badBatch)
	}
	if s.messageBatch < 0 {
		return usagef("--message-batch %d: want at least 1 (1: every message alone), or 0 for the default 32", s.messageBatch)
	}
	return nil
}

// connect connects to the servers in role; nodes resolve credentials from
// the environment (secrets.Env).
func (s *servers) connect(ctx context.Context, log *slog.Logger, role string) (*distributed.Runtime, error) {
	return s.connectWith(ctx, log, role, secrets.Env{}, nil)
}

// connectWith is connect with the credentials resolver sec and metrics
// recorded by rec (nil: none).
func (s *servers) connectWith(ctx context.Context, log *slog.Logger, role string, sec node.Secrets, rec *metrics.Recorder) (*distributed.Runtime, error) {
	conn, err := coordredis.Open(s.redisURL)
	if err != nil {
		return nil, usagef("--redis: %v", err)
	}
	conn.Client.Close() // only checked: Connect opens its own
	var keys *sign.Keyring
	if s.signingKeys != "" {
		var err error
		if keys, err = sign.Parse(s.signingKeys); err != nil {
			return nil, usagef("%v", err)
		}
	}
	return distributed.Connect(ctx, distributed.Config{
		AMQPURL: s.amqpURL, RedisURL: s.redisURL, Prefix: s.prefix, Role: role,
		Logger: log, Secrets: sec, Nodes: nodes.Options{Fault: s.fault, Egress: s.egress, Subscribers: s.subscribers, Templates: s.templates}, Signing: keys, Metrics: rec, NoFuse: s.noFuse,
		QueueType: s.queueType, ExecutionQueues: s.executionQueues, MessageBatch: s.messageBatch, EffectsPool: s.effectsPool,
		EventRetention: s.eventRetention,
	})
}

// sampleBroker samples the queue depths and what rt's broker published
// into rec, in wg, until ctx is done.
func sampleBroker(ctx context.Context, wg *sync.WaitGroup, rec *metrics.Recorder, rt *distributed.Runtime) {
	wg.Go(func() { rec.SampleQueues(ctx, sampleEvery, rt.Broker.QueueDepths) })
	wg.Go(func() {
		rec.SamplePublished(ctx, sampleEvery, func() map[string]metrics.Published {
			out := map[string]metrics.Published{}
			for topic, p := range rt.Broker.Published() {
				out[string(topic)] = metrics.Published{Messages: p.Messages, AMQP: p.AMQP}
			}
			return out
		})
	})
}

// readyChecks are what /readyz checks of a distributed process: RabbitMQ
// and Redis reachable.
func readyChecks(rt *distributed.Runtime) []readyCheck {
	return []readyCheck{
		{"rabbitmq", rt.Broker.Ping},
		{"redis", func(ctx context.Context) error { return rt.Redis.Ping(ctx).Err() }},
	}
}

func cmdWorker(ctx context.Context, env *cliEnv, args []string) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var srv servers
	srv.flags(fs, env, true)
	concurrency := fs.Int("concurrency", 0, "messages handled at once (default 128 × GOMAXPROCS)")
	prefetch := fs.Int("prefetch", 0, "unacked messages RabbitMQ may hand over (default 2 × concurrency)")
	drain := fs.Duration("drain-timeout", 30*time.Second, "on SIGTERM, how long the messages in hand may run on")
	fs.BoolVar(&srv.noFuse, "no-fuse", false, "run every node in a hop of its own (default: pure successors run in the hop of the node before them)")
	runningAfter := fs.Duration("running-after", worker.DefaultRunningAfter, "publish a node's running status on its own only when it is still running after this long (negative: always at once)")
	withScheduler := fs.Bool("scheduler", false, "also fire due timers of wait and delay nodes in this process")
	schedPoll := fs.Duration("scheduler-poll", scheduler.DefaultPoll, "with --scheduler: pause between claims when no timer is due (as rune scheduler --poll)")
	debugAddr := fs.String("debug-addr", "", "serve Go's profiler (net/http/pprof) on this address, e.g. 127.0.0.1:6060 (default: off)")
	creds := credentialsFlag(fs)
	var eg egressFlags
	eg.flags(fs, env)
	publicURL := fs.String("public-url", env.getenv("RUNE_PUBLIC_URL"), "with --postgres: the rune server's public URL (env RUNE_PUBLIC_URL), the base of the one-click unsubscribe links of emails with a category (default: none, no link)")
	postgresURL := fs.String("postgres", env.getenv("RUNE_POSTGRES_URL"), "a rune server's PostgreSQL URL (env RUNE_POSTGRES_URL): resolve credentials (and the subscribers and message templates of email and sms nodes) from its store, decrypted with RUNE_SECRET_KEY (default: from RUNE_CREDENTIAL_* variables)")
	var ops opsFlags
	ops.flags(fs, env)
	memLimit := fs.Int64("memory-limit-mib", 448, "soft memory limit in MiB: the garbage collector works harder near it (GOMEMLIMIT, when set, wins; 0: none)")
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "Usage: rune worker --amqp URL --redis URL [--concurrency N] [--scheduler] [--credentials FILE]\n\nConsumes workflow.execution and runs nodes until SIGTERM or Ctrl-C, then finishes\nthe messages in hand (within --drain-timeout) and exits 0.")
		fs.PrintDefaults()
	}
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	if err := srv.check(true); err != nil {
		return err
	}
	pol, err := eg.policy()
	if err != nil {
		return err
	}
	srv.egress = pol
	sec, err := resolver(*creds)
	if err != nil {
		return err
	}
	faults, err := fault.FromEnv(env.getenv)
	if err != nil {
		return usagef("%v", err)
	}
	srv.fault = faults.Notify
	srv.effectsPool = *concurrency
	log, err := ops.logger(env)
	if err != nil {
		return err
	}
	if *memLimit > 0 && env.getenv("GOMEMLIMIT") == "" {
		// A big split briefly holds a branch message per item; without a
		// limit the heap's garbage doubles the process (measured in
		// docs/benchmarks.md).
		debug.SetMemoryLimit(*memLimit << 20)
	}
	if *debugAddr != "" {
		stop, err := serveDebug(*debugAddr, log, srv.egress)
		if err != nil {
			return err
		}
		defer stop()
	}
	if u, err := url.Parse(*publicURL); *publicURL != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
		return usagef("--public-url %q: want an absolute http:// or https:// URL such as https://rune.example.com", *publicURL)
	}
	if *postgresURL != "" {
		sf := storeFlags{postgresURL: *postgresURL}
		st, keys, err := sf.openWithKeys(ctx, env)
		if err != nil {
			return err
		}
		defer st.Close()
		// The server's store first, then the file and the environment.
		sec = secrets.Chain{secrets.Store{Store: st, Keys: keys}, sec}
		// Subscribers too (issue 36); links to unsubscribe need the URL
		// recipients reach the server at.
		srv.subscribers = subscribers.Source{Store: st, Keys: keys, PublicURL: *publicURL}
		srv.templates = st // issue 36: the templates email and sms nodes name
	}
	tr, stopTracing, err := tracer(ctx, env, "rune-worker", log)
	if err != nil {
		return err
	}
	defer stopTracing()
	rec := ops.recorder(log)
	rt, err := srv.connectWith(ctx, log, amqp.RoleWorker, sec, rec)
	if err != nil {
		return err
	}
	defer rt.Close()
	ops.egress = srv.egress
	stopOps, err := ops.serveOps(ctx, rec, log, readyChecks(rt)...)
	if err != nil {
		return err
	}
	// Stopped last: metrics stay readable while the messages in hand drain.
	defer stopOps()
	var wg sync.WaitGroup
	if rec != nil {
		sampleBroker(ctx, &wg, rec, rt)
	}
	if *withScheduler {
		warnDurability(ctx, rt, log)
		if rec != nil {
			wg.Go(func() { rec.SampleTimers(ctx, sampleEvery, rt.Timers.Stats, time.Now) })
		}
		wg.Go(func() {
			_ = scheduler.Run(ctx, scheduler.Config{Timers: rt.Timers, Broker: rt.Broker, Engine: rt.Engine, Poll: *schedPoll, Logger: log, Metrics: rec, Tracer: tr})
		})
	}
	// The worker's defaults, resolved: the log says what runs, not "0".
	if *concurrency <= 0 {
		*concurrency = worker.DefaultConcurrency()
	}
	if *prefetch <= 0 {
		*prefetch = 2 * *concurrency
	}
	log.Info("worker started", "concurrency", *concurrency, "prefetch", *prefetch, "scheduler", *withScheduler)
	err = worker.Run(ctx, worker.Config{Broker: rt.Broker, Engine: rt.Engine, Concurrency: *concurrency, Prefetch: *prefetch, DrainTimeout: *drain, RunningAfter: *runningAfter, Logger: log, Metrics: rec, Tracer: tr})
	wg.Wait()
	log.Info("worker stopped")
	return err
}

func cmdScheduler(ctx context.Context, env *cliEnv, args []string) error {
	fs := flag.NewFlagSet("scheduler", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var srv servers
	srv.flags(fs, env, true)
	poll := fs.Duration("poll", scheduler.DefaultPoll, "pause between claims when no timer is due: how late a timer may fire on an idle scheduler")
	batch := fs.Int("batch", 500, "timers claimed at once; full batches are drained without pausing")
	lease := fs.Duration("lease", scheduler.DefaultLease, "how long a claimed timer stays this scheduler's unrenewed (renewed every lease/3): a dead scheduler's timers fire about this late")
	var ops opsFlags
	ops.flags(fs, env)
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "Usage: rune scheduler --amqp URL --redis URL\n\nFires the timers of wait and delay nodes when they come due. Run one or more;\na timer fires once even with several, and a scheduler killed mid-fire loses none.")
		fs.PrintDefaults()
	}
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	if err := srv.check(true); err != nil {
		return err
	}
	log, err := ops.logger(env)
	if err != nil {
		return err
	}
	tr, stopTracing, err := tracer(ctx, env, "rune-scheduler", log)
	if err != nil {
		return err
	}
	defer stopTracing()
	rec := ops.recorder(log)
	rt, err := srv.connectWith(ctx, log, amqp.RoleScheduler, secrets.Env{}, rec)
	if err != nil {
		return err
	}
	defer rt.Close()
	stopOps, err := ops.serveOps(ctx, rec, log, readyChecks(rt)...)
	if err != nil {
		return err
	}
	defer stopOps()
	warnDurability(ctx, rt, log)
	if rec != nil {
		var wg sync.WaitGroup
		defer wg.Wait()
		wg.Go(func() { rec.SampleTimers(ctx, sampleEvery, rt.Timers.Stats, time.Now) })
		sampleBroker(ctx, &wg, rec, rt)
	}
	cfg := scheduler.Config{Timers: rt.Timers, Broker: rt.Broker, Engine: rt.Engine, Poll: *poll, Batch: *batch, Lease: *lease, Logger: log, Metrics: rec, Tracer: tr}
	// The crash tests' faults (a build with -tags fault only).
	faults, err := fault.FromEnv(env.getenv)
	if err != nil {
		return usagef("%v", err)
	}
	cfg.AfterClaim = faults.AfterClaim
	log.Info("scheduler started", "poll", *poll, "batch", *batch, "lease", *lease)
	err = scheduler.Run(ctx, cfg)
	log.Info("scheduler stopped")
	return err
}

// warnDurability logs what in Redis's configuration would lose timers.
func warnDurability(ctx context.Context, rt *distributed.Runtime, log *slog.Logger) {
	warnings, err := rt.DurabilityWarnings(ctx)
	if err != nil {
		log.Warn("could not check Redis durability", "err", err)
	}
	for _, w := range warnings {
		log.Warn("Redis may lose timers: " + w)
	}
}

func cmdStart(ctx context.Context, env *cliEnv, args []string) error {
	fs := flag.NewFlagSet("start", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var srv servers
	srv.flags(fs, env, true)
	input := fs.String("input", "", "trigger payload: inline JSON, or @file.json (default {})")
	wait := fs.Bool("wait", false, "follow the execution's statuses on stderr until it completes")
	asJSON := fs.Bool("json", false, "with --wait: print exactly the CompletionMessage JSON on stdout")
	quiet := fs.Bool("quiet", false, "with --wait: do not show node progress")
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "Usage: rune start WORKFLOW.json [--input ...] [--wait] [--json] --amqp URL --redis URL\n\nStarts an execution on running workers and prints its id. With --wait, follows it;\nexit status as rune run: 0 completed, 1 failed or halted, 2 invalid input.")
		fs.PrintDefaults()
	}
	path, err := workflowArg(fs, args)
	if err != nil {
		return err
	}
	if err := srv.check(true); err != nil {
		return err
	}
	raw, in, err := readWorkflowAndInput(path, *input)
	if err != nil {
		return err
	}
	// Warnings (a lost connection) go through the live table, which draws
	// itself again below them.
	prog := newProgress(env.stderr, *quiet)
	rt, err := srv.connect(ctx, loggerTo(env, prog), amqp.RoleMaster)
	if err != nil {
		return err
	}
	defer rt.Close()
	return compileThen(env, rt.Engine, path, raw, func(wf *engine.Workflow) error {
		execID := engine.NewExecutionID(time.Now())
		if !*wait {
			if err := client.Start(ctx, rt.Broker, rt.Engine, wf, execID, in); err != nil {
				return err
			}
			fmt.Fprintln(env.stdout, execID)
			return nil
		}
		comp, err := client.Run(ctx, rt.Broker, rt.Engine, wf, execID, in, prog.status)
		return prog.report(env, comp, err, *asJSON)
	})
}
