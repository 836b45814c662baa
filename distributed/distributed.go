// Package distributed assembles Rune's distributed runtime: the engine on
// RabbitMQ (broker/amqp) and Redis (coord/redis), for `rune worker`,
// `rune scheduler` and `rune start`, and for tests that run the same
// scenarios on both runtimes.
package distributed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rune-org/rune/broker/amqp"
	"github.com/rune-org/rune/broker/sign"
	coordredis "github.com/rune-org/rune/coord/redis"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/metrics"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/nodes"
	"github.com/rune-org/rune/worker"
)

// Config says where the servers are.
type Config struct {
	// AMQPURL is RabbitMQ's URL, or a cluster's nodes' URLs separated by
	// commas (amqp.Config.URL). Required.
	AMQPURL string
	// RedisURL is Redis's URL, or a Redis Cluster's (coordredis.Open:
	// "?cluster=true" or several comma-separated hosts; "&shards=N" spreads
	// the timers and the definitions over N hash tags, default 16 on a
	// cluster; "&ttl=D" is how long an execution's state outlives its last
	// activity and the due time of what it waits for, default 7 days).
	// Required.
	RedisURL string
	// Prefix isolates deployments (and tests) sharing servers: queues and
	// exchanges are named "<Prefix>.workflow.execution" and so on, Redis keys
	// start with Prefix. Default "": RFC 001's queue names and the "rune"
	// key prefix.
	Prefix string
	// Role is the RabbitMQ role (amqp.RoleWorker, RoleMaster, RoleAdmin).
	// Default amqp.RoleWorker.
	Role string
	// Logger receives logs. Default slog.Default().
	Logger *slog.Logger
	// Nodes configures the built-in node types. Leave Nodes.Logger nil: log
	// nodes then write through the engine's logger, whose lines carry the
	// run's execution id, node id and lineage.
	Nodes nodes.Options
	// Secrets resolves credential references; nil means nodes get none.
	Secrets node.Secrets
	// Signing signs the messages this process publishes and refuses
	// unsigned or badly signed ones (amqp.Config.Signing). Default nil:
	// no signing.
	Signing *sign.Keyring
	// QueueType and ExecutionQueues are amqp.Config's: the type of the
	// durable queues and how many execution queues there are. Defaults
	// classic and 1.
	QueueType       string
	ExecutionQueues int
	// MessageBatch is amqp.Config.MessageBatch: at most how many
	// execution, status or completion messages one RabbitMQ message carries. Default
	// 32; 1 sends each alone.
	MessageBatch int
	// Metrics records what the engine does; nil records nothing. The
	// worker and scheduler take it in their own Config.
	Metrics *metrics.Recorder
	// NoFuse runs every node in a hop of its own (engine.Config.NoFuse).
	NoFuse bool
	// EventRetention is how long a sent event is kept for wait_for_event
	// nodes that reach their wait after it (issue 34); it matters where
	// events are sent (rune server). Default 24 h.
	EventRetention time.Duration
	// EffectsPool is the least number of Redis connections the records of
	// sends (email, sms, http with idempotency_key) have to themselves; give
	// a worker its concurrency, so that no record waits for a connection.
	// Default worker.DefaultConcurrency(), a worker's default concurrency. Connections
	// are dialled only as sends need them.
	EffectsPool int
}

// Runtime is a connected distributed runtime.
type Runtime struct {
	Broker   *amqp.Broker
	Redis    goredis.UniversalClient
	Engine   *engine.Engine
	Timers   *coordredis.Timers
	Coord    *coordredis.Coordinator
	Barriers *coordredis.Barriers

	effects goredis.UniversalClient // the sends' records' own pool, when the runtime made it
}

// Connect connects to RabbitMQ and Redis and builds the engine.
func Connect(ctx context.Context, cfg Config) (*Runtime, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Role == "" {
		cfg.Role = amqp.RoleWorker
	}
	conn, err := coordredis.Open(cfg.RedisURL)
	if err != nil {
		return nil, err
	}
	rc := conn.Client
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := rc.Ping(pctx).Err(); err != nil {
		rc.Close()
		return nil, fmt.Errorf("connect to Redis at %s: %w (is it running? check the Redis URL)", strings.Join(conn.Addrs, ","), err)
	}
	qprefix, kprefix := "", coordredis.DefaultPrefix
	if cfg.Prefix != "" {
		qprefix, kprefix = cfg.Prefix+".", cfg.Prefix
	}
	b, err := amqp.New(ctx, amqp.Config{URL: cfg.AMQPURL, Prefix: qprefix, Role: cfg.Role, Logger: cfg.Logger, Name: "rune " + cfg.Role, Signing: cfg.Signing,
		QueueType: cfg.QueueType, ExecutionQueues: cfg.ExecutionQueues, MessageBatch: cfg.MessageBatch})
	if err != nil {
		rc.Close()
		return nil, fmt.Errorf("connect to RabbitMQ: %w (is it running? check the AMQP URL)", err)
	}
	r := &Runtime{
		Broker:   b,
		Redis:    rc,
		Coord:    coordredis.New(rc, coordredis.Options{Prefix: kprefix, TTL: conn.TTL}),
		Barriers: coordredis.NewBarriers(rc, coordredis.BarrierOptions{Prefix: kprefix, Shards: conn.Shards}),
		Timers:   coordredis.NewTimers(rc, coordredis.TimerOptions{Prefix: kprefix, Shards: conn.Shards}),
	}
	if cfg.Nodes.Effects == nil { // sends recorded once for every worker
		// On a pool of their own, large enough that a send's record never
		// waits for a connection: a worker killed while it waits would send
		// that mail again (docs/dsl.md, "Sending exactly once").
		pool := cfg.EffectsPool
		if pool <= 0 {
			pool = worker.DefaultConcurrency()
		}
		ec, err := coordredis.OpenPool(cfg.RedisURL, pool)
		if err != nil {
			r.Close()
			return nil, err
		}
		r.effects = ec.Client
		cfg.Nodes.Effects = coordredis.NewEffects(ec.Client, coordredis.EffectOptions{Prefix: kprefix})
	}
	var routed func(context.Context, string) (bool, error)
	if cfg.Role != amqp.RoleMaster { // a master never replays a completer
		routed = b.CompletionRouted
	}
	r.Engine, err = engine.New(engine.Config{
		CompletionRouted: routed,
		Registry:         nodes.NewRegistry(cfg.Nodes),
		Coord:            r.Coord,
		Barriers:         r.Barriers,
		Timers:           r.Timers,
		// One shard: the Coordinator keeps it with the execution's keys.
		Blobs: coordredis.NewBlobs(rc, coordredis.BlobOptions{Prefix: kprefix, TTL: conn.TTL}),
		// Definitions outlive the longest wait and the state of its
		// execution; there are few of them. On a cluster they are spread
		// over its masters (conn.Shards).
		Definitions: coordredis.NewBlobs(rc, coordredis.BlobOptions{Prefix: kprefix, TTL: definitionsTTL(conn.TTL), Shards: conn.Shards}),
		Secrets:     cfg.Secrets,
		Logger:      cfg.Logger,
		Metrics:     cfg.Metrics,
		NoFuse:      cfg.NoFuse,
		// Rate limits and throttles by key, shared by every worker.
		Limiter: coordredis.NewLimiter(rc, coordredis.LimiterOptions{Prefix: kprefix}),
		// issue 34: wait_for_event's waits and the events sent to them.
		Events:         coordredis.NewEvents(rc, coordredis.EventOptions{Prefix: kprefix}),
		EventRetention: cfg.EventRetention,
		// issue 34: the ends of child executions, for every worker
		ChildResults: cfg.Nodes.Effects,
		// issue 36: the open digests of digest nodes, for every worker
		Digests: coordredis.NewDigests(rc, coordredis.DigestOptions{Prefix: kprefix}),
	})
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// definitionsTTL is how long the workflow definitions outlive their last
// use (a frozen wait's, every Put): the longest wait docs/dsl.md allows (366
// days) plus the execution's TTL, and never less than 400 days.
func definitionsTTL(ttl time.Duration) time.Duration {
	return max(400*24*time.Hour, 366*24*time.Hour+ttl)
}

// DurabilityWarnings says what in Redis's configuration would lose timers.
func (r *Runtime) DurabilityWarnings(ctx context.Context) ([]string, error) {
	return coordredis.CheckDurability(ctx, r.Redis)
}

// DeleteTopology deletes this runtime's queues and exchanges and its Redis
// keys: tests and benchmarks with a prefix of their own clean up with it.
func (r *Runtime) DeleteTopology(ctx context.Context, prefix string) error {
	err := r.Broker.DeleteTopology(ctx)
	return errors.Join(err, coordredis.DeleteKeys(ctx, r.Redis, prefix+":*"))
}

// Close releases the connections.
func (r *Runtime) Close() {
	r.Broker.Close()
	r.Redis.Close()
	if r.effects != nil {
		r.effects.Close()
	}
}
