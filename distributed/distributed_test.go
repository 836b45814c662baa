package distributed_test

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/rune-org/rune/broker/amqp"
	"github.com/rune-org/rune/client"
	"github.com/rune-org/rune/distributed"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/internal/testinfra"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/runtimetest"
	"github.com/rune-org/rune/scheduler"
	"github.com/rune-org/rune/worker"
)

// runtime is a distributed runtime with a worker and a scheduler running in
// this process, on queues and keys of its own.
type runtime struct {
	rt     *distributed.Runtime
	prefix string // of queues, exchanges and keys
}

func (r runtime) Run(ctx context.Context, def []byte, input any, onStatus func(*message.NodeStatus)) (*message.Completion, error) {
	wf, err := r.rt.Engine.Compile(def)
	if err != nil {
		return nil, err
	}
	return client.Run(ctx, r.rt.Broker, r.rt.Engine, wf, engine.NewExecutionID(time.Now()), input, onStatus)
}

func newRuntime(t *testing.T) runtimetest.Runtime {
	return newRuntimeWith(t, distributed.Config{})
}

// newRuntimeWith is newRuntime with cfg's Secrets, Signing, Logger and
// RedisURL (when set).
func newRuntimeWith(t *testing.T, cfg distributed.Config) runtime {
	amqpURL, redisURL := testinfra.AMQPURL(t), cfg.RedisURL
	if redisURL == "" {
		redisURL = testinfra.RedisURL(t)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	prefix := testinfra.Name(t)
	rt, err := distributed.Connect(context.Background(), distributed.Config{
		AMQPURL: amqpURL, RedisURL: redisURL, Prefix: prefix, Role: amqp.RoleAdmin, Logger: log,
		Secrets: cfg.Secrets, Signing: cfg.Signing,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = worker.Run(ctx, worker.Config{Broker: rt.Broker, Engine: rt.Engine, Concurrency: 16, Logger: log})
	})
	wg.Go(func() {
		_ = scheduler.Run(ctx, scheduler.Config{Timers: rt.Timers, Broker: rt.Broker, Engine: rt.Engine, Poll: 20 * time.Millisecond, Logger: log})
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		if err := rt.DeleteTopology(context.Background(), prefix); err != nil {
			t.Errorf("clean up: %v", err)
		}
		rt.Close()
	})
	return runtime{rt: rt, prefix: prefix}
}

func TestMain(m *testing.M) {
	code := m.Run()
	testinfra.StopRedisCluster()
	os.Exit(code)
}

func TestRuntimeConformance(t *testing.T) {
	runtimetest.Run(t, newRuntime)
}

// TestRuntimeConformanceCluster runs the suite on the local three-master
// Redis Cluster with the URL's default 16 shards: timers, definitions and
// barrier values (splits, aggregators with skipped items and timeouts,
// merges) in shard keys of their own hash tags.
func TestRuntimeConformanceCluster(t *testing.T) {
	runtimetest.Run(t, func(t *testing.T) runtimetest.Runtime {
		return newRuntimeWith(t, distributed.Config{RedisURL: testinfra.RedisClusterURL(t)})
	})
}

func TestDuplicateAggregatorArrival(t *testing.T) {
	prefix := testinfra.Name(t)
	rt, err := distributed.Connect(context.Background(), distributed.Config{
		AMQPURL: testinfra.AMQPURL(t), RedisURL: testinfra.RedisURL(t), Prefix: prefix,
		Role: amqp.RoleAdmin, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = rt.DeleteTopology(context.Background(), prefix)
		rt.Close()
	}()
	runtimetest.DuplicateArrival(t, rt.Engine, "exec_dup")
}

func TestRetrySpacing(t *testing.T) {
	runtimetest.RetrySpacing(t, newRuntime(t))
}

func TestHaltFromOutside(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t).(runtime)
	runtimetest.HaltFromOutside(t, rt, rt.rt.Engine)
}
