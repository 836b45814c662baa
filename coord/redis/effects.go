package redis

import (
	_ "embed"

	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rune-org/rune/coord"
)

// DefaultEffectsRetain is how long a side effect's record outlives its last use.
const DefaultEffectsRetain = 7 * 24 * time.Hour

// EffectOptions configures Effects. The zero value gives the defaults.
type EffectOptions struct {
	// Prefix starts every key. Default "rune". It must not contain '{' or '}'.
	Prefix string
	// Retain is how long a key is kept after its last Begin or Record: a
	// retry or redelivery later than that acts again. Default 7 days, the
	// longest a live execution's state is kept.
	Retain time.Duration
}

var (
	//go:embed effect_begin.lua
	effectBeginLua string
	//go:embed effect_record.lua
	effectRecordLua string
	//go:embed effect_withdraw.lua
	effectWithdrawLua string

	effectBeginScript    = goredis.NewScript(effectBeginLua)
	effectRecordScript   = goredis.NewScript(effectRecordLua)
	effectWithdrawScript = goredis.NewScript(effectWithdrawLua)
)

// Effects implements coord.Effects on Redis: the effect with key K is the
// hash <prefix>:{K}:effect (i: intents, r: the recorded result), one Lua
// call per operation.
type Effects struct {
	client goredis.Scripter
	prefix string
	retain string
	// base, on a held binding (Hold), is the Effects it came from: a call
	// the held connection fails is made again through it.
	base *Effects
	mu   sync.Mutex // a held connection serves one call at a time
}

var (
	_ coord.Effects = (*Effects)(nil)
	_ coord.Holder  = (*Effects)(nil)
)

// NewEffects returns Effects on client. It panics on invalid options (a
// negative Retain, a Prefix with '{' or '}'): a programming error. The
// caller keeps ownership of client.
func NewEffects(client goredis.UniversalClient, opts EffectOptions) *Effects {
	return &Effects{client: client, prefix: keyPrefix("EffectOptions", opts.Prefix),
		retain: millis(orDefault("EffectOptions.Retain", opts.Retain, DefaultEffectsRetain))}
}

func (e *Effects) key(k string) string { return e.prefix + ":{" + k + "}:effect" }

// Hold implements coord.Holder: the binding runs its calls on one
// connection of the client's pool (on a cluster, to the master of key's
// slot), taken at its first call and given back by release. A call the
// connection fails (a cluster's slot moved, a broken connection) is made
// again through e. Give e a client made by Open or OpenPool: they turn off
// go-redis's maintenance notifications, whose handshake races when held
// connections are dialled at once (go-redis v9.23).
func (e *Effects) Hold(ctx context.Context, key string) (coord.Effects, func()) {
	var c *goredis.Client
	switch cl := e.client.(type) {
	case *goredis.Client:
		c = cl
	case *goredis.ClusterClient:
		m, err := cl.MasterForKey(ctx, e.key(key))
		if err != nil {
			return e, func() {}
		}
		c = m
	default:
		return e, func() {}
	}
	conn := c.Conn()
	return &Effects{client: conn, prefix: e.prefix, retain: e.retain, base: e}, func() { _ = conn.Close() }
}

// run runs script on e's client, and again on its base when e is a held
// binding whose connection failed. The three scripts are safe to repeat:
// a repeated Begin counts one more intent, which only adds a warning.
func (e *Effects) run(ctx context.Context, script *goredis.Script, key string, args ...any) *goredis.Cmd {
	if e.base == nil {
		return script.Run(ctx, e.client, []string{e.key(key)}, args...)
	}
	e.mu.Lock()
	cmd := script.Run(ctx, e.client, []string{e.key(key)}, args...)
	e.mu.Unlock()
	if err := cmd.Err(); err != nil && !errors.Is(err, goredis.Nil) && ctx.Err() == nil {
		return e.base.run(ctx, script, key, args...)
	}
	return cmd
}

// Begin implements coord.Effects.
func (e *Effects) Begin(ctx context.Context, key string) (coord.Effect, error) {
	if key == "" {
		return coord.Effect{}, errors.New("coord/redis: Effects.Begin: empty key")
	}
	res, err := e.run(ctx, effectBeginScript, key, e.retain).Slice()
	if err != nil {
		return coord.Effect{}, fmt.Errorf("coord/redis: Effects.Begin %q: %w", key, err)
	}
	if len(res) != 2 {
		return coord.Effect{}, fmt.Errorf("coord/redis: Effects.Begin %q: unexpected reply %v", key, res)
	}
	if done, _ := res[0].(int64); done == 1 {
		s, _ := res[1].(string)
		return coord.Effect{Done: true, Result: []byte(s)}, nil
	}
	n, _ := res[1].(int64)
	return coord.Effect{Intents: int(n)}, nil
}

// Record implements coord.Effects.
func (e *Effects) Record(ctx context.Context, key string, result []byte) error {
	return e.withResult(ctx, "Record", effectRecordScript, key, result)
}

// Withdraw implements coord.Effects.
func (e *Effects) Withdraw(ctx context.Context, key string, result []byte) error {
	return e.withResult(ctx, "Withdraw", effectWithdrawScript, key, result)
}

// withResult runs script, Record's or Withdraw's, with key's result and
// the retention.
func (e *Effects) withResult(ctx context.Context, op string, script *goredis.Script, key string, result []byte) error {
	if key == "" {
		return fmt.Errorf("coord/redis: Effects.%s: empty key", op)
	}
	if result == nil {
		result = []byte{}
	}
	if err := e.run(ctx, script, key, result, e.retain).Err(); err != nil {
		return fmt.Errorf("coord/redis: Effects.%s %q: %w", op, key, err)
	}
	return nil
}
