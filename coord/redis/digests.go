package redis

import (
	_ "embed"

	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rune-org/rune/coord"
)

var (
	//go:embed digest_join.lua
	digestJoinLua string
	//go:embed digest_take.lua
	digestTakeLua string

	digestJoinScript = goredis.NewScript(digestJoinLua)
	digestTakeScript = goredis.NewScript(digestTakeLua)
	digestOpenScript = goredis.NewScript(`return redis.call('HGET', KEYS[1], 'o') or ''`)
)

// DigestOptions configures Digests. The zero value gives the defaults.
type DigestOptions struct {
	// Prefix starts every key. Default "rune". It must not contain '{' or '}'.
	Prefix string
}

// Digests implements coord.Digests on Redis. The keys of a digest key K
// share the hash tag {dg:H} (H: a hash of K, so any key fits a cluster
// slot): <prefix>:{dg:H}:cur, the hash of the open digest; :v:<opener>,
// each digest's values list; :m:<member>, each member's answer. Every key
// expires coord.DigestGrace after its digest's Closes.
//
// Join reads the open digest's opener first, then runs its script with
// that digest's values list among its keys (a script names every key it
// touches); the script answers "retry" when another Join opened a digest
// in between, and Join reads again.
type Digests struct {
	client goredis.Scripter
	prefix string
}

var _ coord.Digests = (*Digests)(nil)

// NewDigests returns Digests on client. It panics on a Prefix with '{' or
// '}' (a programming error). The caller keeps ownership of client.
func NewDigests(client goredis.Scripter, opts DigestOptions) *Digests {
	return &Digests{client: client, prefix: keyPrefix("DigestOptions", opts.Prefix)}
}

func (d *Digests) tag(key string) string {
	h := sha256.Sum256([]byte(key))
	return d.prefix + ":{dg:" + hex.EncodeToString(h[:12]) + "}"
}

// joinRetries bounds Join's reads of the open digest: each retry means a
// digest of the key opened meanwhile, which happens once per window.
const joinRetries = 20

// Join implements coord.Digests.
func (d *Digests) Join(ctx context.Context, key string, m coord.DigestMember, now, closes time.Time) (coord.Digest, error) {
	if err := coord.CheckDigestJoin(key, m); err != nil {
		return coord.Digest{}, fmt.Errorf("coord/redis: Digests.Join: %w", err)
	}
	tag := d.tag(key)
	value := m.Value
	if value == nil {
		value = []byte("null")
	}
	for range joinRetries {
		open, err := digestOpenScript.Run(ctx, d.client, []string{tag + ":cur"}).Text()
		if err != nil {
			return coord.Digest{}, fmt.Errorf("coord/redis: Digests.Join %q: %w", key, err)
		}
		list := tag + ":v:" + open
		if open == "" {
			list = tag + ":v:" + m.ID
		}
		s, err := digestJoinScript.Run(ctx, d.client,
			[]string{tag + ":cur", tag + ":m:" + m.ID, list, tag + ":v:" + m.ID},
			m.ID, m.Execution, value, now.UnixMilli(), closes.UnixMilli(), coord.DigestGrace.Milliseconds(), coord.MaxDigestItems, open).Text()
		if err != nil {
			if strings.HasPrefix(err.Error(), "DIGEST_FULL") {
				return coord.Digest{}, fmt.Errorf("coord/redis: Digests.Join %q: %w", key, coord.ErrDigestFull)
			}
			return coord.Digest{}, fmt.Errorf("coord/redis: Digests.Join %q: %w", key, err)
		}
		if s == "retry" {
			continue
		}
		a, ok := parseDigestAnswer(s)
		if !ok {
			return coord.Digest{}, fmt.Errorf("coord/redis: Digests.Join %q: unexpected reply %q", key, s)
		}
		a.Opened = a.Opener == m.ID
		return a, nil
	}
	return coord.Digest{}, fmt.Errorf("coord/redis: Digests.Join %q: the open digest changed %d times in a row", key, joinRetries)
}

// parseDigestAnswer reads "<closes ms>:<len(opener)>:<opener><execution>".
func parseDigestAnswer(s string) (coord.Digest, bool) {
	c, rest, ok := strings.Cut(s, ":")
	if !ok {
		return coord.Digest{}, false
	}
	l, rest, ok := strings.Cut(rest, ":")
	if !ok {
		return coord.Digest{}, false
	}
	ms, err1 := strconv.ParseInt(c, 10, 64)
	n, err2 := strconv.Atoi(l)
	if err1 != nil || err2 != nil || n < 0 || n > len(rest) {
		return coord.Digest{}, false
	}
	return coord.Digest{Opener: rest[:n], Execution: rest[n:], Closes: time.UnixMilli(ms).UTC()}, true
}

// Take implements coord.Digests.
func (d *Digests) Take(ctx context.Context, key, opener string) ([][]byte, error) {
	if err := coord.CheckDigestKey(key, opener); err != nil {
		return nil, fmt.Errorf("coord/redis: Digests.Take: %w", err)
	}
	tag := d.tag(key)
	vals, err := digestTakeScript.Run(ctx, d.client, []string{tag + ":cur", tag + ":v:" + opener}, opener, "take").StringSlice()
	if err != nil {
		return nil, fmt.Errorf("coord/redis: Digests.Take %q: %w", key, err)
	}
	out := make([][]byte, len(vals))
	for i, v := range vals {
		out[i] = []byte(v)
	}
	return out, nil
}

// Forget implements coord.Digests.
func (d *Digests) Forget(ctx context.Context, key, opener string) error {
	if err := coord.CheckDigestKey(key, opener); err != nil {
		return fmt.Errorf("coord/redis: Digests.Forget: %w", err)
	}
	tag := d.tag(key)
	if err := digestTakeScript.Run(ctx, d.client, []string{tag + ":cur", tag + ":v:" + opener}, opener, "forget").Err(); err != nil {
		return fmt.Errorf("coord/redis: Digests.Forget %q: %w", key, err)
	}
	return nil
}
