package redis

import (
	_ "embed"

	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rune-org/rune/coord"
)

var (
	//go:embed reserve.lua
	reserveLua string
	//go:embed admit.lua
	admitLua string

	reserveScript = goredis.NewScript(reserveLua)
	admitScript   = goredis.NewScript(admitLua)
)

// LimiterOptions configures a Limiter. The zero value gives the defaults.
type LimiterOptions struct {
	// Prefix starts every key. Default "rune". It must not contain '{' or '}'.
	Prefix string
}

// Limiter implements coord.Limiter on Redis, one Lua call per operation.
// A rate key K is <prefix>:{rl:H}:tat, the GCRA's theoretical arrival time,
// with each reservation a key <prefix>:{rl:H}:r:<id> beside it (H: a hash
// of K, so any key fits a hash tag and a cluster slot); a throttle key is
// the sorted set <prefix>:{th:H}:w of the ids in its window. Times are
// microseconds.
type Limiter struct {
	client goredis.Scripter
	prefix string
}

var _ coord.Limiter = (*Limiter)(nil)

// NewLimiter returns a Limiter on client. It panics on a Prefix with '{' or
// '}' (a programming error). The caller keeps ownership of client.
func NewLimiter(client goredis.Scripter, opts LimiterOptions) *Limiter {
	return &Limiter{client: client, prefix: keyPrefix("LimiterOptions", opts.Prefix)}
}

func (l *Limiter) tag(kind, key string) string {
	h := sha256.Sum256([]byte(key))
	return l.prefix + ":{" + kind + ":" + hex.EncodeToString(h[:12]) + "}"
}

func micros(t time.Time) string { return strconv.FormatInt(t.UnixMicro(), 10) }

// Reserve implements coord.Limiter.
func (l *Limiter) Reserve(ctx context.Context, key, id string, r coord.Rate, now time.Time) (time.Time, error) {
	if err := coord.CheckLimiterArgs(key, id, r, false); err != nil {
		return time.Time{}, fmt.Errorf("coord/redis: Limiter.Reserve: %w", err)
	}
	tag := l.tag("rl", key)
	s, err := reserveScript.Run(ctx, l.client, []string{tag + ":tat", tag + ":r:" + id},
		micros(now), r.Interval().Microseconds(), r.Tolerance().Microseconds(), coord.LimiterRetain.Milliseconds()).Text()
	if err != nil {
		return time.Time{}, fmt.Errorf("coord/redis: Limiter.Reserve %q: %w", key, err)
	}
	us, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("coord/redis: Limiter.Reserve %q: unexpected reply %q", key, s)
	}
	return time.UnixMicro(us).UTC(), nil
}

// Admit implements coord.Limiter.
func (l *Limiter) Admit(ctx context.Context, key, id string, r coord.Rate, now time.Time) (coord.Admission, error) {
	if err := coord.CheckLimiterArgs(key, id, r, true); err != nil {
		return coord.Admission{}, fmt.Errorf("coord/redis: Limiter.Admit: %w", err)
	}
	res, err := admitScript.Run(ctx, l.client, []string{l.tag("th", key) + ":w"},
		micros(now), r.Per.Microseconds(), r.Limit, id).Slice()
	if err != nil {
		return coord.Admission{}, fmt.Errorf("coord/redis: Limiter.Admit %q: %w", key, err)
	}
	if len(res) != 2 {
		return coord.Admission{}, fmt.Errorf("coord/redis: Limiter.Admit %q: unexpected reply %v", key, res)
	}
	if ok, _ := res[0].(int64); ok == 1 {
		return coord.Admission{OK: true}, nil
	}
	s, _ := res[1].(string)
	us, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return coord.Admission{}, fmt.Errorf("coord/redis: Limiter.Admit %q: unexpected reply %v", key, res)
	}
	return coord.Admission{RetryAt: time.UnixMicro(us).UTC()}, nil
}
