package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rune-org/rune/broker/amqp"
	coordredis "github.com/rune-org/rune/coord/redis"
	"github.com/rune-org/rune/embedded"
)

// ownPrefix gives a distributed bench a deployment of its own when it
// spawns its workers; the deployment is deleted at the end.
func ownPrefix(env *Env, srv *Deployment, spawn int) (cleanup func()) {
	if srv.Prefix != "" || spawn == 0 {
		return func() {}
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	srv.Prefix = "bench-" + hex.EncodeToString(b[:])
	return func() { purgeDeployment(env, srv) }
}

// benchFanout runs one split over n items → set → aggregator, embedded or
// (with --amqp) distributed on running or spawned workers.
func benchFanout(ctx context.Context, env *Env, srv *Deployment, n, spawn, concurrency int, asJSON bool) error {
	cfg := FanoutConfig{Items: n, Progress: env.Stderr}
	var res *FanoutResult
	var err error
	if srv.AMQPURL == "" {
		rt, err := embedded.New(embedded.Options{Logger: env.Logger, Concurrency: concurrency})
		if err != nil {
			return err
		}
		defer rt.Close()
		cfg.Sample = func() (uint64, uint64) { return PeakRSS(), 0 }
		fmt.Fprintf(env.Stderr, "rune bench: fan-out over %d items, embedded runtime\n", n)
		if res, err = Fanout(ctx, rt.Broker, rt.Engine, cfg); err != nil {
			return err
		}
	} else {
		if err := srv.check(true); err != nil {
			return err
		}
		defer ownPrefix(env, srv, spawn)()
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		if spawn > 0 {
			args := append([]string{"worker"}, srv.args()...)
			if concurrency > 0 {
				args = append(args, "--concurrency", strconv.Itoa(concurrency))
			}
			workers, err := spawnWorkers(spawn, args, cancel)
			if err != nil {
				return err
			}
			defer workers.stop(env)
			cfg.Sample = func() (uint64, uint64) { return workers.peakRSS(), redisUsed(ctx, srv) }
		}
		rt, err := srv.connect(ctx, env.Logger, amqp.RoleMaster)
		if err != nil {
			return err
		}
		defer rt.Close()
		fmt.Fprintf(env.Stderr, "rune bench: fan-out over %d items, distributed runtime, prefix %q\n", n, srv.Prefix)
		if res, err = Fanout(ctx, rt.Broker, rt.Engine, cfg); err != nil {
			return err
		}
	}
	if asJSON {
		return json.NewEncoder(env.Stdout).Encode(res)
	}
	res.Print(env.Stdout)
	return err
}

// redisUsed reads Redis's used_memory, summed over the masters of a
// cluster (0 when it cannot): a cluster client's INFO would ask one node.
func redisUsed(ctx context.Context, srv *Deployment) uint64 {
	rt := srv.redisClient()
	if rt == nil {
		return 0
	}
	defer rt.Close()
	var total atomic.Uint64
	read := func(ctx context.Context, c *goredis.Client) error {
		mem, err := c.InfoMap(ctx, "memory").Result()
		if err != nil {
			return err
		}
		u, _ := strconv.ParseUint(mem["Memory"]["used_memory"], 10, 64)
		total.Add(u)
		return nil
	}
	var err error
	switch c := rt.(type) {
	case *goredis.ClusterClient:
		err = c.ForEachMaster(ctx, read)
	case *goredis.Client:
		err = read(ctx, c)
	}
	if err != nil {
		return 0
	}
	return total.Load()
}

type timerBench struct {
	executions, startRate, pending, rate, spawn, concurrency int
	wait                                                     time.Duration
	asJSON                                                   bool
}

// benchTimers measures (a) how late waits resume with many executions
// waiting at once, and (b) a backlog of pending timers on Redis.
func benchTimers(ctx context.Context, env *Env, srv *Deployment, o timerBench) error {
	if srv.AMQPURL == "" {
		return usagef("--mode timers measures the distributed runtime: give --amqp and --redis")
	}
	if err := srv.check(true); err != nil {
		return err
	}
	defer ownPrefix(env, srv, o.spawn)()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var workers *workerGroup
	if o.spawn > 0 {
		args := append([]string{"worker", "--scheduler"}, srv.args()...)
		if o.concurrency > 0 {
			args = append(args, "--concurrency", strconv.Itoa(o.concurrency))
		}
		var err error
		if workers, err = spawnWorkers(o.spawn, args, cancel); err != nil {
			return err
		}
		defer workers.stop(env)
	}
	rt, err := srv.connect(ctx, env.Logger, amqp.RoleMaster)
	if err != nil {
		return err
	}
	defer rt.Close()
	report := map[string]any{}
	fmt.Fprintf(env.Stderr, "rune bench: %d executions each waiting %s, started %s, prefix %q\n", o.executions, o.wait, StartPace(o.startRate), srv.Prefix)
	lat, err := TimerLateness(ctx, TimerLatenessConfig{Broker: rt.Broker, Engine: rt.Engine, Executions: o.executions, Wait: o.wait,
		StartRate: o.startRate, Progress: env.Stderr})
	if err != nil {
		return err
	}
	report["lateness"] = lat
	latTitle := fmt.Sprintf("timers (a): %d executions waiting %s, started %s", o.executions, o.wait, StartPace(o.startRate))
	if o.pending > 0 {
		workers.stop(env) // the backlog gets the machine to itself
		// The backlog has a timer store of its own, so that no scheduler of
		// the deployment claims its timers (their definition is not in
		// Redis), and its keys go at the end.
		var b [6]byte
		_, _ = rand.Read(b[:])
		// As many shards as the deployment's timers (a Redis Cluster's).
		timers := coordredis.NewTimers(rt.Redis, coordredis.TimerOptions{Prefix: "bench-backlog-" + hex.EncodeToString(b[:]), Shards: rt.Timers.Shards()})
		defer func() {
			for i := range timers.Shards() { // one slot per UNLINK on a cluster
				rt.Redis.Unlink(context.WithoutCancel(ctx), timers.ShardKeys(i)...)
			}
		}()
		fmt.Fprintf(env.Stderr, "rune bench: a backlog of %d pending timers, %d/s coming due\n", o.pending, o.rate)
		backlog, err := TimerBacklog(ctx, TimerBacklogConfig{Timers: timers, Redis: rt.Redis, Pending: o.pending, Rate: o.rate, Progress: env.Stderr})
		if err != nil {
			return err
		}
		report["backlog"] = backlog
		if o.asJSON {
			return json.NewEncoder(env.Stdout).Encode(report)
		}
		lat.Print(env.Stdout, latTitle)
		backlog.Print(env.Stdout, fmt.Sprintf("timers (b): %d pending timers, %d/s due", o.pending, o.rate))
		return nil
	}
	if o.asJSON {
		return json.NewEncoder(env.Stdout).Encode(report)
	}
	lat.Print(env.Stdout, latTitle)
	return nil
}
