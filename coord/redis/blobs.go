package redis

import (
	_ "embed"

	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
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
	// is never released. Default 7 days, as an execution's state. A Put
	// never shortens it: with one shard the Coordinator (same Prefix) keeps
	// the hash with the execution's other keys, past a parked timer's due
	// time, and lets it go Retain after the execution ended.
	TTL time.Duration
	// Shards is how many hashes (each with a hash tag of its own, so each
	// its own Redis Cluster slot) an execution's blobs are spread over, by a
	// hash of the ref. Default 1. The workflow definitions, all kept under
	// one execution id, take 16 on Redis Cluster so they spread over its
	// masters. It must not change for a store in use: Get looks for a ref
	// only in its shard.
	Shards int
}

// Blobs implements coord.Blobs on Redis: the blobs of execution X are the
// fields of one hash, <prefix>:{X}:blobs (ref -> data), so Release is one
// DEL. Every Put makes its TTL at least BlobOptions.TTL (put.lua). With BlobOptions.Shards n > 1, a
// blob is in <prefix>:{X}:blobs when its ref's shard is 0, else in
// <prefix>:{X/i}:blobs.i (i its shard), and Release deletes all n in one
// pipeline.
type Blobs struct {
	client goredis.UniversalClient
	// pipe carries Release's DEL with the others' (one per completed
	// execution; pipeline.go): a worker completing thousands of executions a
	// second spent a sixteenth of its CPU on their round trips (issue 33).
	pipe   *pipeline
	prefix string
	ttl    string // milliseconds, as put.lua takes them
	shards int
}

var (
	//go:embed put.lua
	putLua    string
	putScript = goredis.NewScript(putLua)
)

var _ coord.Blobs = (*Blobs)(nil)

// NewBlobs returns Blobs on client. It panics on invalid options (a negative
// TTL, a Prefix with '{' or '}'): that is a programming error. The caller
// keeps ownership of client.
func NewBlobs(client goredis.UniversalClient, opts BlobOptions) *Blobs {
	if opts.Shards < 0 {
		panic(fmt.Sprintf("coord/redis: BlobOptions.Shards is negative (%d)", opts.Shards))
	}
	return &Blobs{client: client, pipe: &pipeline{client: client}, prefix: keyPrefix("BlobOptions", opts.Prefix),
		ttl: millis(orDefault("BlobOptions.TTL", opts.TTL, DefaultTTL)), shards: max(opts.Shards, 1)}
}

// key is the hash of exec's blob ref.
func (b *Blobs) key(exec, ref string) string {
	if b.shards == 1 {
		return b.shardKey(exec, 0)
	}
	h := fnv.New32a()
	h.Write([]byte(ref))
	return b.shardKey(exec, int(h.Sum32()%uint32(b.shards)))
}

// shardKey is exec's hash of shard i. The ".i" suffix keeps shard i of X
// apart from shard 0 of an execution named "X/i".
func (b *Blobs) shardKey(exec string, i int) string {
	if i == 0 {
		return b.prefix + ":{" + exec + "}:blobs"
	}
	n := strconv.Itoa(i)
	return b.prefix + ":{" + exec + "/" + n + "}:blobs." + n
}

// Put implements coord.Blobs. It is one round trip (put.lua).
func (b *Blobs) Put(ctx context.Context, exec string, data []byte) (string, error) {
	if exec == "" {
		return "", errors.New("coord/redis: Put blob: empty execution id")
	}
	ref := coord.BlobRef(data)
	if data == nil {
		data = []byte{}
	}
	if err := putScript.Run(ctx, b.client, []string{b.key(exec, ref)}, ref, data, b.ttl).Err(); err != nil {
		return "", fmt.Errorf("coord/redis: Put blob %q exec %q: %w", ref, exec, err)
	}
	return ref, nil
}

// Get implements coord.Blobs.
func (b *Blobs) Get(ctx context.Context, exec, ref string) ([]byte, error) {
	data, err := b.client.HGet(ctx, b.key(exec, ref), ref).Bytes()
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
	var err error
	if b.shards == 1 {
		err = b.pipe.process(ctx, goredis.NewIntCmd(ctx, "del", b.shardKey(exec, 0)))
	} else {
		// One DEL per shard: on Redis Cluster a DEL takes keys of one slot.
		_, err = b.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i := range b.shards {
				p.Del(ctx, b.shardKey(exec, i))
			}
			return nil
		})
	}
	if err != nil {
		return fmt.Errorf("coord/redis: Release blobs exec %q: %w", exec, err)
	}
	return nil
}
