package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rune-org/rune/broker/amqp"
	coordredis "github.com/rune-org/rune/coord/redis"
	"github.com/rune-org/rune/internal/testinfra"
)

// A RabbitMQ node lost (issue 30, item 8): a three-node RabbitMQ cluster
// started for this test (own node names, ports, data directories and
// Erlang cookie; the shared node on 5672 is not touched), quorum queues,
// two `rune worker` processes and a `rune scheduler`, each given every
// node's URL (--amqp "amqp://…n1,amqp://…n2,amqp://…n3"). Mid-run the node
// that the master, the scheduler and the first worker are connected to,
// and which leads the queues that worker declared, is killed with
// SIGKILL: the processes reconnect to another node, the quorum queues
// elect new leaders, and executions go on completing while it is down.
// Brought back, it rejoins the cluster. Every execution completes exactly
// once, with its right result (faultRun's checks). Starting three nodes
// takes a while, so the test runs only with RUNE_TEST_RABBIT_CLUSTER=1
// (.ci/run runs it on its own, after the parallel suite); set, anything
// missing fails it.
func TestFaultRabbitClusterNodeLost(t *testing.T) {
	if os.Getenv("RUNE_TEST_RABBIT_CLUSTER") != "1" {
		t.Skip("starts a three-node RabbitMQ cluster of its own: set RUNE_TEST_RABBIT_CLUSTER=1 to run it (.ci/run does)")
	}
	begin := time.Now()
	testinfra.RedisURL(t)
	rc := startRabbitCluster(t, 3)
	t.Logf("three-node RabbitMQ cluster up in %v", time.Since(begin).Round(time.Millisecond))

	c := newClusterWith(t, rc.urls(0), "", amqp.QueueQuorum)
	r := &faultRun{t: t, c: c, fx: newSideEffects(t), timers: coordredis.NewTimers(c.redis, coordredis.TimerOptions{Prefix: c.prefix})}
	// The master and the scheduler connect to node 1 first, as does the
	// first worker; the second worker to node 2.
	r.workers = []*proc{c.startWorker(append([]string{"--amqp", rc.urls(0)}, allowLoopback...)...), c.startWorker(append([]string{"--amqp", rc.urls(1)}, allowLoopback...)...)}
	r.schedulers = []*proc{r.startScheduler()}
	waitFor(t, 60*time.Second, "both workers consuming", func() bool {
		return inspectQueue(t, c, c.prefix+".workflow.execution").Consumers == 2
	})
	if typ := rc.nodes[1].queueType(t, c.prefix+".workflow.execution"); typ != "quorum" {
		t.Fatalf("queue %s.workflow.execution is %q, want quorum", c.prefix, typ)
	}

	r.start()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		// What was left, to tell a stuck run from a slow one.
		var left []string
		for _, q := range []string{"workflow.execution", "workflow.timeout.process", "workflow.dlq", "workflow.completion"} {
			if qs, err := declarePassive(t, c, c.prefix+"."+q); err == nil {
				left = append(left, fmt.Sprintf("%s: %d ready, %d consumers", q, qs.Messages, qs.Consumers))
			}
		}
		st, err := r.timers.Stats(context.Background())
		t.Logf("at the end: %d of %d executions completed; %s; timers %+v (%v)", r.cs.distinct(), faultExecutions, strings.Join(left, "; "), st, err)
		var missing []string
		r.cs.mu.Lock()
		for _, id := range r.ids {
			if r.cs.first[id] == nil {
				missing = append(missing, id)
			}
		}
		r.cs.mu.Unlock()
		out, _ := rc.nodes[1].ctlOutput("list_queues", "name", "type", "messages_ready", "messages_unacknowledged", "consumers")
		t.Logf("not completed: %v\nqueues:\n%s", missing, out)
	})
	r.midFanOut()
	lost := rc.nodes[0]
	before := r.cs.distinct()
	lost.kill(t)
	t.Logf("killed %s (kill -9) with %d of %d executions completed", lost.name, before, faultExecutions)
	for _, p := range []*proc{r.workers[0], r.schedulers[0]} {
		p.waitLog(t, "amqp broker: reconnected", 120*time.Second)
	}
	// The cluster carries on without the node: executions complete while
	// it is down (not only once it is back).
	waitFor(t, faultTimeout, "executions completing while a node is down", func() bool {
		n := r.cs.distinct()
		return n >= before+20 || n == faultExecutions
	})
	t.Logf("%d executions completed while %s was down", r.cs.distinct()-before, lost.name)
	lost.start(t)
	lost.ctl(t, "await_startup")
	waitFor(t, 60*time.Second, lost.name+" back in the cluster", func() bool {
		out, err := rc.nodes[1].ctlOutput("eval", "length(rabbit_nodes:all_running()).")
		return err == nil && strings.TrimSpace(out) == "3"
	})
	r.finish()
	t.Logf("whole test: %v", time.Since(begin).Round(time.Millisecond))
}

// rabbitCluster is a RabbitMQ cluster of one test.
type rabbitCluster struct {
	nodes []*rabbitNode
}

// urls is every node's AMQP URL, separated by commas, node first first.
func (rc *rabbitCluster) urls(first int) string {
	var out []string
	for i := range rc.nodes {
		out = append(out, rc.nodes[(first+i)%len(rc.nodes)].url)
	}
	return strings.Join(out, ",")
}

// rabbitNode is one node of a rabbitCluster, run by rabbitmq-server (a
// shell script whose child is the Erlang VM: its pid file names the VM).
type rabbitNode struct {
	name, url, port, dir string
	env                  []string
	cmd                  *exec.Cmd
	exited               chan struct{}
	out                  *testinfra.Buffer
}

// rabbitCommand finds one of RabbitMQ's scripts, failing t without it (the
// test runs only when asked to).
func rabbitCommand(t *testing.T, name string) string {
	t.Helper()
	for _, dir := range []string{"/usr/lib/rabbitmq/bin", "/usr/local/lib/rabbitmq/bin"} {
		if p := filepath.Join(dir, name); fileExists(p) {
			return p
		}
	}
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("RUNE_TEST_RABBIT_CLUSTER=1 but %s is not installed: %v", name, err)
	}
	return p
}

// startRabbitCluster starts n nodes at once and joins the others to the
// first.
func startRabbitCluster(t *testing.T, n int) *rabbitCluster {
	t.Helper()
	rabbitCommand(t, "rabbitmq-server") // fail at once when missing
	ctl := rabbitCommand(t, "rabbitmqctl")
	// One HOME for all: the nodes and rabbitmqctl share its Erlang cookie.
	home := t.TempDir()
	cookie := testinfra.Name(t) + testinfra.Name(t)
	if err := os.WriteFile(filepath.Join(home, ".erlang.cookie"), []byte(cookie), 0o400); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "plugins"), []byte("[].\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	id := testinfra.Name(t)
	rc := &rabbitCluster{}
	for i := range n {
		dir := filepath.Join(home, "n"+strconv.Itoa(i+1))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		port, dist := freePort(t), freePort(t)
		node := &rabbitNode{name: fmt.Sprintf("rune%sn%d@localhost", id, i+1), port: port, dir: dir,
			url: "amqp://guest:guest@127.0.0.1:" + port + "/"}
		node.env = append(cleanEnv(), "HOME="+home, "RABBITMQ_NODENAME="+node.name, "RABBITMQ_NODE_PORT="+port,
			"RABBITMQ_DIST_PORT="+dist, "RABBITMQ_MNESIA_BASE="+filepath.Join(dir, "mnesia"),
			"RABBITMQ_LOG_BASE="+filepath.Join(dir, "log"), "RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(home, "plugins"),
			"RABBITMQ_PID_FILE="+filepath.Join(dir, "pid"), "RABBITMQ_CONFIG_FILE="+filepath.Join(dir, "rabbitmq"),
			"RABBITMQ_ADVANCED_CONFIG_FILE="+filepath.Join(dir, "advanced.config"))
		rc.nodes = append(rc.nodes, node)
		t.Cleanup(func() {
			if node.cmd == nil {
				return
			}
			c := exec.Command(ctl, "-n", node.name, "-q", "stop")
			c.Env = node.env
			_ = c.Run()
			select {
			case <-node.exited:
			case <-time.After(30 * time.Second):
				node.killVM()
				_ = node.cmd.Process.Kill()
				<-node.exited
			}
		})
		node.launch(t)
	}
	// The three start at once: each takes seconds of CPU.
	for _, node := range rc.nodes {
		node.waitListening(t)
		node.ctl(t, "await_startup")
	}
	for _, node := range rc.nodes[1:] {
		node.ctl(t, "stop_app")
		node.ctl(t, "join_cluster", rc.nodes[0].name)
		node.ctl(t, "start_app")
	}
	return rc
}

// start runs rabbitmq-server for the node (again, after kill: the node
// keeps its data and rejoins its cluster) and waits until it listens.
func (n *rabbitNode) start(t *testing.T) {
	t.Helper()
	n.launch(t)
	n.waitListening(t)
}

// launch starts rabbitmq-server for the node.
func (n *rabbitNode) launch(t *testing.T) {
	t.Helper()
	n.cmd = exec.Command(rabbitCommand(t, "rabbitmq-server"))
	n.cmd.Env = n.env
	n.out = &testinfra.Buffer{}
	n.cmd.Stdout, n.cmd.Stderr = n.out, n.out
	if err := n.cmd.Start(); err != nil {
		t.Fatalf("start rabbitmq-server %s: %v", n.name, err)
	}
	exited := make(chan struct{})
	n.exited = exited
	go func(cmd *exec.Cmd) { _ = cmd.Wait(); close(exited) }(n.cmd)
}

// waitListening waits until the node accepts AMQP connections.
func (n *rabbitNode) waitListening(t *testing.T) {
	t.Helper()
	waitFor(t, 180*time.Second, n.name+" to listen", func() bool {
		select {
		case <-n.exited:
			t.Fatalf("rabbitmq-server %s exited:\n%s", n.name, tail(n.out.String(), 4<<10))
		default:
		}
		c, err := net.Dial("tcp", "127.0.0.1:"+n.port)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
}

// kill kills the node's Erlang VM with SIGKILL, as a crash would, and waits
// until it is gone.
func (n *rabbitNode) kill(t *testing.T) {
	t.Helper()
	if !n.killVM() {
		t.Fatalf("kill %s: no pid in %s", n.name, filepath.Join(n.dir, "pid"))
	}
	select {
	case <-n.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s still runs 30 s after SIGKILL", n.name)
	}
}

// killVM sends SIGKILL to the Erlang VM named by the node's pid file.
func (n *rabbitNode) killVM() bool {
	raw, err := os.ReadFile(filepath.Join(n.dir, "pid"))
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || pid <= 1 {
		return false
	}
	return syscall.Kill(pid, syscall.SIGKILL) == nil
}

// ctl runs rabbitmqctl against the node.
func (n *rabbitNode) ctl(t *testing.T, args ...string) {
	t.Helper()
	if out, err := n.ctlOutput(args...); err != nil {
		t.Fatalf("rabbitmqctl -n %s %s: %v\n%s", n.name, strings.Join(args, " "), err, out)
	}
}

func (n *rabbitNode) ctlOutput(args ...string) (string, error) {
	ctl := "/usr/lib/rabbitmq/bin/rabbitmqctl"
	if !fileExists(ctl) {
		ctl = "rabbitmqctl"
	}
	c := exec.Command(ctl, append([]string{"-n", n.name, "-q"}, args...)...)
	c.Env = n.env
	out, err := c.CombinedOutput()
	return string(out), err
}

// queueType is the type RabbitMQ gives queue.
func (n *rabbitNode) queueType(t *testing.T, queue string) string {
	t.Helper()
	out, err := n.ctlOutput("list_queues", "--no-table-headers", "name", "type")
	if err != nil {
		t.Fatalf("rabbitmqctl list_queues: %v\n%s", err, out)
	}
	for line := range strings.Lines(out) {
		if f := strings.Fields(line); len(f) == 2 && f[0] == queue {
			return f[1]
		}
	}
	t.Fatalf("queue %s not listed by %s:\n%s", queue, n.name, out)
	return ""
}
