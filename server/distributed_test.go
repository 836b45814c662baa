package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rune-org/rune/broker/amqp"
	"github.com/rune-org/rune/distributed"
	"github.com/rune-org/rune/internal/browsertest"
	"github.com/rune-org/rune/internal/testinfra"
	"github.com/rune-org/rune/store/postgres"
	"github.com/rune-org/rune/store/storetest"
)

// runeBin is the rune binary, built once in TestMain for the tests that
// run real processes.
var runeBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rune-server-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	runeBin = filepath.Join(dir, "rune")
	build := exec.Command("go", "build", "-o", runeBin, "../cmd/rune")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build rune:", err)
		os.Exit(1)
	}
	code := m.Run()
	browsertest.Shutdown() // the console's browser test (console_distributed_test.go)
	os.RemoveAll(dir)
	os.Exit(code)
}

// deployment is one distributed installation of the test's own:
// PostgreSQL schema, queue and key prefix, secret key.
type deployment struct {
	t        *testing.T
	pgURL    string
	amqpURL  string
	redisURL string
	prefix   string
	key      string
	logs     *testinfra.Buffer
	// env is added to every process's environment from the next start on.
	env []string
}

// allowLoopback is the environment that opens loopback to the nodes of
// rune worker and rune server (which deny it by default, docs/operations.md
// "Egress"): for the tests whose workflows call the test's own servers.
var allowLoopback = []string{"RUNE_EGRESS_ALLOW=127.0.0.0/8"}

const testSecretKey = "3q2+7wAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=" // 32 bytes, base64

func newDeployment(t *testing.T) *deployment { return newDeploymentOn(t, testinfra.AMQPURL(t)) }

// newTracedDeployment is a deployment on a RabbitMQ virtual host of its
// own with the firehose on, so that a testinfra.Spy on the returned URL
// sees every message its processes publish, and only theirs.
func newTracedDeployment(t *testing.T) (*deployment, string) {
	vhost := "rune-server-" + testinfra.Name(t)
	amqpURL := testinfra.OwnVhost(t, vhost)
	testinfra.Rabbitmqctl(t, "trace_on", "-p", vhost)
	return newDeploymentOn(t, amqpURL), amqpURL
}

func newDeploymentOn(t *testing.T, amqpURL string) *deployment {
	d := &deployment{t: t, amqpURL: amqpURL, redisURL: testinfra.RedisURL(t), pgURL: storetest.PostgresURL(t),
		prefix: testinfra.Name(t), key: testSecretKey, logs: &testinfra.Buffer{}}
	t.Cleanup(func() {
		rt, err := distributed.Connect(context.Background(), distributed.Config{AMQPURL: d.amqpURL, RedisURL: d.redisURL,
			Prefix: d.prefix, Role: amqp.RoleAdmin, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Errorf("clean up: %v", err)
			return
		}
		if err := rt.DeleteTopology(context.Background(), d.prefix); err != nil {
			t.Errorf("clean up: %v", err)
		}
		rt.Close()
	})
	return d
}

func (d *deployment) flags() []string {
	return []string{"--amqp", d.amqpURL, "--redis", d.redisURL, "--prefix", d.prefix}
}

// proc is a rune process of a deployment.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	addr string // a server's listening address
}

// start runs rune with args; its output goes to the deployment's logs.
// With server set it waits for the listening address.
func (d *deployment) start(server bool, args ...string) *proc {
	d.t.Helper()
	cmd := exec.Command(runeBin, args...)
	cmd.Env = append(append(os.Environ(), "RUNE_SECRET_KEY="+d.key, "RUNE_LOG_LEVEL=debug"), d.env...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	addrCh := make(chan string, 1)
	listening := regexp.MustCompile(`msg="server listening" addr=(\S+)`)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			line := sc.Text()
			d.logs.Write([]byte(line + "\n"))
			if m := listening.FindStringSubmatch(line); m != nil {
				select {
				case addrCh <- m[1]:
				default:
				}
			}
		}
	}()
	go func() {
		cmd.Wait()
		pw.Close()
		close(p.done)
	}()
	d.t.Cleanup(func() { p.stop() })
	if server {
		select {
		case p.addr = <-addrCh:
		case <-p.done:
			d.t.Fatalf("rune %s exited: %s", strings.Join(args, " "), d.logs.String())
		case <-time.After(60 * time.Second):
			d.t.Fatalf("rune %s: not listening after 60 s", strings.Join(args, " "))
		}
	}
	return p
}

// stop ends a process gracefully (SIGTERM), killing it after 30 s.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// kill ends a process with SIGKILL (kill -9).
func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

func (d *deployment) worker() *proc {
	return d.start(false, append([]string{"worker", "--postgres", d.pgURL, "--concurrency", "64"}, d.flags()...)...)
}

func (d *deployment) scheduler() *proc {
	return d.start(false, append([]string{"scheduler"}, d.flags()...)...)
}

func (d *deployment) server(extra ...string) *proc {
	args := append([]string{"server", "--addr", "127.0.0.1:0", "--postgres", d.pgURL}, d.flags()...)
	return d.start(true, append(args, extra...)...)
}

// waitWorkersReady waits until the workers have declared the topology
// (the server's master role does not declare the execution queue).
func (d *deployment) waitHealthy(p *proc) {
	d.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + p.addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("server %s not healthy after 60 s: %v", p.addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (d *deployment) store() *postgres.Store {
	d.t.Helper()
	st, err := postgres.Open(context.Background(), d.pgURL, "")
	if err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(func() { st.Close() })
	return st
}

// TestAPIDistributed runs the API suite against the distributed master:
// a `rune server` process on PostgreSQL, RabbitMQ and Redis, two `rune
// worker` processes (credentials from the store) and a `rune scheduler`,
// on a virtual host of their own whose every message a spy can read.
func TestAPIDistributed(t *testing.T) {
	d, amqpURL := newTracedDeployment(t)
	d.env = allowLoopback // the suite's workflows call servers of its own
	d.worker()
	d.worker()
	d.scheduler()
	srv := d.server()
	d.waitHealthy(srv)
	st := d.store()
	apiSuite(t, &target{url: "http://" + srv.addr, token: newToken(t, st, "suite"), store: st, output: d.logs.String,
		spy: func(t *testing.T) *testinfra.Spy { return testinfra.NewSpy(t, amqpURL) }})
}
