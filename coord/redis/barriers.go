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
const DefaultBarrierTTL = 24 * time.Hour

// BarrierOptions configures Barriers. The zero value gives the defaults.
type BarrierOptions struct {
	// Prefix starts every key. Default "rune". It must not contain '{' or
	// '}', which would move the hash tag.
	Prefix string
	// Retain is how long a completed barrier keeps its values and state, so
	// that a repeat of the completing arrival gets the completed Arrival
	// again. Default 10 minutes.
	Retain time.Duration
}

var (
	//go:embed arrive.lua
	arriveLua string
	//go:embed open.lua
	openLua string
	//go:embed cancel.lua
	cancelLua string

	arriveScript = goredis.NewScript(arriveLua)
	openScript   = goredis.NewScript(openLua)
	cancelScript = goredis.NewScript(cancelLua)
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
type Barriers struct {
	client goredis.UniversalClient
	prefix string
	retain string // milliseconds, as the scripts take them
}

var _ coord.Barriers = (*Barriers)(nil)

// NewBarriers returns Barriers on client. It panics on invalid options (a
// negative Retain, a Prefix with '{' or '}'): that is a programming error.
// The caller keeps ownership of client.
func NewBarriers(client goredis.UniversalClient, opts BarrierOptions) *Barriers {
	return &Barriers{client: client, prefix: keyPrefix("BarrierOptions", opts.Prefix),
		retain: millis(orDefault("BarrierOptions.Retain", opts.Retain, DefaultRetain))}
}

// keys returns the meta, vals and state keys of barrier key of exec.
func (b *Barriers) keys(exec, key string) []string {
	x := b.prefix + ":{" + exec + "}:"
	base := x + "bar:" + key + ":"
	return []string{base + "meta", base + "vals", base + "state", x + "closed"}
}

// checkSpec validates spec and returns its TTL in milliseconds.
func checkSpec(spec coord.BarrierSpec) (string, error) {
	if spec.Total < 1 {
		return "", fmt.Errorf("spec.Total is %d, want at least 1", spec.Total)
	}
	if spec.Need < 1 || spec.Need > spec.Total {
		return "", fmt.Errorf("spec.Need is %d, want 1..Total (%d)", spec.Need, spec.Total)
	}
	if spec.TTL < 0 {
		return "", fmt.Errorf("spec.TTL is negative (%v)", spec.TTL)
	}
	if spec.TTL == 0 {
		spec.TTL = DefaultBarrierTTL
	}
	return millis(spec.TTL), nil
}

// Open implements coord.Barriers.
func (b *Barriers) Open(ctx context.Context, exec, key string, spec coord.BarrierSpec) error {
	where := func(err error) error {
		return fmt.Errorf("coord/redis: Open barrier %q exec %q: %w", key, exec, err)
	}
	ttl, err := checkSpec(spec)
	if err != nil {
		return where(err)
	}
	hasState := "0"
	if spec.State != nil {
		hasState = "1"
	}
	k := b.keys(exec, key)
	err = openScript.Run(ctx, b.client, []string{k[0], k[2], k[3]}, spec.Total, spec.Need, ttl, hasState, spec.State, key).Err()
	if err != nil {
		return where(err)
	}
	return nil
}

// Arrive implements coord.Barriers.
func (b *Barriers) Arrive(ctx context.Context, exec, key string, spec coord.BarrierSpec, slot int, value []byte) (coord.Arrival, error) {
	where := func(err error) error {
		return fmt.Errorf("coord/redis: Arrive barrier %q exec %q slot %d: %w", key, exec, slot, err)
	}
	ttl, err := checkSpec(spec)
	if err != nil {
		return coord.Arrival{}, where(err)
	}
	if value == nil {
		value = []byte{} // go-redis would send nil as "" anyway; be explicit
	}
	reply, err := arriveScript.Run(ctx, b.client, b.keys(exec, key),
		spec.Total, spec.Need, ttl, slot, value, b.retain, key).Slice()
	if err != nil {
		return coord.Arrival{}, where(err)
	}
	a, err := parseArrival(reply)
	if err != nil {
		return coord.Arrival{}, where(err)
	}
	return a, nil
}

// parseArrival reads arrive.lua's reply.
func parseArrival(reply []any) (coord.Arrival, error) {
	if len(reply) == 0 {
		return coord.Arrival{}, errors.New("empty reply")
	}
	code, _ := reply[0].(int64)
	switch {
	case code == -1:
		return coord.Arrival{}, fmt.Errorf("%w: cancelled", coord.ErrBarrierClosed)
	case code == -2 && len(reply) == 2:
		total, _ := reply[1].(int64)
		// Checked in the script against the barrier's own Total.
		return coord.Arrival{}, fmt.Errorf("slot out of range 0..%d", total-1)
	case code == -3 && len(reply) == 2:
		return coord.Arrival{}, fmt.Errorf("%w: completed by slot %v", coord.ErrBarrierClosed, reply[1])
	case code == 0 && len(reply) == 3:
		dup, _ := reply[1].(int64)
		n, _ := reply[2].(int64)
		return coord.Arrival{Duplicate: dup == 1, Arrived: int(n)}, nil
	case code != 1 || len(reply) != 6:
		return coord.Arrival{}, fmt.Errorf("unexpected reply %.200v", reply)
	}
	dup, _ := reply[1].(int64)
	n, _ := reply[2].(int64)
	a := coord.Arrival{Duplicate: dup == 1, Arrived: int(n), Complete: true}
	if s, ok := reply[3].(string); ok {
		a.State = []byte(s)
	}
	total, _ := reply[4].(int64)
	kv, _ := reply[5].([]any)
	if len(kv)%2 != 0 || total < 1 {
		return coord.Arrival{}, fmt.Errorf("unexpected completion of %d values for Total %d", len(kv), total)
	}
	a.Values = make([][]byte, total)
	for i := 0; i < len(kv); i += 2 {
		f, _ := kv[i].(string)
		s, err := strconv.Atoi(f)
		if err != nil || s < 0 || s >= len(a.Values) {
			return coord.Arrival{}, fmt.Errorf("values hash field %q is no slot of 0..%d", f, total-1)
		}
		v, _ := kv[i+1].(string)
		a.Values[s] = []byte(v)
	}
	return a, nil
}

// Cancel implements coord.Barriers.
func (b *Barriers) Cancel(ctx context.Context, exec, key string) (bool, error) {
	n, err := cancelScript.Run(ctx, b.client, b.keys(exec, key), millis(DefaultBarrierTTL), key).Int()
	if err != nil {
		return false, fmt.Errorf("coord/redis: Cancel barrier %q exec %q: %w", key, exec, err)
	}
	return n == 1, nil
}
