package redis

import (
	_ "embed"

	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
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
	//go:embed bucket.lua
	bucketLua string
	//go:embed schedule.lua
	scheduleLua string
	//go:embed claim.lua
	claimLua string
	//go:embed done.lua
	doneLua string
	//go:embed wake.lua
	wakeLua string
	//go:embed stats.lua
	statsLua string
	//go:embed extend.lua
	extendLua string

	scheduleScript = goredis.NewScript(bucketLua + scheduleLua)
	claimScript    = goredis.NewScript(bucketLua + claimLua)
	doneScript     = goredis.NewScript(bucketLua + doneLua)
	wakeScript     = goredis.NewScript(bucketLua + wakeLua)
	statsScript    = goredis.NewScript(statsLua)
	extendScript   = goredis.NewScript(extendLua)
)

const (
	// buckets is how many buckets hold the waiting timers. A timer's bucket
	// is a hash of its id, so this must never change for a store in use.
	// 32,768 keeps a bucket near 30 timers (7 KB) at a million waiting.
	buckets = 1 << 15
	// inlineMax is the longest payload kept in its timer's bucket; longer
	// ones go to the payloads hash, so that a bucket stays cheap to rewrite.
	inlineMax = 1024
	// maxDue is the latest due time a bucket can keep, Unix ms (6 bytes:
	// the year 10889).
	maxDue = 1<<48 - 1
)

// Timers implements coord.Timers on Redis (RFC 006 §4.2, §7.1). Its keys are
//
//	<prefix>:{timers}:buckets   hash: bucket -> the records of its waiting timers
//	<prefix>:{timers}:due       zset: bucket -> its earliest due, Unix ms
//	<prefix>:{timers}:waiting   string: how many timers wait in buckets
//	<prefix>:{timers}:claimed   zset: id -> lease deadline, Unix ms
//	<prefix>:{timers}:payloads  hash: id -> payload (claimed timers, and
//	                            waiting ones whose payload is over 1 KiB)
//	<prefix>:{timers}:leases    hash: id -> "due_ms:claims" (claimed timers)
//	<prefix>:{timers}:schedule  zset: id -> due, Unix ms (timers scheduled
//	                            by Rune before 2026-11, with their payloads
//	                            in payloads: still claimed, never added to)
//
// They share the {timers} hash tag, so each script's keys live in one slot
// and the scripts work on Redis Cluster (all timers then live on one shard).
//
// Why buckets: a million waiting timers are the store's size, and Redis
// spends about 185 bytes of structure on an entry of a sorted set plus one
// of a hash, nearly as much as a frozen message (docs/benchmarks.md,
// "Timers"). A waiting timer is instead a record of id, due time and payload
// in one of 32,768 buckets (strings, chosen by a hash of the id, see
// bucket.lua), 26 bytes of overhead; the due index has one entry per bucket.
// Claim reads the buckets whose earliest due has come, in that order, and
// rewrites them without the timers it claims; Schedule, Done and Wake
// rewrite the id's bucket. At a million timers a bucket is about 7 KB, so
// each costs Redis some microseconds more than a sorted-set entry would.
// Claimed timers (few: those in flight) keep the layout of one entry per
// structure, so leases and recovery are as before.
//
// A timer id of 32 lowercase hex digits (the engine's: a message id) is
// kept as 16 raw bytes after a 0x00 tag; other ids as they are, after a
// 0x01 tag when they start with 0x00 or 0x01 (packID). Lua sees ids as
// opaque strings.
//
// Every operation is one round trip: one Lua script each (schedule.lua,
// claim.lua, done.lua, wake.lua, stats.lua). Keys never expire: a timer may
// wait for days, and Done removes it. Timers is safe for concurrent use and
// holds no state of its own: any number of schedulers may share the same
// Redis and Prefix. Time is what callers pass in, so schedulers on several
// hosts need reasonably synchronised clocks.
type Timers struct {
	client  goredis.UniversalClient
	keys    []string // schedule, claimed, payloads, leases, buckets, due, waiting
	buckets uint32   // the constant buckets; fewer in tests, to fill them
}

var _ coord.Timers = (*Timers)(nil)

// NewTimers returns Timers on client. It panics on a Prefix with '{' or '}':
// that is a programming error. The caller keeps ownership of client.
func NewTimers(client goredis.UniversalClient, opts TimerOptions) *Timers {
	base := keyPrefix("TimerOptions", opts.Prefix) + ":{timers}:"
	return &Timers{
		client:  client,
		buckets: buckets,
		keys: []string{base + "schedule", base + "claimed", base + "payloads", base + "leases",
			base + "buckets", base + "due", base + "waiting"},
	}
}

// Schedule implements coord.Timers.
func (ts *Timers) Schedule(ctx context.Context, id string, due time.Time, payload []byte) error {
	if id == "" {
		return errors.New("coord/redis: Timers.Schedule: empty timer id")
	}
	p := packID(id)
	if len(p) > 1<<16-1 { // a bucket record's id length is 2 bytes at most
		return fmt.Errorf("coord/redis: Timers.Schedule: timer id of %d bytes, want at most 65,534", len(id))
	}
	// payload is sent as given; a nil one becomes "" and comes back empty.
	// A due time before 1970 is kept as 1970: claimable at once either way.
	keys := []string{ts.keys[2], ts.keys[4], ts.keys[5], ts.keys[6]}
	dueMs := min(max(due.UnixMilli(), 0), maxDue)
	if err := scheduleScript.Run(ctx, ts.client, keys, p, dueMs, payload, ts.bucketOf(p), inlineMax).Err(); err != nil {
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

// Wake implements coord.Timers: a claimed or done timer is untouched.
func (ts *Timers) Wake(ctx context.Context, now time.Time, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	args := make([]any, 1, 1+2*len(ids))
	args[0] = min(max(now.UnixMilli(), 0), maxDue)
	for _, id := range ids {
		p := packID(id)
		args = append(args, p, ts.bucketOf(p))
	}
	keys := []string{ts.keys[0], ts.keys[4], ts.keys[5]}
	if err := wakeScript.Run(ctx, ts.client, keys, args...).Err(); err != nil {
		return fmt.Errorf("coord/redis: Timers.Wake: %w", err)
	}
	return nil
}

// Extend implements coord.Timers: a claim is fenced by its Claims count,
// kept in the leases hash.
func (ts *Timers) Extend(ctx context.Context, now time.Time, lease time.Duration, held ...coord.Timer) ([]string, error) {
	if lease <= 0 {
		return nil, fmt.Errorf("coord/redis: Timers.Extend: lease %v, want a positive lease", lease)
	}
	if len(held) == 0 {
		return nil, nil
	}
	args := make([]any, 1, 1+2*len(held))
	args[0] = now.UnixMilli() + max(lease.Milliseconds(), 1)
	for _, t := range held {
		args = append(args, packID(t.ID), t.Claims)
	}
	reply, err := extendScript.Run(ctx, ts.client, []string{ts.keys[1], ts.keys[3]}, args...).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("coord/redis: Timers.Extend: %w", err)
	}
	lost := make([]string, len(reply))
	for i, p := range reply {
		lost[i] = unpackID(p)
	}
	return lost, nil
}

// Done implements coord.Timers.
func (ts *Timers) Done(ctx context.Context, id string) error {
	p := packID(id)
	if err := doneScript.Run(ctx, ts.client, ts.keys, p, ts.bucketOf(p)).Err(); err != nil {
		return fmt.Errorf("coord/redis: Timers.Done %q: %w", id, err)
	}
	return nil
}

// Stats implements coord.Timers.
func (ts *Timers) Stats(ctx context.Context) (coord.TimerStats, error) {
	keys := []string{ts.keys[0], ts.keys[1], ts.keys[5], ts.keys[6]}
	reply, err := statsScript.Run(ctx, ts.client, keys).Int64Slice()
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

// Keys returns the Redis keys of ts: schedule, claimed, payloads, leases,
// buckets, due, waiting.
// They are for inspection (tests, operators); write them only through ts.
func (ts *Timers) Keys() []string {
	return append([]string(nil), ts.keys...)
}

// bucketOf is the bucket of a packed id: FNV-1a, as a decimal field.
func (ts *Timers) bucketOf(packed string) string {
	h := fnv.New32a()
	h.Write([]byte(packed))
	return strconv.FormatUint(uint64(h.Sum32()%ts.buckets), 10)
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
