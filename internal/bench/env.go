package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"

	goredis "github.com/redis/go-redis/v9"

	coordredis "github.com/rune-org/rune/coord/redis"
	"github.com/rune-org/rune/distributed"
)

// Env is what `rune bench` reads and writes.
type Env struct {
	// Stdout receives the results, Stderr the progress.
	Stdout, Stderr io.Writer
	// Getenv reads the environment (os.Getenv in rune; tests replace it).
	Getenv func(string) string
	// Logger receives the logs of the runtimes the bench runs in this
	// process (the rune command's, at RUNE_LOG_LEVEL).
	Logger *slog.Logger
}

// Deployment is the distributed deployment the bench measures, as the rune
// command's flags name it (--amqp, --redis, --prefix and the queue layout,
// the same as rune worker's), so that the workers the bench spawns join it.
// An empty AMQPURL means the embedded runtime.
type Deployment struct {
	AMQPURL, RedisURL string
	// Prefix is --prefix; the bench sets one of its own when it is empty
	// and the bench starts its workers.
	Prefix string
	// ExecutionQueues is --execution-queues.
	ExecutionQueues int
	// Check reports a flag missing or bad for the distributed runtime.
	Check func() error
	// Args returns the flags that give another rune process (a worker the
	// bench spawns) this deployment on prefix.
	Args func(prefix string) []string
	// Connect connects to the deployment on prefix in role, with
	// effectsPool effects handlers (0: the default).
	Connect func(ctx context.Context, log *slog.Logger, prefix, role string, effectsPool int) (*distributed.Runtime, error)

	// effectsPool is what connect gives Connect: the server bench's
	// --concurrency, as `rune worker` gives its own.
	effectsPool int
}

func (d *Deployment) check(bool) error { return d.Check() }

func (d *Deployment) args() []string { return d.Args(d.Prefix) }

func (d *Deployment) connect(ctx context.Context, log *slog.Logger, role string) (*distributed.Runtime, error) {
	return d.Connect(ctx, log, d.Prefix, role, d.effectsPool)
}

// redisClient opens a client of RedisURL, nil when the URL does not parse.
func (d *Deployment) redisClient() goredis.UniversalClient {
	conn, err := coordredis.Open(d.RedisURL)
	if err != nil {
		return nil
	}
	return conn.Client
}

// UsageError is bad command-line input to the bench (rune exits with
// status 2 on it).
type UsageError struct{ msg string }

func (e UsageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return UsageError{fmt.Sprintf(format, args...)} }

func printJSON(env *Env, v any) error {
	enc := json.NewEncoder(env.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// runtimeDB is the runtime's file in a data directory, as `rune server`
// names it.
const runtimeDB = "runtime.db"

// egressAllow is what the workers the bench spawns are allowed: the
// bench's own HTTP server on loopback (its http chain).
var egressAllow = []string{"--egress-allow", "127.0.0.0/8"}
