package redis

import (
	_ "embed"

	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rune-org/rune/coord"
)

// DefaultBarrierTTL is the TTL of a barrier whose spec gives none, and of
// the closed marker that Cancel leaves for a barrier that did not exist.
const DefaultBarrierTTL = coord.DefaultBarrierTTL

// BarrierOptions configures Barriers. The zero value gives the defaults.
type BarrierOptions struct {
	// Prefix starts every key. Default "rune". It must not contain '{' or
	// '}', which would move the hash tag.
	Prefix string
	// Retain is how long a completed barrier keeps its values and state, so
	// that a repeat of the completing arrival gets the completed Arrival
	// again. Default 10 minutes.
	Retain time.Duration
	// Shards is how many hashes, each with a hash tag of its own (so each
	// its own Redis Cluster slot), a barrier's values are spread over: slot
	// s's value is in shard s % Shards. Default 1: the values are a field of
	// the barrier's vals hash and every operation is one script. With more,
	// an Arrive is two round trips (the value, then the count) and the
	// completing one three (the values read back from the shards); what the
	// execution's slot holds per arrival shrinks to one bit. Distributed
	// runtimes take the Redis URL's shards parameter (Connection.Shards). It
	// must not change for a store in use: the values of a barrier opened
	// under one count are not found under another.
	Shards int
}

var (
	//go:embed arrive.lua
	arriveLua string
	//go:embed open.lua
	openLua string
	//go:embed cancel.lua
	cancelLua string
	//go:embed barval.lua
	barvalLua string
	//go:embed barvals.lua
	barvalsLua string

	arriveScript  = goredis.NewScript(arriveLua)
	openScript    = goredis.NewScript(openLua)
	cancelScript  = goredis.NewScript(cancelLua)
	barvalScript  = goredis.NewScript(barvalLua)
	barvalsScript = goredis.NewScript(barvalsLua)
)

// Barriers implements coord.Barriers on Redis, one Lua script per operation
// (open.lua, arrive.lua, cancel.lua). The keys of barrier K of execution X
// are
//
//	<prefix>:{X}:bar:K:meta   hash: st (open|done|cancelled), total, need,
//	                          n (distinct arrivals), win (completing slot), ttl
//	<prefix>:{X}:bar:K:vals   hash: slot -> value (HSETNX: once per slot)
//	<prefix>:{X}:bar:K:state  string: Open's state
//	<prefix>:{X}:closed       hash: K -> "done:<slot>" | "cancelled", one
//	                          field per closed barrier of X
//
// with the execution's {X} hash tag, next to the Coordinator's keys. Every
// key expires: the spec's TTL after the last Open or Arrive while open. On
// completion meta, vals and state expire after Retain (for the completer's
// repeat); Cancel deletes them at once. A closed barrier leaves a field in
// the closed hash, so that late arrivals cannot open it anew: the hash lives
// at least the longest TTL of its barriers, and the Coordinator (same
// Prefix) refreshes it with the execution's keys and lets it go Retain after
// the execution ends (docs/operations.md, "Redis").
//
// The completing Arrive gets every value in the same round trip: 100,000
// values of 100 bytes come back in one reply of about 10 MB.
//
// With BarrierOptions.Shards n > 1 the values leave the execution's slot,
// which keeps only what decides the barrier atomically:
//
//	<prefix>:{X}:bar:K:seen            bitmap: bit s set once slot s counted
//	                                   (instead of vals)
//	<prefix>:{X/K/i}:bar:K:vals.i      hash: slot -> value for the slots s
//	                                   with s % n == i (HSETNX), i in 0..n-1
//
// so the values of one large fan-out spread over n slots, and over the
// masters of a Redis Cluster, while the count and the decision stay in X's
// slot (as Temporal binds an execution to one history shard). A shard
// lives twice the barrier's TTL, renewed once per TTL while the barrier is
// open (arrive.lua says when); on completion the completer's read shortens
// every shard's TTL to Retain, so the shards go with meta and seen (a
// renewal landing after it shortens them again, renewShards); Cancel
// deletes them. A late arrival's value, written before the barrier said it
// was closed, is deleted again (or, should that process die in between,
// expires with its shard: at most twice the TTL).
type Barriers struct {
	client goredis.UniversalClient
	prefix string
	retain string // milliseconds, as the scripts take them
	shards int
}

var _ coord.Barriers = (*Barriers)(nil)

// NewBarriers returns Barriers on client. It panics on invalid options (a
// negative Retain, a Prefix with '{' or '}'): that is a programming error.
// The caller keeps ownership of client.
func NewBarriers(client goredis.UniversalClient, opts BarrierOptions) *Barriers {
	if opts.Shards < 0 {
		panic(fmt.Sprintf("coord/redis: BarrierOptions.Shards is negative (%d)", opts.Shards))
	}
	return &Barriers{client: client, prefix: keyPrefix("BarrierOptions", opts.Prefix),
		retain: millis(orDefault("BarrierOptions.Retain", opts.Retain, DefaultRetain)), shards: max(opts.Shards, 1)}
}

// keys returns the meta, vals (with shards: seen), state and closed keys of
// barrier key of exec.
func (b *Barriers) keys(exec, key string) []string {
	x := b.prefix + ":{" + exec + "}:"
	base := x + "bar:" + key + ":"
	slots := base + "vals"
	if b.shards > 1 {
		slots = base + "seen"
	}
	return []string{base + "meta", slots, base + "state", x + "closed"}
}

// shardKey is the hash of barrier key of exec holding the values of the
// slots s with s % shards == i. The tag holds the barrier key too, so the
// small barriers of a nested fan-out spread as well; the suffix repeats it
// (and i), so that no two barriers' shards share a name whatever '/' their
// execution ids and keys hold.
func (b *Barriers) shardKey(exec, key string, i int) string {
	n := strconv.Itoa(i)
	return b.prefix + ":{" + exec + "/" + key + "/" + n + "}:bar:" + key + ":vals." + n
}

// Open implements coord.Barriers.
func (b *Barriers) Open(ctx context.Context, exec, key string, spec coord.BarrierSpec) error {
	where := func(err error) error {
		return fmt.Errorf("coord/redis: Open barrier %q exec %q: %w", key, exec, err)
	}
	ttl, err := spec.Check()
	if err != nil {
		return where(err)
	}
	hasState := "0"
	if spec.State != nil {
		hasState = "1"
	}
	k := b.keys(exec, key)
	err = openScript.Run(ctx, b.client, []string{k[0], k[2], k[3]}, spec.Total, spec.Need, millis(ttl), hasState, spec.State, key).Err()
	if err != nil {
		return where(err)
	}
	return nil
}

// Arrive implements coord.Barriers.
//
// With shards it writes the value to its shard (barval.lua, HSETNX) before
// arrive.lua counts the slot, and that order is what makes it crash-safe:
//   - a crash after the write, before the count: the redelivery's HSETNX
//     writes nothing new (the first value stays, as with one vals hash)
//     and arrive.lua counts the slot once, its bit being still unset;
//   - a crash after the count: the value is there, the bit is set, and the
//     redelivery is a Duplicate;
//   - an arrival after the barrier closed wrote a value no bit refers to
//     (the completer reads only the values of set bits): Arrive deletes it
//     again, or it expires with its shard.
func (b *Barriers) Arrive(ctx context.Context, exec, key string, spec coord.BarrierSpec, slot int, value []byte) (coord.Arrival, error) {
	where := func(err error) error {
		return fmt.Errorf("coord/redis: Arrive barrier %q exec %q slot %d: %w", key, exec, slot, err)
	}
	ttl, err := spec.Check()
	if err != nil {
		return coord.Arrival{}, where(err)
	}
	if value == nil {
		value = []byte{} // go-redis would send nil as "" anyway; be explicit
	}
	shardTTL, written, scriptValue := "", false, value
	if b.shards > 1 {
		if slot < 0 { // no shard to write to; arrive.lua would say the same
			return coord.Arrival{}, where(fmt.Errorf("slot out of range 0..%d", spec.Total-1))
		}
		shardTTL = millis(2 * ttl)
		if written, err = b.writeValue(ctx, exec, key, slot, value, shardTTL); err != nil {
			return coord.Arrival{}, where(err)
		}
		scriptValue = []byte{} // the value is in its shard: the script only counts the slot
	}
	reply, err := arriveScript.Run(ctx, b.client, b.keys(exec, key),
		spec.Total, spec.Need, millis(ttl), slot, scriptValue, b.retain, key, shardTTL).Slice()
	if err != nil {
		return coord.Arrival{}, where(err)
	}
	r, err := parseArrival(reply, b.shards > 1)
	if err == nil && b.shards > 1 {
		err = b.afterArrive(ctx, exec, key, slot, shardTTL, written, &r)
	}
	if err == nil {
		err = r.closed
	}
	if err != nil {
		return coord.Arrival{}, where(err)
	}
	return r.Arrival, nil
}

// writeValue writes slot's value to its shard unless the slot has one
// there, and reports whether it wrote it.
func (b *Barriers) writeValue(ctx context.Context, exec, key string, slot int, value []byte, shardTTL string) (bool, error) {
	i := slot % b.shards
	n, err := barvalScript.Run(ctx, b.client, []string{b.shardKey(exec, key, i)}, slot, value, shardTTL).Int()
	if err != nil {
		return false, fmt.Errorf("write value to shard %d: %w", i, err)
	}
	return n == 1, nil
}

// afterArrive does what arrive.lua's reply asks of a sharded Arrive: renew
// the shards, read the values back on completion, or delete the value just
// written for a slot that was not counted.
func (b *Barriers) afterArrive(ctx context.Context, exec, key string, slot int, shardTTL string, written bool, r *arriveReply) error {
	switch {
	case r.renew:
		return b.renewShards(ctx, exec, key, shardTTL)
	case r.Complete:
		vals, err := b.readValues(ctx, exec, key, r.seen, len(r.Values))
		if err != nil {
			return err
		}
		r.Values = vals
	case r.closed != nil && written && !r.counted:
		// Best effort: else it expires with its shard.
		b.client.HDel(ctx, b.shardKey(exec, key, slot%b.shards), strconv.Itoa(slot))
	}
	return nil
}

// renewShards renews every shard's TTL to shardTTL, as arrive.lua asks of
// a pending arrival. The renewal can land after another arrival completed
// the barrier and shortened the shards to Retain (a split's branches that
// resume from one wait arrive together), and would keep them twice the TTL
// past the execution's end: so it then reads the barrier's state and, the
// barrier no longer open, shortens them again. (In that order: on a
// cluster the shards and the state are on different masters.)
func (b *Barriers) renewShards(ctx context.Context, exec, key, shardTTL string) error {
	_, err := b.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i := range b.shards {
			p.Do(ctx, "PEXPIRE", b.shardKey(exec, key, i), shardTTL)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("renew the value shards' TTL: %w", err)
	}
	st, err := b.client.HGet(ctx, b.keys(exec, key)[0], "st").Result()
	switch {
	case err == nil && st == "open":
		return nil
	case err != nil && !errors.Is(err, goredis.Nil):
		return fmt.Errorf("read the barrier's state after renewing its shards: %w", err)
	}
	_, err = b.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i := range b.shards {
			barvalsScript.Eval(ctx, p, []string{b.shardKey(exec, key, i)}, b.retain)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("shorten the value shards' TTL of a closed barrier: %w", err)
	}
	return nil
}

// readValues reads every shard of a completed barrier of total slots in one
// pipeline (per master on a cluster) and returns the values of the slots
// whose bit is set in seen, in slot order. Each shard's TTL drops to Retain
// on the way, so the values go with the barrier's other keys.
func (b *Barriers) readValues(ctx context.Context, exec, key, seen string, total int) ([][]byte, error) {
	n := min(b.shards, total) // shards past total hold no slot
	cmds := make([]*goredis.Cmd, n)
	_, err := b.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i := range n {
			// EVAL, not EVALSHA: a pipeline cannot fall back on NOSCRIPT.
			cmds[i] = barvalsScript.Eval(ctx, p, []string{b.shardKey(exec, key, i)}, b.retain)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the value shards: %w", err)
	}
	counted := func(s int) bool { return s/8 < len(seen) && seen[s/8]&(0x80>>(s%8)) != 0 }
	vals := make([][]byte, total)
	for i, c := range cmds {
		kv, _ := c.Val().([]any)
		for j := 0; j+1 < len(kv); j += 2 {
			f, _ := kv[j].(string)
			s, err := strconv.Atoi(f)
			if err != nil || s < 0 || s >= total || s%b.shards != i {
				return nil, fmt.Errorf("value shard %d holds field %q, no slot of its own in 0..%d", i, f, total-1)
			}
			if counted(s) {
				v, _ := kv[j+1].(string)
				vals[s] = []byte(v)
			}
		}
	}
	for s := range total {
		if counted(s) && vals[s] == nil {
			return nil, fmt.Errorf("the value of counted slot %d is gone from shard %d", s, s%b.shards)
		}
	}
	return vals, nil
}

// arriveReply is arrive.lua's reply read.
type arriveReply struct {
	coord.Arrival
	closed  error  // ErrBarrierClosed, wrapped, when the barrier is closed to slot
	renew   bool   // sharded: renew every shard's TTL
	counted bool   // sharded, closed: slot was counted before
	seen    string // sharded, complete: the seen bitmap
}

// parseArrival reads arrive.lua's reply (sharded: with shards, see there).
func parseArrival(reply []any, sharded bool) (arriveReply, error) {
	var r arriveReply
	if len(reply) == 0 {
		return r, errors.New("empty reply")
	}
	code, _ := reply[0].(int64)
	switch {
	case code == -1:
		r.closed = fmt.Errorf("%w: cancelled", coord.ErrBarrierClosed)
		return r, nil
	case code == -2 && len(reply) == 2:
		total, _ := reply[1].(int64)
		// Checked in the script against the barrier's own Total.
		r.closed = fmt.Errorf("slot out of range 0..%d", total-1)
		return r, nil
	case code == -3 && len(reply) == 2 && !sharded, code == -3 && len(reply) == 3 && sharded:
		r.closed = fmt.Errorf("%w: completed by slot %v", coord.ErrBarrierClosed, reply[1])
		if sharded {
			c, _ := reply[2].(int64)
			r.counted = c == 1
		}
		return r, nil
	case code == 0 && len(reply) == 3 && !sharded, code == 0 && len(reply) == 4 && sharded:
		dup, _ := reply[1].(int64)
		n, _ := reply[2].(int64)
		r.Arrival = coord.Arrival{Duplicate: dup == 1, Arrived: int(n)}
		if sharded {
			renew, _ := reply[3].(int64)
			r.renew = renew == 1
		}
		return r, nil
	case code != 1 || len(reply) != 6:
		return r, fmt.Errorf("unexpected reply %.200v", reply)
	}
	dup, _ := reply[1].(int64)
	n, _ := reply[2].(int64)
	r.Arrival = coord.Arrival{Duplicate: dup == 1, Arrived: int(n), Complete: true}
	if s, ok := reply[3].(string); ok {
		r.State = []byte(s)
	}
	total, _ := reply[4].(int64)
	if total < 1 {
		return r, fmt.Errorf("unexpected completion for Total %d", total)
	}
	r.Values = make([][]byte, total)
	if sharded {
		r.seen, _ = reply[5].(string)
		return r, nil
	}
	kv, _ := reply[5].([]any)
	if len(kv)%2 != 0 {
		return r, fmt.Errorf("unexpected completion of %d values for Total %d", len(kv), total)
	}
	for i := 0; i < len(kv); i += 2 {
		f, _ := kv[i].(string)
		s, err := strconv.Atoi(f)
		if err != nil || s < 0 || s >= len(r.Values) {
			return r, fmt.Errorf("values hash field %q is no slot of 0..%d", f, total-1)
		}
		v, _ := kv[i+1].(string)
		r.Values[s] = []byte(v)
	}
	return r, nil
}

// Cancel implements coord.Barriers.
func (b *Barriers) Cancel(ctx context.Context, exec, key string) (bool, error) {
	n, err := cancelScript.Run(ctx, b.client, b.keys(exec, key), millis(DefaultBarrierTTL), key).Int()
	if err != nil {
		return false, fmt.Errorf("coord/redis: Cancel barrier %q exec %q: %w", key, exec, err)
	}
	if n == 1 && b.shards > 1 {
		// After cancel.lua: an arrival between the two finds the barrier
		// closed and its value is deleted here or by that arrival. Best
		// effort: the barrier is closed, and this caller must act on it
		// (a retry would get false); shards left behind (an error, or this
		// process dying here) expire within twice the TTL.
		_, _ = b.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i := range b.shards {
				p.Unlink(ctx, b.shardKey(exec, key, i))
			}
			return nil
		})
	}
	return n == 1, nil
}
