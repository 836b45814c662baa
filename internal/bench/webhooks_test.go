package bench_test

import (
	"context"
	"encoding/json"
	"flag"
	"log/slog"
	"regexp"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rune-org/rune/distributed"
	"github.com/rune-org/rune/internal/bench"
	"github.com/rune-org/rune/internal/testinfra"
)

// `rune bench --mode webhooks` at a tiny size ends, every delivery having
// started an execution that completed and no replay having started one. It
// used to sign the same body for every delivery, so that those signed in
// the same second were taken for replays and the bench waited forever for
// executions never started.
func TestWebhooksBenchSmall(t *testing.T) {
	t.Parallel()
	pg, amqpURL, redisURL := testinfra.PostgresURL(t), testinfra.AMQPURL(t), testinfra.RedisURL(t)
	var stdout, stderr testinfra.Buffer
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	run := bench.Command(fs, &bench.Env{Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }, Logger: quiet})
	const n = 40
	if err := fs.Parse([]string{"--mode", "webhooks", "--postgres", pg, "--executions", "40", "--clients", "4", "--nodes", "2", "--json"}); err != nil {
		t.Fatal(err)
	}
	// The bench leaves its schema for inspection; the test drops it.
	t.Cleanup(func() {
		m := regexp.MustCompile(`schema (bench_[0-9a-f]+)`).FindStringSubmatch(stderr.String())
		if m == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, pg)
		if err != nil {
			t.Log(err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{m[1]}.Sanitize()+" CASCADE"); err != nil {
			t.Log(err)
		}
	})
	// A deadline against the hang; it takes about a second unloaded.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := run(ctx, bench.Deployment{
		AMQPURL: amqpURL, RedisURL: redisURL, // no prefix: the bench takes one of its own and purges it
		Check: func() error { return nil },
		Connect: func(ctx context.Context, log *slog.Logger, prefix, role string, effectsPool int) (*distributed.Runtime, error) {
			return distributed.Connect(ctx, distributed.Config{AMQPURL: amqpURL, RedisURL: redisURL, Prefix: prefix, Role: role, Logger: log, EffectsPool: effectsPool})
		},
	})
	if err != nil {
		t.Fatalf("%v; the bench printed:\n%s", err, stderr.String())
	}
	var res bench.WebhookBenchResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("result: %v in %q", err, stdout.String())
	}
	if res.Requests != n || res.Replays != n/10 || res.ReplayExecutions != 0 || res.AcceptedPerSec <= 0 || res.CompletedPerSec <= 0 {
		t.Fatalf("result %+v: want %d requests, %d replays starting no execution, and rates", res, n, n/10)
	}
}
