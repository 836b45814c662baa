package redis_test

import (
	"context"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rune-org/rune/coord/redis"
	"github.com/rune-org/rune/internal/testinfra"
)

// TestCheckDurability runs against the test Redis, which runs without
// persistence (--save "" --appendonly no): it must warn about that, naming
// the settings. It reads the configuration and never changes it.
func TestCheckDurability(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := newClient(t, testinfra.Name(t))
	cfg, err := client.ConfigGet(ctx, "*").Result()
	if err != nil {
		testinfra.Unavailable(t, "CONFIG GET refused by the test Redis: %v", err)
	}
	warnings, err := redis.CheckDurability(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("warnings: %q", warnings)
	has := func(subs ...string) bool {
		for _, w := range warnings {
			ok := true
			for _, s := range subs {
				ok = ok && strings.Contains(w, s)
			}
			if ok {
				return true
			}
		}
		return false
	}
	if cfg["appendonly"] == "no" && cfg["save"] == "" {
		if !has("appendonly yes", "save") {
			t.Errorf("no persistence configured, but no warning naming appendonly and save: %q", warnings)
		}
	} else if has("appendonly yes") {
		t.Errorf("persistence is configured (appendonly %q, save %q), yet warned: %q", cfg["appendonly"], cfg["save"], warnings)
	}
	if policy := cfg["maxmemory-policy"]; policy != "noeviction" {
		if !has("maxmemory-policy noeviction", policy) {
			t.Errorf("maxmemory-policy %q, but no warning naming it: %q", policy, warnings)
		}
	} else if has("maxmemory-policy") {
		t.Errorf("maxmemory-policy is noeviction, yet warned: %q", warnings)
	}
}

// TestCheckDurabilityUnreachable: a Redis that cannot be reached is an
// error, not a warning.
func TestCheckDurabilityUnreachable(t *testing.T) {
	t.Parallel()
	client := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if w, err := redis.CheckDurability(ctx, client); err == nil {
		t.Fatalf("CheckDurability of an unreachable Redis: warnings %q and no error", w)
	}
}

// refusedError is an error reply, as Redis gives for a renamed CONFIG.
type refusedError string

func (e refusedError) Error() string { return string(e) }
func (refusedError) RedisError()     {}

// refuseConfig answers every CONFIG command with an error reply, as a
// managed Redis that disabled CONFIG does, without sending it.
type refuseConfig struct{}

func (refuseConfig) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (refuseConfig) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		return refuseConfig{}.ProcessPipelineHook(func(ctx context.Context, cmds []goredis.Cmder) error {
			return next(ctx, cmds[0])
		})(ctx, []goredis.Cmder{cmd})
	}
}
func (refuseConfig) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		var err error
		for _, c := range cmds {
			if strings.EqualFold(c.Name(), "config") {
				err = refusedError("ERR unknown command 'CONFIG'")
				c.SetErr(err)
			}
		}
		if err != nil {
			return err
		}
		return next(ctx, cmds)
	}
}

// TestCheckDurabilityRefused: when Redis refuses CONFIG, the answer is a
// warning that durability could not be checked, not an error.
func TestCheckDurabilityRefused(t *testing.T) {
	t.Parallel()
	client := newClient(t, testinfra.Name(t))
	client.AddHook(refuseConfig{})
	warnings, err := redis.CheckDurability(context.Background(), client)
	if err != nil {
		t.Fatalf("CheckDurability with CONFIG refused: %v, want a warning", err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "could not check durability") || !strings.Contains(warnings[0], "noeviction") {
		t.Fatalf("warnings %q, want one saying durability could not be checked", warnings)
	}
}
