package redis

import (
	"context"
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rune-org/rune/coord"
)

// BlobOptions configures Blobs. The zero value gives the defaults.
type BlobOptions struct {
	// Prefix starts every key. Default "rune". It must not contain '{' or
	// '}', which would move the hash tag.
	Prefix string
	// TTL is how long an execution's blobs outlive its last Put, in case it
	// is never released. Default 7 days, as an execution's state.
	TTL time.Duration
}

// Blobs implements coord.Blobs on Redis: the blobs of execution X are the
// fields of one hash, <prefix>:{X}:blobs (ref -> data), so Release is one
// DEL. Its TTL is refreshed by every Put.
type Blobs struct {
	client goredis.UniversalClient
	prefix string
	ttl    time.Duration
}

var _ coord.Blobs = (*Blobs)(nil)

// NewBlobs returns Blobs on client. It panics on invalid options (a negative
// TTL, a Prefix with '{' or '}'): that is a programming error. The caller
// keeps ownership of client.
func NewBlobs(client goredis.UniversalClient, opts BlobOptions) *Blobs {
	return &Blobs{client: client, prefix: keyPrefix("BlobOptions", opts.Prefix),
		ttl: orDefault("BlobOptions.TTL", opts.TTL, DefaultTTL)}
}

func (b *Blobs) key(exec string) string { return b.prefix + ":{" + exec + "}:blobs" }

// Put implements coord.Blobs. It is one round trip (MULTI: HSETNX, PEXPIRE).
func (b *Blobs) Put(ctx context.Context, exec string, data []byte) (string, error) {
	if exec == "" {
		return "", errors.New("coord/redis: Put blob: empty execution id")
	}
	ref, key := coord.BlobRef(data), b.key(exec)
	if data == nil {
		data = []byte{}
	}
	_, err := b.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.HSetNX(ctx, key, ref, data)
		p.PExpire(ctx, key, b.ttl)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("coord/redis: Put blob %q exec %q: %w", ref, exec, err)
	}
	return ref, nil
}

// Get implements coord.Blobs.
func (b *Blobs) Get(ctx context.Context, exec, ref string) ([]byte, error) {
	data, err := b.client.HGet(ctx, b.key(exec), ref).Bytes()
	if errors.Is(err, goredis.Nil) {
		return nil, fmt.Errorf("coord/redis: Get blob %q exec %q: %w", ref, exec, coord.ErrBlobNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("coord/redis: Get blob %q exec %q: %w", ref, exec, err)
	}
	return data, nil
}

// Release implements coord.Blobs.
func (b *Blobs) Release(ctx context.Context, exec string) error {
	if err := b.client.Del(ctx, b.key(exec)).Err(); err != nil {
		return fmt.Errorf("coord/redis: Release blobs exec %q: %w", exec, err)
	}
	return nil
}
