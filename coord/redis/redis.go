// Package redis is the coord.Coordinator of the distributed runtime, on Redis.
//
// Every operation is one round trip: one Lua script (start.lua, begin.lua,
// finish.lua) that reads and writes an execution's keys atomically.
// Concurrent operations share their round trips (pipeline.go). The keys
// of execution X are
//
//	<prefix>:{X}:meta  hash: live (message count), halt (first Failure, JSON),
//	                   last (the completer's id), status (once ended),
//	                   published (once the completion is out)
//	<prefix>:{X}:done  hash: message id -> Record (raw bytes)
//	<prefix>:{X}:ctx   hash: final-context key -> JSON value
//	<prefix>:{X}:parked set: ids of branches suspended in a wait (Park)
//	<prefix>:{X}:closed hash: the closed markers of X's barriers (Barriers
//	                   writes it; it expires with the other keys)
//	<prefix>:{X}:blobs hash: X's large values (Blobs with one shard, the
//	                   same Prefix, writes it; it expires with the other
//	                   keys too)
//
// They share the {X} hash tag, so a script's keys live in one slot and the
// scripts work on Redis Cluster. All of them expire: while the execution is
// live, TTL after its last Start, Finish or Park, and never before TTL after
// the latest time it holds something back until (meta's hold: a parked
// timer's due time, Finish.Hold; keep.lua); Retain after it ended.
package redis

import (
	_ "embed"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/message"
)

// Defaults of Options.
const (
	DefaultPrefix = "rune"
	DefaultTTL    = 7 * 24 * time.Hour
	DefaultRetain = 10 * time.Minute
)

// Options configures a Coordinator. The zero value gives the defaults.
type Options struct {
	// Prefix starts every key. Default "rune". It must not contain '{' or
	// '}', which would move the hash tag.
	Prefix string
	// TTL is how long a live execution's state outlives its last activity
	// (Start, Finish, Park), and the latest time it holds something back
	// until: a parked timer's due time (Park), a delayed successor or a
	// barrier's deadline (Finish.Hold). Default 7 days. The Redis URL's ttl
	// parameter sets it (Connection.TTL).
	TTL time.Duration
	// Retain is how long an ended execution's state is kept, so that
	// redeliveries still Replay and the completer's duplicate Finish still
	// gets the Outcome. Default 10 minutes.
	Retain time.Duration
}

var (
	//go:embed keep.lua
	keepLua string
	//go:embed start.lua
	startLua string
	//go:embed begin.lua
	beginLua string
	//go:embed finish.lua
	finishLua string
	//go:embed park.lua
	parkLua string
	//go:embed published.lua
	publishedLua string

	startScript     = goredis.NewScript(startLua)
	beginScript     = goredis.NewScript(beginLua)
	finishScript    = goredis.NewScript(keepLua + finishLua)
	parkScript      = goredis.NewScript(keepLua + parkLua)
	publishedScript = goredis.NewScript(publishedLua)
)

// Coordinator implements coord.Coordinator on Redis. It is safe for
// concurrent use and holds no execution state of its own: any number of
// processes may share the same Redis and Prefix. The scripts of concurrent
// calls share round trips (pipeline).
type Coordinator struct {
	client goredis.UniversalClient
	pipe   *pipeline
	prefix string
	ttl    string // milliseconds, as the scripts take them
	retain string
}

var _ coord.Coordinator = (*Coordinator)(nil)

// New returns a Coordinator on client. It panics on an invalid Options
// (a negative duration, a Prefix with '{' or '}'): that is a programming
// error. The caller keeps ownership of client.
func New(client goredis.UniversalClient, opts Options) *Coordinator {
	return &Coordinator{
		client: client,
		pipe:   &pipeline{client: client},
		prefix: keyPrefix("Options", opts.Prefix),
		ttl:    millis(orDefault("Options.TTL", opts.TTL, DefaultTTL)),
		retain: millis(orDefault("Options.Retain", opts.Retain, DefaultRetain)),
	}
}

// keyPrefix is prefix, or DefaultPrefix when empty. A '{' or '}' would break
// the hash tags every key relies on: a programming error, so it panics.
func keyPrefix(options, prefix string) string {
	if prefix == "" {
		return DefaultPrefix
	}
	if strings.ContainsAny(prefix, "{}") {
		panic(fmt.Sprintf("coord/redis: %s.Prefix %q contains '{' or '}'", options, prefix))
	}
	return prefix
}

// orDefault is d, or def when d is 0. A negative d is a programming error.
func orDefault(field string, d, def time.Duration) time.Duration {
	if d < 0 {
		panic(fmt.Sprintf("coord/redis: %s is negative (%v)", field, d))
	}
	if d == 0 {
		return def
	}
	return d
}

// millis formats d in whole milliseconds, at least 1: PEXPIRE 0 would delete.
func millis(d time.Duration) string {
	return strconv.FormatInt(max(d.Milliseconds(), 1), 10)
}

// Ping checks that Redis answers.
func (c *Coordinator) Ping(ctx context.Context) error {
	if err := c.client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("coord/redis: ping: %w", err)
	}
	return nil
}

// keys returns exec's meta, done, ctx, parked, closed and blobs keys.
func (c *Coordinator) keys(exec string) []string {
	base := c.prefix + ":{" + exec + "}:"
	return []string{base + "meta", base + "done", base + "ctx", base + "parked", base + "closed", base + "blobs"}
}

// ahead is the whole milliseconds from now until t, for keep.lua: "0" when
// t is zero or past (nothing held back).
func ahead(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return strconv.FormatInt(max(time.Until(t).Milliseconds(), 0), 10)
}

// Start implements coord.Coordinator.
func (c *Coordinator) Start(ctx context.Context, exec string, n int) error {
	if exec == "" {
		return errors.New("coord/redis: Start: empty execution id")
	}
	if n < 1 {
		return fmt.Errorf("coord/redis: Start exec %q: n is %d, want at least 1", exec, n)
	}
	if err := c.pipe.run(ctx, startScript, c.keys(exec)[:1], n, c.ttl).Err(); err != nil {
		return fmt.Errorf("coord/redis: Start exec %q: %w", exec, err)
	}
	return nil
}

// Begin implements coord.Coordinator.
func (c *Coordinator) Begin(ctx context.Context, exec, id string) (coord.Begin, error) {
	if exec == "" {
		return coord.Begin{State: coord.Drop}, nil // never started
	}
	reply, err := c.pipe.run(ctx, beginScript, c.keys(exec)[:2], id).Slice()
	if err != nil {
		return coord.Begin{}, fmt.Errorf("coord/redis: Begin exec %q id %q: %w", exec, id, err)
	}
	var code int64 = -1
	if len(reply) > 0 {
		code, _ = reply[0].(int64)
	}
	switch {
	case code == 0:
		return coord.Begin{State: coord.Run}, nil
	case code == 1 && len(reply) == 2:
		rec, _ := reply[1].(string)
		return coord.Begin{State: coord.Replay, Record: []byte(rec)}, nil
	case code == 2:
		return coord.Begin{State: coord.Drop}, nil
	}
	return coord.Begin{}, fmt.Errorf("coord/redis: Begin exec %q id %q: unexpected reply %v", exec, id, reply)
}

// Finish implements coord.Coordinator.
func (c *Coordinator) Finish(ctx context.Context, exec, id string, f coord.Finish) (coord.Outcome, error) {
	where := func(format string, a ...any) error {
		return fmt.Errorf("coord/redis: Finish exec %q id %q: "+format, append([]any{exec, id}, a...)...)
	}
	rec, err := f.Encode(exec)
	if err != nil {
		return coord.Outcome{}, where("%w", err)
	}
	args := make([]any, 9, 9+2*len(f.End))
	args[0], args[1], args[2], args[4], args[5] = id, f.Spawned, rec, c.ttl, c.retain
	args[3], args[6], args[7], args[8] = "", "0", "0", ahead(f.Hold)
	if f.Mode.Optimistic() {
		args[6] = "1"
	}
	if f.Mode.IfLast() {
		args[7] = "1"
	}
	if f.Halt != nil {
		b, err := json.Marshal(f.Halt)
		if err != nil {
			return coord.Outcome{}, where("encode Halt: %w", err)
		}
		args[3] = b
	}
	for k, v := range f.End {
		b, err := json.Marshal(v)
		if err != nil {
			return coord.Outcome{}, where("encode End key %q: %w", k, err)
		}
		args = append(args, k, b)
	}
	reply, err := c.pipe.run(ctx, finishScript, c.keys(exec), args...).Slice()
	if err != nil {
		return coord.Outcome{}, where("%w", err)
	}
	o, err := parseOutcome(reply)
	if err != nil {
		return coord.Outcome{}, where("%w", err)
	}
	return o, nil
}

// Park implements coord.Coordinator: every key of exec is kept at least
// until due plus the TTL.
func (c *Coordinator) Park(ctx context.Context, exec, id string, due time.Time) (bool, error) {
	if exec == "" {
		return true, nil // never started
	}
	wake, err := c.pipe.run(ctx, parkScript, c.keys(exec), id, c.ttl, ahead(due)).Int()
	if err != nil {
		return false, fmt.Errorf("coord/redis: Park exec %q id %q: %w", exec, id, err)
	}
	return wake == 1, nil
}

// Parked implements coord.Coordinator.
func (c *Coordinator) Parked(ctx context.Context, exec string) ([]string, error) {
	ids, err := c.client.SMembers(ctx, c.keys(exec)[3]).Result()
	if err != nil {
		return nil, fmt.Errorf("coord/redis: Parked exec %q: %w", exec, err)
	}
	return ids, nil
}

// Published implements coord.Coordinator.
func (c *Coordinator) Published(ctx context.Context, exec string) error {
	if exec == "" {
		return nil
	}
	if err := c.pipe.run(ctx, publishedScript, c.keys(exec)[:1]).Err(); err != nil {
		return fmt.Errorf("coord/redis: Published exec %q: %w", exec, err)
	}
	return nil
}

// parseOutcome reads finish.lua's reply.
func parseOutcome(reply []any) (coord.Outcome, error) {
	if len(reply) == 0 {
		return coord.Outcome{}, errors.New("empty reply")
	}
	code, _ := reply[0].(int64)
	switch {
	case code == -1:
		return coord.Outcome{}, coord.ErrUnknownExecution
	case code == -2:
		return coord.Outcome{}, fmt.Errorf("execution has ended: %w", coord.ErrUnknownExecution)
	case code == 2 && len(reply) == 2:
		rec, _ := reply[1].(string)
		return coord.Outcome{Case: coord.Replayed, Record: []byte(rec)}, nil
	case code == 3:
		return coord.Outcome{Case: coord.Dropped}, nil
	case code == 4:
		return coord.Outcome{Case: coord.NotLast}, nil
	case len(reply) < 3 || (code != 0 && code != 1):
		return coord.Outcome{}, fmt.Errorf("unexpected reply %v", reply)
	}
	var o coord.Outcome
	if code == 1 {
		o.Case = coord.Duplicate
		if published, _ := reply[2].(int64); published == 1 {
			o.Case = coord.DuplicatePublished
		}
	}
	if last, _ := reply[1].(int64); last != 1 {
		return o, nil
	}
	if len(reply) < 5 || len(reply)%2 != 1 {
		return coord.Outcome{}, fmt.Errorf("unexpected reply of %d elements", len(reply))
	}
	c := &coord.Completion{}
	o.Completion = c
	c.Status, _ = reply[3].(string)
	if failure, _ := reply[4].(string); failure != "" {
		c.Failure = new(message.Failure)
		if err := json.Unmarshal([]byte(failure), c.Failure); err != nil {
			return coord.Outcome{}, fmt.Errorf("decode stored Failure: %w", err)
		}
	}
	kv := reply[5:]
	c.FinalContext = make(map[string]any, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		k, _ := kv[i].(string)
		v, _ := kv[i+1].(string)
		var val any
		if err := json.Unmarshal([]byte(v), &val); err != nil {
			return coord.Outcome{}, fmt.Errorf("decode final context key %q: %w", k, err)
		}
		c.FinalContext[k] = val
	}
	return o, nil
}
