package redis

import (
	_ "embed"

	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rune-org/rune/coord"
)

// TimerOptions configures Timers. The zero value gives the defaults.
type TimerOptions struct {
	// Prefix starts every key. Default "rune". It must not contain '{' or
	// '}', which would move the hash tag.
	Prefix string
	// Shards is how many independent stores (each with its own hash tag,
	// so each its own Redis Cluster slot) the timers are spread over; a
	// timer's shard is a hash of its id. Default 1, the layout of a single
	// Redis. On Redis Cluster, 16 spreads the timers over up to 16 masters.
	// Like the bucket count it must not change for a store in use: Done and
	// Wake look for a timer only in its id's shard.
	Shards int
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
// and the scripts work on Redis Cluster. With TimerOptions.Shards n > 1 the
// timers are spread over n such sets of keys, shard 0 with the {timers} tag
// and shard i with {timers.i}, so they spread over a cluster's masters.
// Schedule, Done and Wake go to the id's shard; Stats and Extend to the
// shards concerned, concurrently; Claim first peeks at every shard for its
// earliest claimable timers (claim.lua with ARGV[4] "1"), merges the peeks
// and then claims from each shard its share of the max earliest: timers are
// claimed in due order across shards, and no shard starves. Claim is two
// round trips (each to all shards at once) when n > 1.
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
	client goredis.UniversalClient
	// pipe carries the scripts run per timer (Schedule by the workers,
	// Extend and Done by a scheduler): hundreds of suspends or resumes at
	// once share round trips (issue 33).
	pipe *pipeline
	// shards[i] are shard i's keys: schedule, claimed, payloads, leases,
	// buckets, due, waiting.
	shards  [][]string
	buckets uint32 // the constant buckets; fewer in tests, to fill them
}

var _ coord.Timers = (*Timers)(nil)

// NewTimers returns Timers on client. It panics on a Prefix with '{' or '}'
// or a negative Shards: that is a programming error. The caller keeps
// ownership of client.
func NewTimers(client goredis.UniversalClient, opts TimerOptions) *Timers {
	prefix := keyPrefix("TimerOptions", opts.Prefix)
	if opts.Shards < 0 {
		panic(fmt.Sprintf("coord/redis: TimerOptions.Shards is negative (%d)", opts.Shards))
	}
	ts := &Timers{client: client, pipe: &pipeline{client: client}, buckets: buckets, shards: make([][]string, max(opts.Shards, 1))}
	for i := range ts.shards {
		tag := "timers"
		if i > 0 {
			tag += "." + strconv.Itoa(i)
		}
		base := prefix + ":{" + tag + "}:"
		ts.shards[i] = []string{base + "schedule", base + "claimed", base + "payloads", base + "leases",
			base + "buckets", base + "due", base + "waiting"}
	}
	return ts
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
	k := ts.shards[ts.shardOf(p)]
	keys := []string{k[2], k[4], k[5], k[6]}
	dueMs := min(max(due.UnixMilli(), 0), maxDue)
	if err := ts.pipe.run(ctx, scheduleScript, keys, p, dueMs, payload, ts.bucketOf(p), inlineMax).Err(); err != nil {
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
	share := []int{limit}
	if len(ts.shards) > 1 {
		var err error
		if share, err = ts.shares(ctx, nowMs, limit); err != nil {
			return nil, err
		}
	}
	got := make([][]claimed, len(ts.shards))
	err := ts.each(ctx, func(ctx context.Context, i int) error {
		if i >= len(share) || share[i] == 0 {
			return nil
		}
		reply, err := claimScript.Run(ctx, ts.client, ts.shards[i], nowMs, share[i], deadline, "0").Slice()
		if err != nil {
			return err
		}
		got[i], err = parseClaimed(reply, 4)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("coord/redis: Timers.Claim: %w", err)
	}
	all := slices.Concat(got...)
	if len(ts.shards) > 1 {
		slices.SortFunc(all, claimedOrder)
	}
	out := make([]coord.Timer, len(all))
	for i, c := range all {
		out[i] = coord.Timer{ID: unpackID(c.id), Due: time.UnixMilli(c.due), Payload: []byte(c.payload), Claims: int(c.claims)}
	}
	return out, nil
}

// claimed is a timer of claim.lua's reply, its id packed.
type claimed struct {
	id      string
	due     int64
	claims  int64
	payload string
	shard   int
}

// claimedOrder is claim.lua's order: due, then the most claimed, then id.
func claimedOrder(a, b claimed) int {
	if a.due != b.due {
		return cmp.Compare(a.due, b.due)
	}
	if a.claims != b.claims {
		return cmp.Compare(b.claims, a.claims)
	}
	return strings.Compare(a.id, b.id)
}

// parseClaimed reads claim.lua's reply of width elements a timer (4, or 3
// when it peeked: no payload).
func parseClaimed(reply []any, width int) ([]claimed, error) {
	if len(reply)%width != 0 {
		return nil, fmt.Errorf("unexpected reply of %d elements", len(reply))
	}
	out := make([]claimed, 0, len(reply)/width)
	for i := 0; i < len(reply); i += width {
		var c claimed
		var ok1, ok2, ok3, ok4 bool
		c.id, ok1 = reply[i].(string)
		c.due, ok2 = reply[i+1].(int64)
		c.claims, ok3 = reply[i+2].(int64)
		ok4 = true
		if width == 4 {
			c.payload, ok4 = reply[i+3].(string)
		}
		if !ok1 || !ok2 || !ok3 || !ok4 {
			return nil, fmt.Errorf("unexpected reply element %v", reply[i:i+width])
		}
		out = append(out, c)
	}
	return out, nil
}

// shares peeks at every shard's first limit claimable timers and returns
// how many of the limit earliest of them each shard holds.
func (ts *Timers) shares(ctx context.Context, nowMs int64, limit int) ([]int, error) {
	peeks := make([][]claimed, len(ts.shards))
	err := ts.each(ctx, func(ctx context.Context, i int) error {
		reply, err := claimScript.Run(ctx, ts.client, ts.shards[i], nowMs, limit, 0, "1").Slice()
		if err != nil {
			return err
		}
		if peeks[i], err = parseClaimed(reply, 3); err != nil {
			return err
		}
		for j := range peeks[i] {
			peeks[i][j].shard = i
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("coord/redis: Timers.Claim: peek: %w", err)
	}
	all := slices.Concat(peeks...)
	slices.SortFunc(all, claimedOrder)
	share := make([]int, len(ts.shards))
	for _, c := range all[:min(limit, len(all))] {
		share[c.shard]++
	}
	return share, nil
}

// each runs f for every shard, concurrently when there are several, and
// returns the first error.
func (ts *Timers) each(ctx context.Context, f func(ctx context.Context, shard int) error) error {
	if len(ts.shards) == 1 {
		return f(ctx, 0)
	}
	errs := make([]error, len(ts.shards))
	var wg sync.WaitGroup
	for i := range ts.shards {
		wg.Go(func() { errs[i] = f(ctx, i) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Wake implements coord.Timers: a claimed or done timer is untouched.
func (ts *Timers) Wake(ctx context.Context, now time.Time, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	nowMs := min(max(now.UnixMilli(), 0), maxDue)
	args := make([][]any, len(ts.shards))
	for _, id := range ids {
		p := packID(id)
		i := ts.shardOf(p)
		if args[i] == nil {
			args[i] = []any{nowMs}
		}
		args[i] = append(args[i], p, ts.bucketOf(p))
	}
	err := ts.each(ctx, func(ctx context.Context, i int) error {
		if args[i] == nil {
			return nil
		}
		k := ts.shards[i]
		return wakeScript.Run(ctx, ts.client, []string{k[0], k[4], k[5]}, args[i]...).Err()
	})
	if err != nil {
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
	deadline := now.UnixMilli() + max(lease.Milliseconds(), 1)
	args := make([][]any, len(ts.shards))
	for _, t := range held {
		p := packID(t.ID)
		i := ts.shardOf(p)
		if args[i] == nil {
			args[i] = []any{deadline}
		}
		args[i] = append(args[i], p, t.Claims)
	}
	lost := make([][]string, len(ts.shards))
	err := ts.each(ctx, func(ctx context.Context, i int) error {
		if args[i] == nil {
			return nil
		}
		k := ts.shards[i]
		reply, err := ts.pipe.run(ctx, extendScript, []string{k[1], k[3]}, args[i]...).StringSlice()
		for _, p := range reply {
			lost[i] = append(lost[i], unpackID(p))
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("coord/redis: Timers.Extend: %w", err)
	}
	return slices.Concat(lost...), nil
}

// Done implements coord.Timers.
func (ts *Timers) Done(ctx context.Context, id string) error {
	p := packID(id)
	if err := ts.pipe.run(ctx, doneScript, ts.shards[ts.shardOf(p)], p, ts.bucketOf(p)).Err(); err != nil {
		return fmt.Errorf("coord/redis: Timers.Done %q: %w", id, err)
	}
	return nil
}

// Stats implements coord.Timers.
func (ts *Timers) Stats(ctx context.Context) (coord.TimerStats, error) {
	replies := make([][]int64, len(ts.shards))
	err := ts.each(ctx, func(ctx context.Context, i int) error {
		k := ts.shards[i]
		reply, err := statsScript.Run(ctx, ts.client, []string{k[0], k[1], k[5], k[6]}).Int64Slice()
		if err == nil && len(reply) != 3 {
			err = fmt.Errorf("unexpected reply %v", reply)
		}
		replies[i] = reply
		return err
	})
	if err != nil {
		return coord.TimerStats{}, fmt.Errorf("coord/redis: Timers.Stats: %w", err)
	}
	var s coord.TimerStats
	next := int64(-1)
	for _, r := range replies {
		s.Scheduled += r[0]
		s.Claimed += r[1]
		if r[0] > 0 && (next == -1 || r[2] < next) {
			next = r[2]
		}
	}
	if next != -1 {
		s.NextDue = time.UnixMilli(next)
	}
	return s, nil
}

// Keys returns the Redis keys of shard 0 (all of them when Shards is 1):
// schedule, claimed, payloads, leases, buckets, due, waiting.
// They are for inspection (tests, operators); write them only through ts.
func (ts *Timers) Keys() []string {
	return ts.ShardKeys(0)
}

// ShardKeys returns the Redis keys of shard i, as Keys does for shard 0.
func (ts *Timers) ShardKeys(i int) []string {
	return append([]string(nil), ts.shards[i]...)
}

// Shards is how many shards ts spreads its timers over.
func (ts *Timers) Shards() int { return len(ts.shards) }

// bucketOf is the bucket of a packed id: FNV-1a, as a decimal field.
func (ts *Timers) bucketOf(packed string) string {
	h := fnv.New32a()
	h.Write([]byte(packed))
	return strconv.FormatUint(uint64(h.Sum32()%ts.buckets), 10)
}

// shardOf is the shard of a packed id: FNV-1a like bucketOf, but from the
// hash's bits above the bucket's, so that each shard uses every bucket.
func (ts *Timers) shardOf(packed string) int {
	if len(ts.shards) == 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(packed))
	return int(h.Sum32() / ts.buckets % uint32(len(ts.shards)))
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
