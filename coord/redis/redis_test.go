package redis_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/coord/coordtest"
	"github.com/rune-org/rune/coord/redis"
	"github.com/rune-org/rune/internal/testinfra"
)

// newClient returns a client of the test Redis; it deletes the keys under
// prefix when the test ends.
func newClient(t testing.TB, prefix string) *goredis.Client {
	t.Helper()
	opts, err := goredis.ParseURL(testinfra.RedisURL(t))
	if err != nil {
		t.Fatalf("parse Redis URL: %v", err)
	}
	client := goredis.NewClient(opts)
	t.Cleanup(func() {
		ctx := context.Background()
		keys, err := client.Keys(ctx, prefix+":*").Result()
		if err == nil && len(keys) > 0 {
			client.Del(ctx, keys...)
		}
		client.Close()
	})
	return client
}

// newCoord returns a Coordinator under a prefix of its own, its client and
// the prefix.
func newCoord(t testing.TB, opts redis.Options) (*redis.Coordinator, *goredis.Client, string) {
	t.Helper()
	opts.Prefix = testinfra.Name(t)
	client := newClient(t, opts.Prefix)
	c := redis.New(client, opts)
	if err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c, client, opts.Prefix
}

func TestConformance(t *testing.T) {
	coordtest.Run(t, func(t *testing.T) coord.Coordinator {
		c, _, _ := newCoord(t, redis.Options{})
		return c
	})
}

// hashTag is the part of key that Redis Cluster hashes: between the first
// '{' and the next '}', when that is not empty.
func hashTag(key string) string {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return key
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return key
	}
	return key[i+1 : i+1+j]
}

// TestKeys: every key of an execution carries its hash tag and a TTL, which
// each Finish refreshes.
func TestKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ttl = time.Hour
	c, client, prefix := newCoord(t, redis.Options{TTL: ttl})
	for _, exec := range []string{"exec-1", "odd}exec{"} {
		if err := c.Start(ctx, exec, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Finish(ctx, exec, "a", coord.Finish{Spawned: 2, Record: coord.Bytes("r")}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Finish(ctx, exec, "b", coord.Finish{End: map[string]any{"$b": 1.0}}); err != nil {
			t.Fatal(err)
		}
	}
	keys, err := client.Keys(ctx, prefix+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	byTag := map[string]int{}
	for _, k := range keys {
		byTag[hashTag(k)]++
		pttl, err := client.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if pttl <= ttl-time.Minute || pttl > ttl {
			t.Errorf("key %q: TTL %v, want about %v", k, pttl, ttl)
		}
	}
	// meta, done and ctx of each execution, in one slot per execution.
	if want := map[string]int{"exec-1": 3, "odd": 3}; len(byTag) != 2 || byTag["exec-1"] != 3 || byTag["odd"] != 3 {
		t.Fatalf("keys by hash tag %v, want %v", byTag, want)
	}

	// Finish refreshes the TTL of every key.
	base := prefix + ":{exec-1}:"
	for _, what := range []string{"meta", "done", "ctx"} {
		client.PExpire(ctx, base+what, 10*time.Second)
	}
	if _, err := c.Finish(ctx, "exec-1", "c", coord.Finish{Spawned: 1}); err != nil {
		t.Fatal(err)
	}
	for _, what := range []string{"meta", "done", "ctx"} {
		if pttl := client.PTTL(ctx, base+what).Val(); pttl <= ttl-time.Minute {
			t.Errorf("key %s after Finish: TTL %v, want refreshed to about %v", what, pttl, ttl)
		}
	}
}

// TestRetain: once an execution ended, its keys expire after Retain; then
// Begin drops and Finish fails with ErrUnknownExecution.
func TestRetain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const retain = 300 * time.Millisecond
	c, client, prefix := newCoord(t, redis.Options{Retain: retain})
	if err := c.Start(ctx, "e", 1); err != nil {
		t.Fatal(err)
	}
	o, err := c.Finish(ctx, "e", "a", coord.Finish{End: map[string]any{"$a": "x"}, Record: coord.Bytes("r")})
	if err != nil || !o.Last() {
		t.Fatalf("Finish: %+v, %v; want Last", o, err)
	}
	var ours []string
	for _, what := range []string{"meta", "done", "ctx"} {
		k := prefix + ":{e}:" + what
		if pttl := client.PTTL(ctx, k).Val(); pttl <= 0 || pttl > retain {
			t.Fatalf("key %q after the end: TTL %v, want within Retain %v", k, pttl, retain)
		}
		ours = append(ours, k)
	}
	if keys := client.Keys(ctx, prefix+":*").Val(); len(keys) != 3 {
		t.Fatalf("keys after the end: %v, want meta, done and ctx", keys)
	}
	if b, _ := c.Begin(ctx, "e", "a"); b.State != coord.Replay {
		t.Fatalf("Begin right after the end: %v, want replay", b.State)
	}
	deadline := time.Now().Add(5 * time.Second)
	for client.Exists(ctx, ours...).Val() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("keys %v still exist 5s after the end with Retain %v", ours, retain)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if b, err := c.Begin(ctx, "e", "a"); err != nil || b.State != coord.Drop {
		t.Fatalf("Begin after Retain: %v, %v; want drop", b.State, err)
	}
	if _, err := c.Finish(ctx, "e", "a", coord.Finish{}); !errors.Is(err, coord.ErrUnknownExecution) {
		t.Fatalf("Finish after Retain: %v, want ErrUnknownExecution", err)
	}
}

// TestOneRoundTrip: each operation is a single command once the scripts are
// cached.
func TestOneRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, client, _ := newCoord(t, redis.Options{})
	// Warm the script cache (a cold EVALSHA falls back to EVAL).
	if err := c.Start(ctx, "warm", 1); err != nil {
		t.Fatal(err)
	}
	c.Begin(ctx, "warm", "a")
	c.Finish(ctx, "warm", "a", coord.Finish{})

	hook := &tripHook{}
	client.AddHook(hook)
	steps := []step{
		{"Start", func() error { return c.Start(ctx, "e", 1) }},
		{"Begin", func() error { _, err := c.Begin(ctx, "e", "a"); return err }},
		{"Finish", func() error {
			_, err := c.Finish(ctx, "e", "a", coord.Finish{Spawned: 1, End: map[string]any{"$x": 1.0}, Record: coord.Bytes("r")})
			return err
		}},
		{"last Finish", func() error { _, err := c.Finish(ctx, "e", "b", coord.Finish{}); return err }},
	}
	oneTripEach(t, hook, steps)
}

// BenchmarkBeginFinish measures one Begin plus one Finish, as a worker does
// per node execution, over chains of 100 messages per execution: from one
// goroutine (latency) and from 4 per CPU (throughput).
func BenchmarkBeginFinish(b *testing.B) {
	b.Run("serial", func(b *testing.B) { benchBeginFinish(b, 0) })
	b.Run("parallel", func(b *testing.B) { benchBeginFinish(b, 4) })
}

func benchBeginFinish(b *testing.B, parallelism int) {
	c, _, _ := newCoord(b, redis.Options{Retain: 10 * time.Second})
	coordtest.BenchBeginFinish(b, c, parallelism)
}
