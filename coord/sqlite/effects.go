package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/rune-org/rune/coord"
)

// Effects implements coord.Effects on the Store's file: a row of
// coord_effect per key (intents counted, the recorded result or NULL, its
// last use). Each call is one statement in the group commit, so a Record
// that returned nil survives a kill -9 (and is never repeated by the
// restart's redeliveries). A key unused for Options.EffectsRetain counts as
// gone, and the sweep deletes it.
type Effects struct{ s *Store }

var _ coord.Effects = (*Effects)(nil)

// Begin implements coord.Effects.
func (e *Effects) Begin(ctx context.Context, key string) (coord.Effect, error) {
	if key == "" {
		return coord.Effect{}, fmt.Errorf("coord/sqlite: Effects.Begin: empty key")
	}
	var (
		intents int
		result  []byte
		done    bool
	)
	err := e.s.write(ctx, func(tx *sql.Tx) error {
		now := e.s.nowMs()
		return e.s.stmt(tx, "effect_begin").QueryRow(key, now, now-e.s.opts.EffectsRetain.Milliseconds()).Scan(&intents, &done, &result)
	})
	if err != nil {
		return coord.Effect{}, fmt.Errorf("coord/sqlite: Effects.Begin %q: %w", key, err)
	}
	if done {
		if result == nil {
			result = []byte{}
		}
		return coord.Effect{Done: true, Result: result}, nil
	}
	return coord.Effect{Intents: intents}, nil
}

// Record implements coord.Effects.
func (e *Effects) Record(ctx context.Context, key string, result []byte) error {
	return e.withResult(ctx, "Record", "effect_record", key, result)
}

// Withdraw implements coord.Effects.
func (e *Effects) Withdraw(ctx context.Context, key string, result []byte) error {
	return e.withResult(ctx, "Withdraw", "effect_withdraw", key, result)
}

// withResult runs query, Record's or Withdraw's, with key's result.
func (e *Effects) withResult(ctx context.Context, op, query, key string, result []byte) error {
	if key == "" {
		return fmt.Errorf("coord/sqlite: Effects.%s: empty key", op)
	}
	if result == nil {
		result = []byte{} // a result, unlike NULL
	}
	err := e.s.write(ctx, func(tx *sql.Tx) error {
		now := e.s.nowMs()
		_, err := e.s.stmt(tx, query).Exec(key, now, now-e.s.opts.EffectsRetain.Milliseconds(), result)
		return err
	})
	if err != nil {
		return fmt.Errorf("coord/sqlite: Effects.%s %q: %w", op, key, err)
	}
	return nil
}
