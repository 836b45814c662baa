package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rune-org/rune/broker/amqp"
	"github.com/rune-org/rune/client"
	coordredis "github.com/rune-org/rune/coord/redis"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/nodes"
	"github.com/rune-org/rune/secrets"
	"github.com/rune-org/rune/worker"
)

// servers holds the connection flags shared by the distributed commands.
type servers struct {
	amqpURL, redisURL, prefix string
}

func (s *servers) flags(fs *flag.FlagSet, env *cliEnv, needRedis bool) {
	fs.StringVar(&s.amqpURL, "amqp", env.getenv("RUNE_AMQP_URL"), "RabbitMQ URL (env RUNE_AMQP_URL), e.g. amqp://guest:guest@127.0.0.1:5672/")
	if needRedis {
		fs.StringVar(&s.redisURL, "redis", env.getenv("RUNE_REDIS_URL"), "Redis URL (env RUNE_REDIS_URL), e.g. redis://127.0.0.1:6379/0")
	}
	fs.StringVar(&s.prefix, "prefix", env.getenv("RUNE_PREFIX"), "prefix of every queue, exchange and Redis key (env RUNE_PREFIX); isolates deployments sharing servers")
}

func (s *servers) check(needRedis bool) error {
	if s.amqpURL == "" {
		return usagef("--amqp (or RUNE_AMQP_URL) is required")
	}
	if needRedis && s.redisURL == "" {
		return usagef("--redis (or RUNE_REDIS_URL) is required")
	}
	return nil
}

func (s *servers) broker(ctx context.Context, log *slog.Logger, role string) (*amqp.Broker, error) {
	prefix := s.prefix
	if prefix != "" {
		prefix += "."
	}
	b, err := amqp.New(ctx, amqp.Config{URL: s.amqpURL, Prefix: prefix, Role: role, Logger: log, Name: "rune " + role})
	if err != nil {
		return nil, fmt.Errorf("connect to RabbitMQ: %w (is it running? check --amqp)", err)
	}
	return b, nil
}

func (s *servers) engine(ctx context.Context, log *slog.Logger) (*engine.Engine, func(), error) {
	opts, err := goredis.ParseURL(s.redisURL)
	if err != nil {
		return nil, nil, usagef("--redis: %v", err)
	}
	rc := goredis.NewClient(opts)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := rc.Ping(pctx).Err(); err != nil {
		rc.Close()
		return nil, nil, fmt.Errorf("connect to Redis at %s: %w (is it running? check --redis)", opts.Addr, err)
	}
	prefix := s.prefix
	if prefix == "" {
		prefix = coordredis.DefaultPrefix
	}
	co := coordredis.New(rc, coordredis.Options{Prefix: prefix})
	eng, err := engine.New(engine.Config{
		Registry: nodes.NewRegistry(nodes.Options{Logger: log}),
		Coord:    co,
		Secrets:  secrets.Env{},
		Logger:   log,
	})
	if err != nil {
		rc.Close()
		return nil, nil, err
	}
	return eng, func() { rc.Close() }, nil
}

func cmdWorker(ctx context.Context, env *cliEnv, args []string) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var srv servers
	srv.flags(fs, env, true)
	concurrency := fs.Int("concurrency", 0, "messages handled at once (default 8 × GOMAXPROCS)")
	prefetch := fs.Int("prefetch", 0, "unacked messages RabbitMQ may hand over (default 2 × concurrency)")
	drain := fs.Duration("drain-timeout", 30*time.Second, "on SIGTERM, how long the messages in hand may run on")
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "Usage: rune worker --amqp URL --redis URL [--concurrency N]\n\nConsumes workflow.execution and runs nodes until SIGTERM or Ctrl-C, then finishes\nthe messages in hand (within --drain-timeout) and exits 0.")
		fs.PrintDefaults()
	}
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	if err := srv.check(true); err != nil {
		return err
	}
	log := serverLogger(env)
	b, err := srv.broker(ctx, log, amqp.RoleWorker)
	if err != nil {
		return err
	}
	defer b.Close()
	eng, closeEng, err := srv.engine(ctx, log)
	if err != nil {
		return err
	}
	defer closeEng()
	log.Info("worker started", "concurrency", *concurrency, "prefetch", *prefetch)
	err = worker.Run(ctx, worker.Config{Broker: b, Engine: eng, Concurrency: *concurrency, Prefetch: *prefetch, DrainTimeout: *drain, Logger: log})
	log.Info("worker stopped")
	return err
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
		fmt.Fprintln(env.stderr, "Usage: rune start WORKFLOW.json [--input ...] [--wait] [--json] --amqp URL --redis URL\n\nStarts an execution on running workers and prints its id. With --wait, follows it;\nexit status as rune run: 0 completed, 1 halted or failed, 2 invalid input.")
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want exactly one workflow file, got %d (see rune start -h)", len(pos))
	}
	if err := srv.check(true); err != nil {
		return err
	}
	raw, in, err := readWorkflowAndInput(pos[0], *input)
	if err != nil {
		return err
	}
	log := cliLogger(env)
	eng, closeEng, err := srv.engine(ctx, log)
	if err != nil {
		return err
	}
	defer closeEng()
	wf, err := eng.Compile(raw)
	if err != nil {
		return invalidWorkflow(env, pos[0], err)
	}
	b, err := srv.broker(ctx, log, amqp.RoleMaster)
	if err != nil {
		return err
	}
	defer b.Close()
	execID := engine.NewExecutionID(time.Now())
	if !*wait {
		if err := client.Start(ctx, b, eng, wf, execID, in); err != nil {
			return err
		}
		fmt.Fprintln(env.stdout, execID)
		return nil
	}
	prog := newProgress(env.stderr, *quiet)
	comp, err := client.Run(ctx, b, eng, wf, execID, in, prog.status)
	prog.finish(comp)
	if err != nil {
		return err
	}
	return reportCompletion(env, comp, *asJSON)
}

// serverLogger logs at info level (RUNE_LOG_LEVEL changes it) as text, or as
// JSON with RUNE_LOG_FORMAT=json.
func serverLogger(env *cliEnv) *slog.Logger {
	level := slog.LevelInfo
	if v := env.getenv("RUNE_LOG_LEVEL"); v != "" {
		_ = level.UnmarshalText([]byte(v))
	}
	opts := &slog.HandlerOptions{Level: level}
	if env.getenv("RUNE_LOG_FORMAT") == "json" {
		return slog.New(slog.NewJSONHandler(env.stderr, opts))
	}
	return slog.New(slog.NewTextHandler(env.stderr, opts))
}
