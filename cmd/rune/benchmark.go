package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"

	"github.com/rune-org/rune/distributed"
	"github.com/rune-org/rune/internal/bench"
)

// cmdBench is `rune bench`: the load and its measures live in
// internal/bench; this gives it the deployment of the distributed flags,
// the same as rune worker's, so that the workers it spawns join it.
func cmdBench(ctx context.Context, env *cliEnv, args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var srv servers
	srv.flags(fs, env, true)
	run := bench.Command(fs, &bench.Env{Stdout: env.stdout, Stderr: env.stderr, Getenv: env.getenv, Logger: cliLogger(env)})
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	err := run(ctx, bench.Deployment{
		AMQPURL: srv.amqpURL, RedisURL: srv.redisURL, Prefix: srv.prefix, ExecutionQueues: srv.executionQueues,
		Check: func() error { return srv.check(true) },
		Args: func(prefix string) []string {
			s := srv
			s.prefix = prefix
			return s.args()
		},
		Connect: func(ctx context.Context, log *slog.Logger, prefix, role string, effectsPool int) (*distributed.Runtime, error) {
			s := srv
			s.prefix, s.effectsPool = prefix, effectsPool
			return s.connect(ctx, log, role)
		},
	})
	if ue := (bench.UsageError{}); errors.As(err, &ue) {
		return usagef("%v", ue)
	}
	return err
}
