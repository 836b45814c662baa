package redis

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// DefaultClusterShards is Connection.Shards on a Redis Cluster when the URL
// does not say: enough hash tags to spread timers, definitions and a
// barrier's values over up to 16 masters.
const DefaultClusterShards = 16

// Connection is a Redis client opened from a URL, and how the stores on it
// shard their single-key structures (the timer index, the definitions) and
// a barrier's values.
type Connection struct {
	// Client is a *goredis.Client, or a *goredis.ClusterClient for a cluster.
	Client goredis.UniversalClient
	// Cluster says Client is a cluster client.
	Cluster bool
	// Shards is what TimerOptions.Shards, the definitions'
	// BlobOptions.Shards and BarrierOptions.Shards take: the URL's shards
	// parameter, default 1 on a single Redis and DefaultClusterShards on a
	// cluster.
	Shards int
	// TTL is the URL's ttl parameter, default DefaultTTL: how long an
	// execution's coordination state outlives its last activity and what
	// it holds back (Options.TTL), and its large values (BlobOptions.TTL).
	TTL time.Duration
	// Addrs are the addresses Client was given (for messages).
	Addrs []string
}

// Open opens a client of rawURL, go-redis's URL form plus three parameters
// of Rune's:
//
//	redis://host:6379/0                        one Redis
//	redis://host1:6379?cluster=true            a Redis Cluster (any node)
//	redis://host1:6379,host2:6379,host3:6379   a Redis Cluster (several nodes)
//	redis://host1:6379?addr=host2:6379         a Redis Cluster (go-redis's form)
//	...&shards=N                               the Shards (see Connection)
//	...&ttl=30s                                the TTL (see Connection): a Go
//	                                           duration, or days ("7d")
//
// A cluster URL takes go-redis's ClusterOptions parameters and no database
// number. Open does not connect: the first command does.
//
// Maintenance notifications (a Redis Enterprise handshake go-redis tries on
// every new connection by default, which open-source Redis refuses) are
// off: turning them off after the refusal is a write to the client's
// options that go-redis v9.23 races on when connections of Client.Conn
// (coord.Holder) are dialled at once.
func Open(rawURL string) (*Connection, error) { return OpenPool(rawURL, 0) }

// OpenPool is Open with a pool of at least minPool connections (per node of
// a cluster) where the URL's pool_size, or go-redis's default (10 per CPU,
// 5 per CPU and node on a cluster), is smaller. Connections are dialled as
// they are needed.
func OpenPool(rawURL string, minPool int) (*Connection, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which may hold a password
		}
		return nil, fmt.Errorf("redis URL: %w", err)
	}
	q := u.Query()
	cluster := q.Has("addr")
	if v := q.Get("cluster"); v != "" {
		if cluster, err = strconv.ParseBool(v); err != nil {
			return nil, fmt.Errorf("redis URL: parameter cluster=%q: want true or false", v)
		}
	}
	q.Del("cluster")
	if hosts := strings.Split(u.Host, ","); len(hosts) > 1 {
		cluster = true
		u.Host = hosts[0]
		for _, h := range hosts[1:] {
			q.Add("addr", h)
		}
	}
	shards := 1
	if cluster {
		shards = DefaultClusterShards
	}
	if v := q.Get("shards"); v != "" {
		if shards, err = strconv.Atoi(v); err != nil || shards < 1 {
			return nil, fmt.Errorf("redis URL: parameter shards=%q: want a whole number of at least 1", v)
		}
	}
	q.Del("shards")
	ttl := DefaultTTL
	if q.Has("ttl") {
		if ttl, err = parseTTL(q.Get("ttl")); err != nil {
			return nil, err
		}
	}
	q.Del("ttl")
	u.RawQuery = q.Encode()
	if !cluster {
		opts, err := goredis.ParseURL(u.String())
		if err != nil {
			return nil, fmt.Errorf("redis URL: %w", err)
		}
		opts.PoolSize = poolAtLeast(opts.PoolSize, 10, minPool)
		opts.MaintNotificationsConfig = maintenanceOff()
		return &Connection{Client: goredis.NewClient(opts), Shards: shards, TTL: ttl, Addrs: []string{opts.Addr}}, nil
	}
	if strings.Trim(u.Path, "/") != "" {
		return nil, fmt.Errorf("redis URL: database %q: a Redis Cluster has only database 0", strings.Trim(u.Path, "/"))
	}
	u.Path = ""
	opts, err := goredis.ParseClusterURL(u.String())
	if err != nil {
		return nil, fmt.Errorf("redis URL: %w", err)
	}
	opts.PoolSize = poolAtLeast(opts.PoolSize, 5, minPool)
	opts.MaintNotificationsConfig = maintenanceOff()
	return &Connection{Client: goredis.NewClusterClient(opts), Cluster: true, Shards: shards, TTL: ttl, Addrs: opts.Addrs}, nil
}

// parseTTL reads the URL's ttl parameter: a Go duration ("30s", "168h") or
// a whole number of days ("7d"), at least a millisecond.
func parseTTL(v string) (time.Duration, error) {
	var d time.Duration
	var err error
	if days, ok := strings.CutSuffix(v, "d"); ok {
		var n int
		if n, err = strconv.Atoi(days); err == nil && n > 0 && n <= 100*365 {
			d = time.Duration(n) * 24 * time.Hour
		}
	} else {
		d, err = time.ParseDuration(v)
	}
	if err != nil || d < time.Millisecond {
		return 0, fmt.Errorf("redis URL: parameter ttl=%q: want a positive duration such as 30s, 168h or 7d", v)
	}
	return d, nil
}

// maintenanceOff turns go-redis's maintenance notifications off (Open's
// doc says why); a new value per client, since go-redis writes to it.
func maintenanceOff() *maintnotifications.Config {
	return &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
}

// poolAtLeast is a pool size of at least least: size, or go-redis's default
// of perCPU connections per CPU when size is 0.
func poolAtLeast(size, perCPU, least int) int {
	if size == 0 {
		size = perCPU * runtime.GOMAXPROCS(0)
	}
	return max(size, least)
}

// DeleteKeys unlinks every key matching pattern (SCAN MATCH), on every
// master of a cluster.
func DeleteKeys(ctx context.Context, client goredis.UniversalClient, pattern string) error {
	del := func(ctx context.Context, c *goredis.Client) error {
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			c.Unlink(ctx, iter.Val())
		}
		return iter.Err()
	}
	switch c := client.(type) {
	case *goredis.ClusterClient:
		return c.ForEachMaster(ctx, del)
	case *goredis.Client:
		return del(ctx, c)
	}
	return fmt.Errorf("coord/redis: DeleteKeys: unsupported client %T", client)
}
