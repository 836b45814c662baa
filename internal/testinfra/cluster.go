package testinfra

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// RedisClusterMasters is how many masters the local test cluster has.
const RedisClusterMasters = 3

// cluster is the package's one local Redis Cluster: started by the
// first test that asks for it, stopped by StopRedisCluster (TestMain).
var cluster struct {
	once  sync.Once
	addrs []string
	dir   string
	err   error
}

// RedisClusterAddrs returns the addresses of a Redis Cluster of three
// masters: RUNE_TEST_REDIS_CLUSTER (comma-separated host:port, as .ci/run
// sets it) when set, else a cluster this process starts once on free ports
// (redis-server --cluster-enabled yes, redis-cli --cluster create) and a
// TestMain stops with StopRedisCluster. It skips t, or fails it under
// CI=true, when neither works.
func RedisClusterAddrs(t testing.TB) []string {
	t.Helper()
	if v := os.Getenv("RUNE_TEST_REDIS_CLUSTER"); v != "" {
		addrs := strings.Split(v, ",")
		for _, a := range addrs {
			Require(t, "Redis Cluster node", "redis://"+a)
		}
		return addrs
	}
	cluster.once.Do(func() { cluster.addrs, cluster.dir, cluster.err = startRedisCluster() })
	if cluster.err != nil {
		Unavailable(t, "local Redis Cluster: %v", cluster.err)
	}
	return cluster.addrs
}

// RedisClusterURL is a Redis URL of the cluster of RedisClusterAddrs, in
// the form coord/redis.Open reads: its hosts comma-separated.
func RedisClusterURL(t testing.TB) string {
	t.Helper()
	return "redis://" + strings.Join(RedisClusterAddrs(t), ",")
}

// StopRedisCluster shuts down the cluster RedisClusterAddrs started, if
// any, and removes its files. Call it from TestMain after m.Run.
func StopRedisCluster() {
	if cluster.dir == "" {
		return
	}
	for _, a := range cluster.addrs {
		_, port, _ := net.SplitHostPort(a)
		_ = exec.Command("redis-cli", "-p", port, "shutdown", "nosave").Run()
	}
	_ = os.RemoveAll(cluster.dir)
}

// startRedisCluster starts three cluster-enabled redis-servers on free
// ports and joins them, one master each, no replicas.
func startRedisCluster() (addrs []string, dir string, err error) {
	for _, c := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(c); err != nil {
			return nil, "", fmt.Errorf("%s not found: %w", c, err)
		}
	}
	dir, err = os.MkdirTemp("", "rune-redis-cluster-")
	if err != nil {
		return nil, "", err
	}
	defer func() {
		if err != nil {
			for _, a := range addrs {
				_, port, _ := net.SplitHostPort(a)
				_ = exec.Command("redis-cli", "-p", port, "shutdown", "nosave").Run()
			}
			_ = os.RemoveAll(dir)
			dir = ""
		}
	}()
	for i := range RedisClusterMasters {
		port, err := freePort()
		if err != nil {
			return addrs, dir, err
		}
		p := strconv.Itoa(port)
		out, err := exec.Command("redis-server", "--bind", "127.0.0.1", "--port", p,
			"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes-"+p+".conf"),
			"--save", "", "--appendonly", "no", "--daemonize", "yes", "--dir", dir,
			"--logfile", filepath.Join(dir, "redis-"+p+".log")).CombinedOutput()
		if err != nil {
			return addrs, dir, fmt.Errorf("start redis-server %d on port %s: %v: %s", i, p, err, out)
		}
		addrs = append(addrs, "127.0.0.1:"+p)
		if err := waitPort(addrs[i], 10*time.Second); err != nil {
			return addrs, dir, err
		}
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		return addrs, dir, fmt.Errorf("redis-cli --cluster create: %v: %s", err, out)
	}
	// The cluster serves every slot once each node has heard of the others.
	deadline := time.Now().Add(30 * time.Second)
	for _, a := range addrs {
		_, port, _ := net.SplitHostPort(a)
		for {
			out, _ := exec.Command("redis-cli", "-p", port, "cluster", "info").Output()
			if strings.Contains(string(out), "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				return addrs, dir, fmt.Errorf("redis cluster node %s: not ok after 30s: %s", a, out)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return addrs, dir, nil
}

// freePort is a TCP port nothing listens on now. Redis Cluster also uses
// port+10000 for its bus, so that one must be free too.
func freePort() (int, error) {
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if port+10000 > 65535 {
			continue
		}
		if bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000)); err == nil {
			bus.Close()
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free port pair (port, port+10000) found")
}

func waitPort(addr string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server at %s did not come up: %w", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
