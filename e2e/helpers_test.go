package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	goredis "github.com/redis/go-redis/v9"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/broker/amqp"
	"github.com/rune-org/rune/client"
	"github.com/rune-org/rune/distributed"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/internal/testinfra"
	"github.com/rune-org/rune/message"
)

// The rune binary the tests run, built once per test run (on first use, so
// that a run whose tests all skip builds nothing).
var (
	binDir    string
	buildOnce sync.Once
	runeBin   string
	buildErr  error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rune-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// binary returns the path of the rune binary, building it on first use.
func binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			buildErr = fmt.Errorf("the go command is needed to build rune: %w", err)
			return
		}
		out := filepath.Join(binDir, "rune")
		// -tags fault: the fault tests ask for faults through variables
		// (internal/fault) that a production build does not read.
		cmd := exec.Command(goTool, "build", "-tags", "fault", "-o", out, "github.com/rune-org/rune/cmd/rune")
		if msg, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/rune: %v\n%s", err, msg)
			return
		}
		runeBin = out
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return runeBin
}

// proc is a rune subprocess.
type proc struct {
	name   string
	cmd    *exec.Cmd
	stdout testinfra.Buffer
	stderr testinfra.Buffer
	done   chan struct{} // closed once the process has exited
	err    error         // cmd.Wait's result, set before done closes
}

// startProc starts the rune binary with args. When t ends the process is
// killed if it still runs, and on failure its stderr goes to the test log.
func startProc(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	return startProcEnv(t, name, nil, args...)
}

// startProcEnv is startProc with env ("K=V") added to the environment.
func startProcEnv(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: exec.Command(binary(t), args...), done: make(chan struct{})}
	p.cmd.Stdout = &p.stdout
	p.cmd.Stderr = &p.stderr
	p.cmd.Env = append(cleanEnv(), env...)
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.exited() {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s (%s) stderr:\n%s", p.name, strings.Join(args, " "), tail(p.stderr.String(), 64<<10))
		}
	})
	return p
}

// cleanEnv is this process's environment without RUNE_ variables, so that a
// developer's settings never leak into the processes under test.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RUNE_") {
			env = append(env, kv)
		}
	}
	return env
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitLog waits until the process's stderr contains text.
func (p *proc) waitLog(t *testing.T, text string, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, fmt.Sprintf("%s to log %q", p.name, text), func() bool {
		if p.exited() {
			t.Fatalf("%s exited (%v) before logging %q", p.name, p.err, text)
		}
		return strings.Contains(p.stderr.String(), text)
	})
}

// wait waits for the process to exit and returns its exit status.
func (p *proc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("%s did not exit within %v", p.name, timeout)
	}
	if p.err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	t.Fatalf("%s: %v", p.name, p.err)
	return -1
}

// terminate sends SIGTERM and waits for the process to exit with status 0.
func (p *proc) terminate(t *testing.T, timeout time.Duration) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM %s: %v", p.name, err)
	}
	if code := p.wait(t, timeout); code != 0 {
		t.Fatalf("%s exited with status %d after SIGTERM, want 0", p.name, code)
	}
}

// waitFor polls cond until it holds, failing t after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

// cluster is one isolated deployment on the shared servers: a prefix of its
// own for queues, exchanges and Redis keys, and the master side (broker and
// engine) in the test process.
type cluster struct {
	t        *testing.T
	prefix   string
	amqpURL  string
	redisURL string
	master   *amqp.Broker
	engine   *engine.Engine
	redis    *goredis.Client
	workers  int
	// queueType is the processes' --queue-type; "" leaves the default.
	queueType string
}

// newCluster connects the master side to amqpURL (default: testinfra's) and
// Redis under a fresh prefix, as `rune start` does. When t ends, the
// prefix's queues, exchanges and keys are deleted.
func newCluster(t *testing.T, amqpURL string) *cluster {
	t.Helper()
	return newClusterOn(t, amqpURL, "")
}

// newClusterOn is newCluster on the Redis at redisURL (default:
// testinfra's).
func newClusterOn(t *testing.T, amqpURL, redisURL string) *cluster {
	t.Helper()
	return newClusterWith(t, amqpURL, redisURL, "")
}

// newClusterWith is newClusterOn with durable queues of queueType (""
// leaves the default) for the master and the processes it starts.
func newClusterWith(t *testing.T, amqpURL, redisURL, queueType string) *cluster {
	t.Helper()
	if amqpURL == "" {
		amqpURL = testinfra.AMQPURL(t)
	}
	if redisURL == "" {
		redisURL = testinfra.RedisURL(t)
	}
	c := &cluster{t: t, prefix: testinfra.Name(t), amqpURL: amqpURL, redisURL: redisURL, queueType: queueType}
	t.Logf("prefix %s", c.prefix)
	// The test's own client: without Rune's options (shards), which
	// go-redis does not know.
	u, err := url.Parse(c.redisURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Del("shards")
	u.RawQuery = q.Encode()
	opts, err := goredis.ParseURL(u.String())
	if err != nil {
		t.Fatal(err)
	}
	c.redis = goredis.NewClient(opts)
	t.Cleanup(c.purge)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rt, err := distributed.Connect(ctx, distributed.Config{
		AMQPURL: amqpURL, RedisURL: c.redisURL, Prefix: c.prefix, Role: amqp.RoleMaster, Logger: testLogger(), QueueType: queueType,
	})
	if err != nil {
		t.Fatalf("connect the master side: %v", err)
	}
	t.Cleanup(rt.Close)
	c.master, c.engine = rt.Broker, rt.Engine
	return c
}

// testLogger logs warnings to stderr under -v and nothing otherwise.
func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return slog.New(slog.DiscardHandler)
}

// serverArgs are the connection flags of this cluster.
func (c *cluster) serverArgs() []string {
	args := []string{"--amqp", c.amqpURL, "--redis", c.redisURL, "--prefix", c.prefix}
	if c.queueType != "" {
		args = append(args, "--queue-type", c.queueType)
	}
	return args
}

// allowLoopback opens loopback to a worker's nodes (rune worker denies it by
// default, docs/operations.md "Egress"): for the tests whose workflows call
// servers of the test's own on 127.0.0.1.
var allowLoopback = []string{"--egress-allow", "127.0.0.0/8"}

// startWorker starts a `rune worker` and waits until it has declared the
// topology and is about to consume.
func (c *cluster) startWorker(extra ...string) *proc {
	c.t.Helper()
	c.workers++
	p := startProc(c.t, fmt.Sprintf("worker %d", c.workers), append(append([]string{"worker"}, c.serverArgs()...), extra...)...)
	p.waitLog(c.t, "worker started", 30*time.Second)
	return p
}

// purge deletes the cluster's queues, exchanges and Redis keys.
func (c *cluster) purge() {
	defer c.redis.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	iter := c.redis.Scan(ctx, 0, c.prefix+":*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	for _, k := range keys {
		c.redis.Del(ctx, k)
	}
	conn, err := dialAny(c.amqpURL)
	if err != nil {
		c.t.Logf("purge: %v", err)
		return
	}
	defer conn.Close()
	p := c.prefix + "."
	// Delay queues other than the examples' retry queues (merge timeouts,
	// say) are not listed here: they expire by themselves (x-expires).
	queues := []string{"workflow.execution", "workflow.node.status", "workflow.completion", "workflow.completion.receipts", "workflow.timeout.process", "workflow.dlq",
		"workflow.execution.retry.200", "workflow.execution.retry.400"}
	for _, q := range queues {
		if ch, err := conn.Channel(); err == nil {
			_, _ = ch.QueueDelete(p+q, false, false, false)
			_ = ch.Close()
		}
	}
	for _, x := range []string{"workflow.execution.x", "workflow.events", "workflow.timeout.x", "workflow.execution.dlx"} {
		if ch, err := conn.Channel(); err == nil {
			_ = ch.ExchangeDelete(p+x, false, false)
			_ = ch.Close()
		}
	}
}

// compile compiles a definition with the cluster's engine.
func (c *cluster) compile(raw []byte) *engine.Workflow {
	c.t.Helper()
	wf, err := c.engine.Compile(raw)
	if err != nil {
		c.t.Fatalf("compile: %v", err)
	}
	return wf
}

// startAll starts the executions ids[i] of wf with inputs[i] from a few
// goroutines and waits until every first message is confirmed.
func (c *cluster) startAll(wf *engine.Workflow, ids []string, input func(i int) any) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.t.Context(), 60*time.Second)
	defer cancel()
	const starters = 16
	errs := make(chan error, starters)
	var wg sync.WaitGroup
	for s := range starters {
		wg.Go(func() {
			for i := s; i < len(ids); i += starters {
				if err := client.Start(ctx, c.master, c.engine, wf, ids[i], input(i)); err != nil {
					errs <- fmt.Errorf("start %s: %w", ids[i], err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		c.t.Fatal(err)
	}
}

// strictCompletionTimes makes duplicate completions that differ only in
// completed_at or total_duration_ms a failure: the engine takes them from
// the completer's stored record, so a redelivery reports the very same
// completion.
const strictCompletionTimes = true

// completions collects the completion messages of a cluster (its
// workflow.completion queue), counting duplicates.
type completions struct {
	t        *testing.T
	cancel   context.CancelFunc
	stopped  chan struct{}
	sentinel string
	seen     chan struct{} // closed when the sentinel arrives

	mu    sync.Mutex
	first map[string]*message.Completion
	order []string
	// dups counts completion messages for an id already seen, delivered
	// for the first time; redelivered those RabbitMQ delivered again
	// because this consumer's connection was lost before it acked them (a
	// broker restart): the same message again, unless a second copy's
	// first delivery was lost the same way. retimed counts those of either
	// that differ from the first only in completed_at or total_duration_ms;
	// mismatches those that differ in anything else.
	dups        int
	redelivered int
	dupExecs    []string // the executions of dups, once per duplicate
	retimed     int
	mismatches  []string
	consumeErr  error
}

// collect consumes the cluster's completions until t ends.
func (c *cluster) collect() *completions {
	c.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cs := &completions{
		t: c.t, cancel: cancel, stopped: make(chan struct{}),
		sentinel: "sentinel_" + c.prefix, seen: make(chan struct{}),
		first: make(map[string]*message.Completion),
	}
	go func() {
		defer close(cs.stopped)
		// One handler: deliveries are handled in queue order, which the
		// sentinel relies on.
		err := c.master.Consume(ctx, broker.Completion, broker.ConsumeOptions{Concurrency: 1, Prefetch: 500}, cs.handle)
		if err != nil {
			cs.mu.Lock()
			cs.consumeErr = err
			cs.mu.Unlock()
		}
	}()
	c.t.Cleanup(cs.stop)
	return cs
}

func (cs *completions) stop() {
	cs.cancel()
	<-cs.stopped
}

func (cs *completions) handle(_ context.Context, d *broker.Delivery) error {
	comp, ok := d.Body.(*message.Completion)
	if !ok {
		return fmt.Errorf("%w: %T on the completion queue", broker.ErrReject, d.Body)
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if comp.ExecutionID == cs.sentinel {
		close(cs.seen)
		return nil
	}
	prev, dup := cs.first[comp.ExecutionID]
	if !dup {
		cs.first[comp.ExecutionID] = comp
		cs.order = append(cs.order, comp.ExecutionID)
		return nil
	}
	if d.Redelivered {
		cs.redelivered++
	} else {
		cs.dups++
		cs.dupExecs = append(cs.dupExecs, comp.ExecutionID)
	}
	if d.ID != comp.ExecutionID {
		cs.mismatches = append(cs.mismatches, fmt.Sprintf("%s: a duplicate with message id %q, not the execution id", comp.ExecutionID, d.ID))
	}
	if reflect.DeepEqual(prev, comp) {
		return nil
	}
	a, b := *prev, *comp
	a.CompletedAt, a.TotalDurationMS = b.CompletedAt, b.TotalDurationMS
	if reflect.DeepEqual(&a, &b) && !strictCompletionTimes {
		cs.retimed++
		return nil
	}
	pj, _ := json.Marshal(prev)
	cj, _ := json.Marshal(comp)
	cs.mismatches = append(cs.mismatches, fmt.Sprintf("%s:\n  first:     %s\n  duplicate: %s", comp.ExecutionID, pj, cj))
	return nil
}

// distinct is how many executions have completed.
func (cs *completions) distinct() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return len(cs.first)
}

// waitDistinct waits until n executions have completed.
func (cs *completions) waitDistinct(n int, timeout time.Duration) {
	cs.t.Helper()
	waitFor(cs.t, timeout, fmt.Sprintf("%d completions", n), func() bool {
		cs.mu.Lock()
		err := cs.consumeErr
		cs.mu.Unlock()
		if err != nil {
			cs.t.Fatalf("consuming completions: %v", err)
		}
		if d := cs.distinct(); d > n {
			cs.t.Fatalf("%d executions completed, want %d", d, n)
		}
		return cs.distinct() == n
	})
}

// drain makes sure every completion already published has been counted: it
// publishes a sentinel completion (after the workers stopped, so nothing can
// follow it) and waits for it; the queue is FIFO and the consumer has one
// handler, so everything before the sentinel has been handled.
func (cs *completions) drain(c *cluster) {
	cs.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := &message.Completion{WorkflowID: "sentinel", ExecutionID: cs.sentinel, Status: message.CompletionCompleted,
		FinalContext: map[string]any{}, CompletedAt: time.Now().UTC()}
	if err := c.master.Publish(ctx, broker.Message{Topic: broker.Completion, ID: cs.sentinel, Key: cs.sentinel, Body: s}).Wait(ctx); err != nil {
		cs.t.Fatalf("publish the sentinel completion: %v", err)
	}
	select {
	case <-cs.seen:
	case <-ctx.Done():
		cs.t.Fatal("the sentinel completion did not arrive within 30s")
	}
}

// linearIDs are the execution ids of n executions of a test.
func linearIDs(prefix string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("e2e_%s_%04d", prefix, i)
	}
	return ids
}

// duplicateProblem says what is wrong with the duplicate completion
// messages counted ("" when nothing is). README promises one completion per
// execution: a duplicate is a bug unless one of procs (the workers and
// schedulers of a run that injects a fault) published it again in the one
// window left, between RabbitMQ accepting the completion and its record,
// and logged engine.RepublishLog. With no procs (no fault injected) none is
// allowed. The procs must have exited; cs.mu must be held.
func (cs *completions) duplicateProblem(procs []*proc) string {
	window := 0
	for _, p := range procs {
		window += strings.Count(p.stderr.String(), engine.RepublishLog)
	}
	if cs.dups > window {
		return fmt.Sprintf("%d duplicate completion message(s), %d of them from the window between publish and record (executions: %v)",
			cs.dups, window, cs.dupExecs[:min(len(cs.dupExecs), 20)])
	}
	if cs.dups > 0 {
		cs.t.Logf("%d duplicate completion(s), identical, each published again in the window between RabbitMQ accepting it and its record", cs.dups)
	}
	return ""
}

// checkLinear checks that every execution of ids completed once, as
// completed, with $step_<nodes>.value = seed + nodes - 1 (seed = index),
// and no duplicate completion beyond what procs' logs account for (see
// duplicateProblem; nil procs: none at all).
func (cs *completions) checkLinear(ids []string, nodes int, procs []*proc) {
	cs.t.Helper()
	cs.mu.Lock()
	defer cs.mu.Unlock()
	var problems []string
	want := make(map[string]int, len(ids))
	for i, id := range ids {
		want[id] = i
	}
	for _, id := range cs.order {
		if _, ok := want[id]; !ok {
			problems = append(problems, fmt.Sprintf("completion of unknown execution %q", id))
		}
	}
	key := fmt.Sprintf("$step_%d", nodes)
	for i, id := range ids {
		comp := cs.first[id]
		if comp == nil {
			problems = append(problems, fmt.Sprintf("%s: no completion", id))
			continue
		}
		if comp.Status != message.CompletionCompleted {
			problems = append(problems, fmt.Sprintf("%s: status %q (failure %+v)", id, comp.Status, comp.FailureReason))
			continue
		}
		out, _ := comp.FinalContext[key].(map[string]any)
		if v, ok := out["value"].(float64); !ok || v != float64(i+nodes-1) {
			problems = append(problems, fmt.Sprintf("%s: %s = %v, want value %d", id, key, comp.FinalContext[key], i+nodes-1))
		}
	}
	for _, m := range cs.mismatches {
		problems = append(problems, "duplicate completion differs: "+m)
	}
	if p := cs.duplicateProblem(procs); p != "" {
		problems = append(problems, p)
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		cs.t.Errorf("%d problem(s) among %d executions (%d distinct completions):\n%s",
			len(problems), len(ids), len(cs.first), strings.Join(problems[:min(len(problems), 20)], "\n"))
	}
	cs.t.Logf("%d executions completed once each; %d duplicate completion message(s) and %d delivered again to the test's consumer, %d of them with other completed_at/total_duration_ms",
		len(cs.first), cs.dups, cs.redelivered, cs.retimed)
}

// runCLI runs the rune binary to completion and returns its stdout, stderr
// and exit status.
func runCLI(t *testing.T, timeout time.Duration, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runCLIEnv(t, timeout, nil, args...)
}

// runCLIEnv is runCLI with env ("K=V") added to the environment.
func runCLIEnv(t *testing.T, timeout time.Duration, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), args...)
	cmd.Env = append(cleanEnv(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ctx.Err() == nil:
		code = ee.ExitCode()
	default:
		t.Fatalf("rune %s: %v\nstderr:\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), errb.String(), code
}

// queueLength is the number of ready messages in queue.
func queueLength(t *testing.T, c *cluster, queue string) int {
	t.Helper()
	return inspectQueue(t, c, queue).Messages
}

// inspectQueue returns queue's ready messages and consumers.
func inspectQueue(t *testing.T, c *cluster, queue string) amqp091.Queue {
	t.Helper()
	q, err := declarePassive(t, c, queue)
	if err != nil {
		t.Fatalf("inspect queue %s: %v", queue, err)
	}
	return q
}

// queueExists reports whether queue exists.
func queueExists(t *testing.T, c *cluster, queue string) bool {
	t.Helper()
	_, err := declarePassive(t, c, queue)
	var ae *amqp091.Error
	if errors.As(err, &ae) && ae.Code == amqp091.NotFound {
		return false
	}
	if err != nil {
		t.Fatalf("inspect queue %s: %v", queue, err)
	}
	return true
}

// declarePassive asks RabbitMQ about queue on a connection of its own (a
// refusal closes the channel).
func declarePassive(t *testing.T, c *cluster, queue string) (amqp091.Queue, error) {
	t.Helper()
	conn, err := dialAny(c.amqpURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	return ch.QueueDeclarePassive(queue, true, false, false, false, nil)
}

// dialAny connects to the first node of list (AMQP URIs separated by
// commas, as --amqp takes them) that answers.
func dialAny(list string) (*amqp091.Connection, error) {
	var errs []error
	for _, u := range strings.Split(list, ",") {
		conn, err := amqp091.Dial(u)
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}
