package redis_test

import (
	"runtime"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rune-org/rune/coord/redis"
)

func TestOpen(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		url     string
		cluster bool
		shards  int
		addrs   string
		ttl     time.Duration
	}{
		{"redis://127.0.0.1:6379/0", false, 1, "127.0.0.1:6379", redis.DefaultTTL},
		{"redis://127.0.0.1:6379/0?shards=4", false, 4, "127.0.0.1:6379", redis.DefaultTTL},
		{"redis://127.0.0.1:6379/0?ttl=30s", false, 1, "127.0.0.1:6379", 30 * time.Second},
		{"redis://127.0.0.1:6379/0?shards=2&ttl=14d", false, 2, "127.0.0.1:6379", 14 * 24 * time.Hour},
		{"redis://h1:7000?cluster=true", true, redis.DefaultClusterShards, "h1:7000", redis.DefaultTTL},
		{"redis://h1:7000,h2:7001,h3:7002?ttl=3s", true, redis.DefaultClusterShards, "h1:7000 h2:7001 h3:7002", 3 * time.Second},
		{"redis://h1:7000?addr=h2:7001&shards=3&ttl=1h30m", true, 3, "h1:7000 h2:7001", 90 * time.Minute},
		{"redis://u:pw@h1:7000,h2:7001/?dial_timeout=3s", true, redis.DefaultClusterShards, "h1:7000 h2:7001", redis.DefaultTTL},
	} {
		conn, err := redis.Open(c.url)
		if err != nil {
			t.Errorf("Open(%q): %v", c.url, err)
			continue
		}
		conn.Client.Close()
		if conn.Cluster != c.cluster || conn.Shards != c.shards || strings.Join(conn.Addrs, " ") != c.addrs || conn.TTL != c.ttl {
			t.Errorf("Open(%q) = cluster %v, shards %d, addrs %v, ttl %v; want %v, %d, %s, %v",
				c.url, conn.Cluster, conn.Shards, conn.Addrs, conn.TTL, c.cluster, c.shards, c.addrs, c.ttl)
		}
	}
	// An invalid ttl is refused, naming the parameter.
	for _, bad := range []string{"ttl=", "ttl=0", "ttl=-3s", "ttl=3", "ttl=soon", "ttl=0d", "ttl=1.5d", "ttl=500us"} {
		u := "redis://u:secretpw@127.0.0.1:6379/0?" + bad
		conn, err := redis.Open(u)
		if err == nil {
			conn.Client.Close()
			t.Errorf("Open(%q): no error", u)
			continue
		}
		if !strings.Contains(err.Error(), "parameter ttl=") || strings.Contains(err.Error(), "secretpw") {
			t.Errorf("Open(%q): error %q, want one naming parameter ttl and not the password", u, err)
		}
	}
	for _, bad := range []string{
		"redis://h1:7000?shards=0",
		"redis://h1:7000?cluster=maybe",
		"redis://h1:7000,h2:7001/2",
		"redis://u:secretpw@h1:7000?nosuchoption=1",
		"redis://u:secretpw@h1:bad port",
	} {
		conn, err := redis.Open(bad)
		if err == nil {
			conn.Client.Close()
			t.Errorf("Open(%q): no error", bad)
			continue
		}
		if strings.Contains(err.Error(), "secretpw") {
			t.Errorf("Open(%q): error %q shows the password", bad, err)
		}
	}
}

// OpenPool raises the pool to at least its minimum, and keeps a larger
// pool_size or go-redis's default when they are larger.
func TestOpenPool(t *testing.T) {
	t.Parallel()
	dflt := 10 * runtime.GOMAXPROCS(0)
	for _, c := range []struct {
		url  string
		min  int
		want int
	}{
		{"redis://127.0.0.1:6379/0", 0, dflt},
		{"redis://127.0.0.1:6379/0", dflt + 100, dflt + 100},
		{"redis://127.0.0.1:6379/0", 1, dflt},
		{"redis://127.0.0.1:6379/0?pool_size=500", 64, 500},
		{"redis://127.0.0.1:6379/0?pool_size=4", 64, 64},
		{"redis://h1:7000?cluster=true", 300, 300},
		{"redis://h1:7000?cluster=true", 0, 5 * runtime.GOMAXPROCS(0)},
	} {
		conn, err := redis.OpenPool(c.url, c.min)
		if err != nil {
			t.Fatalf("%s: %v", c.url, err)
		}
		var got int
		switch cl := conn.Client.(type) {
		case *goredis.Client:
			got = cl.Options().PoolSize
		case *goredis.ClusterClient:
			got = cl.Options().PoolSize
		}
		conn.Client.Close()
		if got != c.want {
			t.Errorf("OpenPool(%s, %d): pool of %d, want %d", c.url, c.min, got, c.want)
		}
	}
}
