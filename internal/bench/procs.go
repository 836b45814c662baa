package bench

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The bench charges the CPU time of the servers it talks to (RabbitMQ,
// Redis) to the node executions when they run on this machine: on a small
// machine they share the cores with the workers, and their cost per node
// is what bounds the rate. Linux only; elsewhere, or without the right to
// read another user's /proc entries (root is needed for RabbitMQ's), the
// figures are left out.

// localServerPIDs returns the processes on this machine that listen on the
// loopback ports of rawURL's hosts (several for a Redis Cluster URL,
// "redis://h1:6379,h2:6379"), or nil when a host is not loopback or no
// listener is found.
func localServerPIDs(rawURL string, defaultPort int) []int {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok || !slices.Contains([]string{"amqp", "amqps", "redis", "rediss"}, scheme) {
		return nil
	}
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		rest = rest[:i]
	}
	var ports []int
	for _, host := range strings.Split(rest, ",") {
		if i := strings.LastIndexByte(host, '@'); i >= 0 {
			host = host[i+1:]
		}
		name, port := host, defaultPort
		if h, p, err := net.SplitHostPort(host); err == nil {
			name = h
			if port, err = strconv.Atoi(p); err != nil {
				return nil
			}
		}
		if name, err := url.PathUnescape(name); err != nil || !isLoopback(name) {
			return nil
		}
		ports = append(ports, port)
	}
	return listeningPIDs(ports)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// listeningPIDs returns the processes holding a TCP socket that listens on
// one of ports, each once.
func listeningPIDs(ports []int) []int {
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // the header
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[3] != "0A" { // 0A: LISTEN
				continue
			}
			_, hexPort, _ := strings.Cut(fields[1], ":")
			port, err := strconv.ParseUint(hexPort, 16, 16)
			if err == nil && slices.Contains(ports, int(port)) {
				inodes["socket:["+fields[9]+"]"] = true
			}
		}
		f.Close()
	}
	if len(inodes) == 0 {
		return nil
	}
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	var pids []int
	for _, fd := range fds {
		if link, err := os.Readlink(fd); err == nil && inodes[link] {
			pid, _ := strconv.Atoi(strings.Split(fd, "/")[2])
			if !slices.Contains(pids, pid) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// cpuOf is the CPU time (user + system) the processes used so far; a
// process that is gone counts nothing.
func cpuOf(pids []int) time.Duration {
	var ticks uint64
	for _, pid := range pids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// Fields after the command name (which may hold spaces): utime and
		// stime are the 12th and 13th.
		s := string(data)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 12 {
			u, _ := strconv.ParseUint(f[11], 10, 64)
			st, _ := strconv.ParseUint(f[12], 10, 64)
			ticks += u + st
		}
	}
	return time.Duration(ticks) * (time.Second / 100) // USER_HZ is 100 on Linux
}

// cpuPerNode is the CPU time per node execution of the processes that ran
// them: the spawned workers, the RabbitMQ and Redis servers when they are
// on this machine, and the bench itself (which starts the executions and
// consumes every status and completion). 0: not measured. A server's
// figure is all it did during the run: other clients' work included.
type cpuPerNode struct {
	Worker   time.Duration `json:"worker_ns,omitempty"`
	RabbitMQ time.Duration `json:"rabbitmq_ns,omitempty"`
	Redis    time.Duration `json:"redis_ns,omitempty"`
	Bench    time.Duration `json:"bench_ns"`
	// RabbitMQDefaultBinaryHeap is true when the local RabbitMQ was
	// started without +hmbs (see binaryHeapDefault).
	RabbitMQDefaultBinaryHeap bool `json:"rabbitmq_default_binary_heap,omitempty"`
}

// total is the CPU per node of every process measured.
func (c cpuPerNode) total() time.Duration { return c.Worker + c.RabbitMQ + c.Redis + c.Bench }

func (c cpuPerNode) print(w io.Writer) {
	parts := []string{}
	for _, p := range []struct {
		name string
		d    time.Duration
	}{{"worker", c.Worker}, {"RabbitMQ", c.RabbitMQ}, {"Redis", c.Redis}, {"this bench", c.Bench}} {
		if p.d > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", p.name, p.d.Round(time.Microsecond)))
		}
	}
	if c.Worker > 0 {
		// One line of its own, as earlier benches printed it.
		fmt.Fprintf(w, "  worker CPU:       %s per node execution\n", c.Worker.Round(time.Microsecond))
	}
	total := c.total()
	fmt.Fprintf(w, "  CPU per node:     %s (total %s)\n", strings.Join(parts, ", "), total.Round(time.Microsecond))
	if c.RabbitMQ > 0 && c.Redis > 0 && c.Worker > 0 {
		// Everything runs here: the machine's cores bound the rate.
		cores := runtime.NumCPU()
		fmt.Fprintf(w, "  so %d cores carry at most %.0f node executions/s at this CPU per node\n",
			cores, float64(cores)*float64(time.Second)/float64(total))
	}
	if c.RabbitMQDefaultBinaryHeap {
		fmt.Fprintln(w, "  RabbitMQ was started without +hmbs: with Erlang's default binary heap (measured on RabbitMQ 3.10, Erlang 25)\n"+
			"    a queue holding more than ~350 KB of messages ran at half speed; see docs/operations.md, \"Erlang's binary heap\"")
	}
}

// binaryHeapDefault reports whether one of pids is an Erlang VM (RabbitMQ's
// beam.smp) started without +hmbs. With Erlang's default binary heap (46,422
// words, ~370 KB), a classic queue holding more than ~350 KB of messages
// confirms half as many a second (docs/benchmarks.md, "Round 9"). Only the
// command line is read: a flag set at run time (erlang:system_flag) is not
// seen.
func binaryHeapDefault(pids []int) bool {
	for _, pid := range pids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		args := strings.Split(string(data), "\x00")
		if strings.HasSuffix(args[0], "beam.smp") {
			// erlexec hands emulator flags to beam.smp as -hmbs.
			return !slices.Contains(args, "-hmbs") && !slices.Contains(args, "+hmbs")
		}
	}
	return false
}

// cpuMeter takes the CPU times at the start of a run.
type cpuMeter struct {
	workers, rabbit, redis []int
	start                  [4]time.Duration
}

func newCPUMeter(workers *workerGroup, srv *Deployment) *cpuMeter {
	m := &cpuMeter{rabbit: localServerPIDs(srv.AMQPURL, 5672), redis: localServerPIDs(srv.RedisURL, 6379)}
	if workers != nil {
		m.workers = workers.pids()
	}
	m.start = m.now()
	return m
}

func (m *cpuMeter) now() [4]time.Duration {
	return [4]time.Duration{cpuOf(m.workers), cpuOf(m.rabbit), cpuOf(m.redis), cpuTime()}
}

// perNode divides what each process used since the start by nodes.
func (m *cpuMeter) perNode(nodes int) cpuPerNode {
	if nodes <= 0 {
		return cpuPerNode{}
	}
	end := m.now()
	per := func(i int) time.Duration { return (end[i] - m.start[i]) / time.Duration(nodes) }
	return cpuPerNode{Worker: per(0), RabbitMQ: per(1), Redis: per(2), Bench: per(3),
		RabbitMQDefaultBinaryHeap: binaryHeapDefault(m.rabbit)}
}
