package redis

import (
	_ "embed"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rune-org/rune/coord"
)

var (
	//go:embed ev_common.lua
	evCommonLua string
	//go:embed ev_register.lua
	evRegisterLua string
	//go:embed ev_deliver.lua
	evDeliverLua string
	//go:embed ev_take.lua
	evTakeLua string

	evRegisterScript = goredis.NewScript(evCommonLua + evRegisterLua)
	evDeliverScript  = goredis.NewScript(evCommonLua + evDeliverLua)
	evTakeScript     = goredis.NewScript(evCommonLua + evTakeLua)
)

// EventOptions configures Events. The zero value gives the defaults.
type EventOptions struct {
	// Prefix starts every key. Default "rune". It must not contain '{' or '}'.
	Prefix string
}

// Events implements coord.Events on Redis. The keys of one (event, key)
// pair share the hash tag {ev.<coord.EventPair>}, so every script's keys
// are in one slot (Redis Cluster) and pairs spread over the masters:
//
//	<prefix>:{ev.P}:w  hash: timer -> "since_ms:due_ms" (registered waits)
//	<prefix>:{ev.P}:m  hash: timer -> event JSON, "" once taken without one
//	<prefix>:{ev.P}:e  zset: event id -> receipt time, ms (retained events)
//	<prefix>:{ev.P}:d  hash: event id -> "keep_ms:event JSON"
//	<prefix>:{ev.P}:x  hash: event id -> the timers its delivery matched
//
// One Lua call per operation (ev_register.lua, ev_deliver.lua,
// ev_take.lua; Forget is two HDELs in one pipeline), touching only its
// pair's keys: the number of waiting executions does not slow a delivery.
// The keys expire: the events' at their latest Keep, the waits' a
// coord.EventWaitGrace after their latest Due; Deliver also drops its
// pair's events past their Keep.
type Events struct {
	client goredis.UniversalClient
	prefix string
}

var _ coord.Events = (*Events)(nil)

// NewEvents returns Events on client. It panics on a Prefix with '{' or
// '}'. The caller keeps ownership of client.
func NewEvents(client goredis.UniversalClient, opts EventOptions) *Events {
	return &Events{client: client, prefix: keyPrefix("EventOptions", opts.Prefix)}
}

func (e *Events) keys(name, key string, which ...string) []string {
	base := e.prefix + ":{ev." + coord.EventPair(name, key) + "}:"
	out := make([]string, len(which))
	for i, w := range which {
		out[i] = base + w
	}
	return out
}

func evMs(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// evExpiry is when keys that must live until t expire: t, but at least an
// hour from now by the wall clock. Callers' times may be anything (the
// conformance suite's are in the past); what is kept past its time is
// still judged by the times the scripts compare, so the hour only delays
// freeing it.
func evExpiry(t time.Time) string {
	return evMs(later(t, time.Now().Add(time.Hour)))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Register implements coord.Events.
func (e *Events) Register(ctx context.Context, now time.Time, w coord.EventWait) (*coord.Event, error) {
	if err := coord.CheckEventWait(w); err != nil {
		return nil, fmt.Errorf("coord/redis: Events.Register: %w", err)
	}
	res, err := evRegisterScript.Run(ctx, e.client, e.keys(w.Name, w.Key, "w", "m", "e", "d"),
		w.Timer, evMs(w.Since), evMs(w.Due), evMs(now), evExpiry(w.Due.Add(coord.EventWaitGrace))).Slice()
	if err != nil {
		return nil, fmt.Errorf("coord/redis: Events.Register %s: %w", w.Timer, err)
	}
	if len(res) == 2 {
		s, _ := res[1].(string)
		return decodeEvent(s)
	}
	return nil, nil
}

// Deliver implements coord.Events.
func (e *Events) Deliver(ctx context.Context, ev coord.Event) ([]string, error) {
	if err := coord.CheckEvent(ev); err != nil {
		return nil, fmt.Errorf("coord/redis: Events.Deliver: %w", err)
	}
	enc, err := json.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("coord/redis: Events.Deliver: %w", err)
	}
	got, err := evDeliverScript.Run(ctx, e.client, e.keys(ev.Name, ev.Key, "w", "m", "e", "d", "x"),
		ev.ID, evMs(ev.At), evMs(ev.Keep), enc, evExpiry(ev.Keep), evExpiry(ev.At.Add(coord.EventWaitGrace))).StringSlice()
	if err != nil && !errors.Is(err, goredis.Nil) {
		return nil, fmt.Errorf("coord/redis: Events.Deliver %s: %w", ev.ID, err)
	}
	return got, nil
}

// Take implements coord.Events.
func (e *Events) Take(ctx context.Context, w coord.EventWait) (*coord.Event, error) {
	if err := coord.CheckEventWait(w); err != nil {
		return nil, fmt.Errorf("coord/redis: Events.Take: %w", err)
	}
	s, err := evTakeScript.Run(ctx, e.client, e.keys(w.Name, w.Key, "w", "m"), w.Timer, evExpiry(w.Due.Add(coord.EventWaitGrace))).Text()
	if errors.Is(err, goredis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("coord/redis: Events.Take %s: %w", w.Timer, err)
	}
	return decodeEvent(s)
}

// Forget implements coord.Events.
func (e *Events) Forget(ctx context.Context, w coord.EventWait) error {
	if err := coord.CheckEventWait(w); err != nil {
		return fmt.Errorf("coord/redis: Events.Forget: %w", err)
	}
	k := e.keys(w.Name, w.Key, "w", "m")
	_, err := e.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		p.HDel(ctx, k[0], w.Timer)
		p.HDel(ctx, k[1], w.Timer)
		return nil
	})
	if err != nil {
		return fmt.Errorf("coord/redis: Events.Forget %s: %w", w.Timer, err)
	}
	return nil
}

func decodeEvent(s string) (*coord.Event, error) {
	if s == "" {
		return nil, nil
	}
	var ev coord.Event
	if err := json.Unmarshal([]byte(s), &ev); err != nil {
		return nil, fmt.Errorf("coord/redis: a stored event: %w", err)
	}
	return &ev, nil
}
