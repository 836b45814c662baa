package redis

import (
	_ "embed"

	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rune-org/rune/coord"
)

// TimerOptions configures Timers. The zero value gives the defaults.
type TimerOptions struct {
	// Prefix starts every key. Default "rune". It must not contain '{' or
	// '}', which would move the hash tag.
	Prefix string
}

var (
	//go:embed schedule.lua
	scheduleLua string
	//go:embed claim.lua
	claimLua string
	//go:embed done.lua
	doneLua string
	//go:embed stats.lua
	statsLua string

	scheduleScript = goredis.NewScript(scheduleLua)
	claimScript    = goredis.NewScript(claimLua)
	doneScript     = goredis.NewScript(doneLua)
	statsScript    = goredis.NewScript(statsLua)
)

// Timers implements coord.Timers on Redis (RFC 006 §4.2, §7.1). Its keys are
//
//	<prefix>:{timers}:schedule  zset: id -> due, Unix ms (waiting timers)
//	<prefix>:{timers}:claimed   zset: id -> lease deadline, Unix ms
//	<prefix>:{timers}:payloads  hash: id -> payload (every live timer)
//	<prefix>:{timers}:leases    hash: id -> "due_ms:claims" (claimed timers only)
//
// They share the {timers} hash tag, so each script's keys live in one slot
// and the scripts work on Redis Cluster (all timers then live on one shard).
// A waiting timer costs one schedule entry and one payload entry: its due
// time is its score and its claim count is 0, so leases grows only with the
// timers in flight.
//
// A timer id of 32 lowercase hex digits (the engine's: a message id) is
// kept as 16 raw bytes after a 0x00 tag, in both structures; other ids as
// they are, after a 0x01 tag when they start with 0x00 or 0x01 (packID).
// Lua sees ids as opaque strings. The ids of the members and fields cost
// 24 bytes each instead of 40 for the hex form.
//
// Every operation is one round trip: one Lua script each (schedule.lua,
// claim.lua, done.lua, stats.lua). Keys never
// expire: a timer may wait for days, and Done removes it. Timers is safe for
// concurrent use and holds no state of its own: any number of schedulers may
// share the same Redis and Prefix. Time is what callers pass in, so
// schedulers on several hosts need reasonably synchronised clocks.
type Timers struct {
	client goredis.UniversalClient
	keys   []string // schedule, claimed, payloads, leases
}

var _ coord.Timers = (*Timers)(nil)

// NewTimers returns Timers on client. It panics on a Prefix with '{' or '}':
// that is a programming error. The caller keeps ownership of client.
func NewTimers(client goredis.UniversalClient, opts TimerOptions) *Timers {
	base := keyPrefix("TimerOptions", opts.Prefix) + ":{timers}:"
	return &Timers{
		client: client,
		keys:   []string{base + "schedule", base + "claimed", base + "payloads", base + "leases"},
	}
}

// Schedule implements coord.Timers.
func (ts *Timers) Schedule(ctx context.Context, id string, due time.Time, payload []byte) error {
	if id == "" {
		return errors.New("coord/redis: Timers.Schedule: empty timer id")
	}
	// payload is sent as given; a nil one becomes "" and comes back empty.
	keys := []string{ts.keys[0], ts.keys[2]}
	if err := scheduleScript.Run(ctx, ts.client, keys, packID(id), due.UnixMilli(), payload).Err(); err != nil {
		return fmt.Errorf("coord/redis: Timers.Schedule %q: %w", id, err)
	}
	return nil
}

// Claim implements coord.Timers.
func (ts *Timers) Claim(ctx context.Context, now time.Time, limit int, lease time.Duration) ([]coord.Timer, error) {
	if limit < 1 || lease <= 0 {
		return nil, fmt.Errorf("coord/redis: Timers.Claim: max %d and lease %v, want max at least 1 and a positive lease", limit, lease)
	}
	nowMs := now.UnixMilli()
	deadline := nowMs + max(lease.Milliseconds(), 1)
	reply, err := claimScript.Run(ctx, ts.client, ts.keys, nowMs, limit, deadline).Slice()
	if err != nil {
		return nil, fmt.Errorf("coord/redis: Timers.Claim: %w", err)
	}
	if len(reply)%4 != 0 {
		return nil, fmt.Errorf("coord/redis: Timers.Claim: unexpected reply of %d elements", len(reply))
	}
	out := make([]coord.Timer, 0, len(reply)/4)
	for i := 0; i < len(reply); i += 4 {
		id, ok1 := reply[i].(string)
		due, ok2 := reply[i+1].(int64)
		claims, ok3 := reply[i+2].(int64)
		payload, ok4 := reply[i+3].(string)
		if !ok1 || !ok2 || !ok3 || !ok4 {
			return nil, fmt.Errorf("coord/redis: Timers.Claim: unexpected reply element %v", reply[i:i+4])
		}
		out = append(out, coord.Timer{
			ID:      unpackID(id),
			Due:     time.UnixMilli(due),
			Payload: []byte(payload),
			Claims:  int(claims),
		})
	}
	return out, nil
}

// Wake implements coord.Timers: one ZADD XX LT (only existing members, only
// earlier), so a claimed or done timer is untouched.
func (ts *Timers) Wake(ctx context.Context, now time.Time, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	members := make([]goredis.Z, len(ids))
	for i, id := range ids {
		members[i] = goredis.Z{Score: float64(now.UnixMilli()), Member: packID(id)}
	}
	if err := ts.client.ZAddArgs(ctx, ts.keys[0], goredis.ZAddArgs{XX: true, LT: true, Members: members}).Err(); err != nil {
		return fmt.Errorf("coord/redis: Timers.Wake: %w", err)
	}
	return nil
}

// Done implements coord.Timers.
func (ts *Timers) Done(ctx context.Context, id string) error {
	if err := doneScript.Run(ctx, ts.client, ts.keys, packID(id)).Err(); err != nil {
		return fmt.Errorf("coord/redis: Timers.Done %q: %w", id, err)
	}
	return nil
}

// Stats implements coord.Timers.
func (ts *Timers) Stats(ctx context.Context) (coord.TimerStats, error) {
	reply, err := statsScript.Run(ctx, ts.client, ts.keys[:2]).Int64Slice()
	if err != nil {
		return coord.TimerStats{}, fmt.Errorf("coord/redis: Timers.Stats: %w", err)
	}
	if len(reply) != 3 {
		return coord.TimerStats{}, fmt.Errorf("coord/redis: Timers.Stats: unexpected reply %v", reply)
	}
	s := coord.TimerStats{Scheduled: reply[0], Claimed: reply[1]}
	if reply[0] > 0 {
		s.NextDue = time.UnixMilli(reply[2])
	}
	return s, nil
}

// Keys returns the Redis keys of ts: schedule, claimed, payloads, leases.
// They are for inspection (tests, operators); write them only through ts.
func (ts *Timers) Keys() []string {
	return append([]string(nil), ts.keys...)
}

// packID is how id is kept in Redis (see Timers).
func packID(id string) string {
	if len(id) == 32 {
		var raw [17]byte
		if _, err := hex.Decode(raw[1:], []byte(id)); err == nil && hex.EncodeToString(raw[1:]) == id {
			return string(raw[:])
		}
	}
	if id != "" && id[0] <= 0x01 {
		return "\x01" + id
	}
	return id
}

// unpackID reverses packID.
func unpackID(s string) string {
	switch {
	case len(s) == 17 && s[0] == 0x00:
		return hex.EncodeToString([]byte(s[1:]))
	case s != "" && s[0] == 0x01:
		return s[1:]
	}
	return s
}
