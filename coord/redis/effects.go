package redis

import (
	_ "embed"

	"context"
	"errors"
	"fmt"
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
	client goredis.UniversalClient
	prefix string
	retain string
}

var _ coord.Effects = (*Effects)(nil)

// NewEffects returns Effects on client. It panics on invalid options (a
// negative Retain, a Prefix with '{' or '}'): a programming error. The
// caller keeps ownership of client.
func NewEffects(client goredis.UniversalClient, opts EffectOptions) *Effects {
	return &Effects{client: client, prefix: keyPrefix("EffectOptions", opts.Prefix),
		retain: millis(orDefault("EffectOptions.Retain", opts.Retain, DefaultEffectsRetain))}
}

func (e *Effects) key(k string) string { return e.prefix + ":{" + k + "}:effect" }

// Begin implements coord.Effects.
func (e *Effects) Begin(ctx context.Context, key string) (coord.Effect, error) {
	if key == "" {
		return coord.Effect{}, errors.New("coord/redis: Effects.Begin: empty key")
	}
	res, err := effectBeginScript.Run(ctx, e.client, []string{e.key(key)}, e.retain).Slice()
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
	if key == "" {
		return errors.New("coord/redis: Effects.Record: empty key")
	}
	if result == nil {
		result = []byte{}
	}
	if err := effectRecordScript.Run(ctx, e.client, []string{e.key(key)}, result, e.retain).Err(); err != nil {
		return fmt.Errorf("coord/redis: Effects.Record %q: %w", key, err)
	}
	return nil
}

// Withdraw implements coord.Effects.
func (e *Effects) Withdraw(ctx context.Context, key string, result []byte) error {
	if key == "" {
		return errors.New("coord/redis: Effects.Withdraw: empty key")
	}
	if result == nil {
		result = []byte{}
	}
	if err := effectWithdrawScript.Run(ctx, e.client, []string{e.key(key)}, result).Err(); err != nil {
		return fmt.Errorf("coord/redis: Effects.Withdraw %q: %w", key, err)
	}
	return nil
}
