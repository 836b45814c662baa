package scheduler_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/broker/amqp"
	"github.com/rune-org/rune/broker/memory"
	"github.com/rune-org/rune/client"
	"github.com/rune-org/rune/coord"
	coordmem "github.com/rune-org/rune/coord/memory"
	coordredis "github.com/rune-org/rune/coord/redis"
	"github.com/rune-org/rune/distributed"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/internal/testinfra"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/nodes"
	"github.com/rune-org/rune/scheduler"
	"github.com/rune-org/rune/worker"
)

// waitThenSet is trigger → wait (amount seconds) → set.
func waitThenSet(amount float64) []byte {
	return fmt.Appendf(nil, `{"id":"wait_then_set","nodes":[
	{"id":"start","type":"trigger","trigger":true},
	{"id":"pause","type":"wait","parameters":{"amount":%v,"unit":"seconds"}},
	{"id":"after","type":"set","parameters":{"values":{"done":true}}}],
	"edges":[{"id":"e1","src":"start","dst":"pause"},{"id":"e2","src":"pause","dst":"after"}]}`, amount)
}

var quiet = slog.New(slog.DiscardHandler)

// connect returns a distributed runtime on queues and keys named prefix,
// which several runtimes of one test share.
func connect(t *testing.T, prefix string) *distributed.Runtime {
	t.Helper()
	return connectRedis(t, prefix, testinfra.RedisURL(t))
}

// connectRedis is connect on the Redis (or Redis Cluster) of redisURL.
func connectRedis(t *testing.T, prefix, redisURL string) *distributed.Runtime {
	t.Helper()
	rt, err := distributed.Connect(context.Background(), distributed.Config{
		AMQPURL: testinfra.AMQPURL(t), RedisURL: redisURL, Prefix: prefix, Role: amqp.RoleAdmin, Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Several runtimes share prefix; deleting twice is harmless.
		_ = rt.DeleteTopology(context.Background(), prefix)
		rt.Close()
	})
	return rt
}

// dropKeys removes the Redis keys of prefix when t ends.
func dropKeys(t *testing.T, rc goredis.UniversalClient, prefix string) {
	t.Cleanup(func() {
		if err := coordredis.DeleteKeys(context.Background(), rc, prefix+":*"); err != nil {
			t.Errorf("delete keys %s:*: %v", prefix, err)
		}
	})
}

// background runs f until the test ends, then waits for it.
func background(t *testing.T, f func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { f(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// ledger counts, per execution, what the statuses and completions published
// on the runtime's master queues say.
type ledger struct {
	mu          sync.Mutex
	waiting     map[string]int // waiting statuses of pause
	fired       map[string]int // success statuses of pause
	ran         map[string]int // running statuses of after
	completions map[string]int
	failed      []string
	lastDue     time.Time // latest resume_at of the waiting statuses
}

// follow consumes the Status and Completion topics of b until the test ends.
func follow(t *testing.T, b broker.Broker) *ledger {
	l := &ledger{waiting: map[string]int{}, fired: map[string]int{}, ran: map[string]int{}, completions: map[string]int{}}
	background(t, func(ctx context.Context) {
		var wg sync.WaitGroup
		wg.Go(func() {
			_ = b.Consume(ctx, broker.Status, broker.ConsumeOptions{Concurrency: 4, Prefetch: 500}, func(_ context.Context, d *broker.Delivery) error {
				l.mu.Lock()
				defer l.mu.Unlock()
				for _, s := range message.StatusesOf(d.Body) {
					switch {
					case s.NodeID == "pause" && s.Status == message.StatusWaiting:
						l.waiting[s.ExecutionID]++
						if s.ResumeAt != nil && s.ResumeAt.After(l.lastDue) {
							l.lastDue = *s.ResumeAt
						}
					case s.NodeID == "pause" && s.Status == message.StatusSuccess:
						l.fired[s.ExecutionID]++
					case s.NodeID == "after" && s.Status == message.StatusRunning:
						l.ran[s.ExecutionID]++
					}
				}
				return nil
			})
		})
		_ = b.Consume(ctx, broker.Completion, broker.ConsumeOptions{Concurrency: 2, Prefetch: 500}, func(_ context.Context, d *broker.Delivery) error {
			c, ok := d.Body.(*message.Completion)
			if !ok {
				return nil
			}
			l.mu.Lock()
			defer l.mu.Unlock()
			l.completions[c.ExecutionID]++
			if c.Status != message.CompletionCompleted {
				l.failed = append(l.failed, c.ExecutionID+": "+c.Status)
			}
			return nil
		})
		wg.Wait()
	})
	return l
}

// counts returns how many executions have a completion, a pause success and
// an after run.
func (l *ledger) counts() (completed, fired, ran int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.completions), len(l.fired), len(l.ran)
}

// waitAll waits until every execution of ids has completed, fired its pause
// and run after, or fails t at the deadline.
func (l *ledger) waitAll(t *testing.T, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		c, f, r := l.counts()
		if c >= n && f >= n && r >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %d of %d executions completed, %d fired their wait, %d ran the node after it", within, c, n, f, r)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkOnce fails t unless every execution of ids completed once, with
// status completed, its wait fired once and the node after it ran once, and
// nothing else was counted.
func (l *ledger) checkOnce(t *testing.T, ids map[string]bool) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.failed) > 0 {
		t.Errorf("%d executions did not complete: %v", len(l.failed), l.failed[:min(5, len(l.failed))])
	}
	bad := 0
	for name, m := range map[string]map[string]int{"completion": l.completions, "pause waiting": l.waiting, "pause success": l.fired, "after running": l.ran} {
		if len(m) != len(ids) {
			t.Errorf("%d executions have a %s status, want %d", len(m), name, len(ids))
		}
		for id, n := range m {
			if !ids[id] {
				t.Errorf("%s of an execution this test did not start: %s", name, id)
			}
			if n != 1 && bad < 10 {
				bad++
				t.Errorf("execution %s: %d × %s, want exactly 1", id, n, name)
			}
		}
	}
}

// startAll starts n executions of def on rt, several at once, and returns their ids.
func startAll(t *testing.T, rt *distributed.Runtime, def []byte, n int) map[string]bool {
	t.Helper()
	wf, err := rt.Engine.Compile(def)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("exec_%s_%05d", t.Name(), i)
	}
	// Generous: on a loaded CI machine 10,000 starts took 43 s.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		errMu sync.Mutex
		first error
	)
	for range 32 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				if err := client.Start(ctx, rt.Broker, rt.Engine, wf, ids[i], map[string]any{"i": i}); err != nil {
					errMu.Lock()
					first = cmpOr(first, err)
					errMu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		t.Fatalf("start executions: %v", first)
	}
	set := make(map[string]bool, n)
	for _, id := range ids {
		set[id] = true
	}
	return set
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func runWorker(t *testing.T, rt *distributed.Runtime) {
	background(t, func(ctx context.Context) {
		_ = worker.Run(ctx, worker.Config{Broker: rt.Broker, Engine: rt.Engine, Concurrency: 64, Logger: quiet})
	})
}

// TestTwoSchedulersFireEachTimerOnce runs 2,000 executions that each wait
// one second under two schedulers, each with its own connections: every
// timer is claimed once in all, each wait fires once, each node after a
// wait runs once, each execution completes once.
func TestTwoSchedulersFireEachTimerOnce(t *testing.T) {
	// Enough for both schedulers to claim many batches of 100 at once; 10,000
	// took two minutes of CI on a busy machine and showed nothing more.
	twoSchedulers(t, testinfra.RedisURL(t), 2000)
}

// TestTwoSchedulersOnRedisCluster is the same with 500 executions on a
// three-master Redis Cluster, the timers in 16 shards. (Not a subtest:
// startAll puts the test's name, which would then hold a '/', in the
// execution ids.)
func TestTwoSchedulersOnRedisCluster(t *testing.T) {
	twoSchedulers(t, testinfra.RedisClusterURL(t), 500)
}

func twoSchedulers(t *testing.T, redisURL string, n int) {
	prefix := testinfra.Name(t)
	rt1, rt2 := connectRedis(t, prefix, redisURL), connectRedis(t, prefix, redisURL)
	dropKeys(t, rt1.Redis, prefix)
	l := follow(t, rt1.Broker)
	runWorker(t, rt1)
	var claimed [2]atomic.Int64
	for i, rt := range []*distributed.Runtime{rt1, rt2} {
		background(t, func(ctx context.Context) {
			_ = scheduler.Run(ctx, scheduler.Config{
				Timers: rt.Timers, Broker: rt.Broker, Engine: rt.Engine, Poll: 20 * time.Millisecond, Batch: 100, Logger: quiet,
				AfterClaim: func(ts []coord.Timer) { claimed[i].Add(int64(len(ts))) },
			})
		})
	}
	start := time.Now()
	ids := startAll(t, rt1, waitThenSet(1), n)
	t.Logf("started %d executions in %s", n, time.Since(start).Round(time.Millisecond))
	l.waitAll(t, n, 3*time.Minute)
	t.Logf("all completed %s after the first start; scheduler claims: %d and %d", time.Since(start).Round(time.Millisecond), claimed[0].Load(), claimed[1].Load())
	// Any duplicate would have been published by now, with the original;
	// give the consumers a moment to deliver what is still in flight.
	time.Sleep(500 * time.Millisecond)
	l.checkOnce(t, ids)
	if c0, c1 := claimed[0].Load(), claimed[1].Load(); c0+c1 != int64(n) || c0 == 0 || c1 == 0 {
		t.Errorf("schedulers claimed %d and %d timers, want %d in all, and both some", c0, c1, n)
	}
	st, err := rt1.Timers.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Scheduled != 0 || st.Claimed != 0 {
		t.Errorf("timers left behind: %+v", st)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	testinfra.StopRedisCluster()
	os.Exit(code)
}

// buildRune builds the rune command into a temporary directory, with the
// build tag fault: RUNE_FAULT works only there (internal/fault).
func buildRune(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "rune")
	out, err := exec.Command("go", "build", "-tags", "fault", "-o", bin, "github.com/rune-org/rune/cmd/rune").CombinedOutput()
	if err != nil {
		t.Fatalf("go build rune: %v\n%s", err, out)
	}
	return bin
}

// TestSchedulerKilledBetweenClaimAndPublish runs `rune scheduler` with a
// fault that kills it (exit 137) right after its first claim, before it
// publishes anything. The timers it claimed stay claimed; once their lease
// passes, another scheduler's recovery sweep fires them, and every
// execution completes exactly once with the node after its wait run once.
func TestSchedulerKilledBetweenClaimAndPublish(t *testing.T) {
	const n = 200
	bin := buildRune(t)
	prefix := testinfra.Name(t)
	rt := connect(t, prefix)
	dropKeys(t, rt.Redis, prefix)
	l := follow(t, rt.Broker)
	runWorker(t, rt)
	ctx := context.Background()

	// Long enough that no wait resumes at once: a wait whose time has
	// passed by the time its worker checks (a loaded machine) never
	// suspends, and this test needs every timer in the store.
	ids := startAll(t, rt, waitThenSet(3), n)
	// Let every timer be scheduled and come due, so that the faulty
	// scheduler's first claim takes them all.
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := rt.Timers.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		l.mu.Lock()
		waiting, lastDue := len(l.waiting), l.lastDue
		l.mu.Unlock()
		if st.Scheduled == n && waiting == n && time.Now().After(lastDue) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s: %d of %d timers scheduled, %d waiting statuses, the last due at %s", st.Scheduled, n, waiting, lastDue)
		}
		time.Sleep(20 * time.Millisecond)
	}

	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(pctx, bin, "scheduler", "--amqp", testinfra.AMQPURL(t), "--redis", testinfra.RedisURL(t),
		"--prefix", prefix, "--lease", "2s")
	cmd.Env = append(os.Environ(), "RUNE_FAULT=exit-after-claim")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 137 {
		t.Fatalf("rune scheduler with RUNE_FAULT=exit-after-claim: %v, want exit status 137\n%s", err, stderr.String())
	}
	crashed := time.Now()
	st, err := rt.Timers.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Claimed != n || st.Scheduled != 0 {
		t.Fatalf("after the crash: %+v, want all %d timers claimed (the batch is 500)", st, n)
	}
	if c, f, r := l.counts(); c+f+r != 0 {
		t.Fatalf("the killed scheduler published: %d completions, %d wait successes, %d runs after the wait", c, f, r)
	}

	var reclaimed atomic.Int64
	var earliest atomic.Int64 // Unix ns of the first re-claim
	background(t, func(ctx context.Context) {
		_ = scheduler.Run(ctx, scheduler.Config{
			Timers: rt.Timers, Broker: rt.Broker, Engine: rt.Engine, Poll: 20 * time.Millisecond, Lease: 2 * time.Second, Logger: quiet,
			AfterClaim: func(ts []coord.Timer) {
				for _, tm := range ts {
					if tm.Claims > 1 {
						reclaimed.Add(1)
						earliest.CompareAndSwap(0, time.Now().UnixNano())
					}
				}
			},
		})
	})
	l.waitAll(t, n, 30*time.Second)
	time.Sleep(500 * time.Millisecond) // let duplicates, if any, arrive
	l.checkOnce(t, ids)
	if got := reclaimed.Load(); got != st.Claimed {
		t.Errorf("%d timers were claimed again, want the %d the killed scheduler held", got, st.Claimed)
	}
	// The claim happened before the crash; its lease (2s) ends at least
	// 2s after that, minus the time between the claim and exiting.
	if e := time.Unix(0, earliest.Load()); e.Before(crashed.Add(1500 * time.Millisecond)) {
		t.Errorf("a claimed timer was claimed again %s after the crash, before its 2s lease ran out", e.Sub(crashed))
	}
	end, err := rt.Timers.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if end.Scheduled != 0 || end.Claimed != 0 {
		t.Errorf("timers left behind: %+v", end)
	}
}

// flakyCoord is a coordinator whose Begin and Finish (a resume makes one
// of them, or both) fail while down is set: the coordination store is
// unreachable.
type flakyCoord struct {
	coord.Coordinator
	down atomic.Bool
	// slow, in nanoseconds, delays every Begin and Finish: a resume that
	// takes long.
	slow atomic.Int64
	// hold, when set (before the engine is used concurrently), makes every
	// Begin and Finish wait until it is closed: a resume that ends when the
	// test says.
	hold chan struct{}
}

var errDown = errors.New("coordination store unreachable")

func (f *flakyCoord) fault(ctx context.Context) error {
	if f.down.Load() {
		return errDown
	}
	time.Sleep(time.Duration(f.slow.Load()))
	if f.hold != nil {
		select {
		case <-f.hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (f *flakyCoord) Begin(ctx context.Context, exec, id string) (coord.Begin, error) {
	if err := f.fault(ctx); err != nil {
		return coord.Begin{}, err
	}
	return f.Coordinator.Begin(ctx, exec, id)
}

func (f *flakyCoord) Finish(ctx context.Context, exec, id string, fin coord.Finish) (coord.Outcome, error) {
	if err := f.fault(ctx); err != nil {
		return coord.Outcome{}, err
	}
	return f.Coordinator.Finish(ctx, exec, id, fin)
}

// embeddedPieces is an engine on in-process stores, with no worker running:
// tests drive it by hand.
type embeddedPieces struct {
	broker *memory.Broker
	coord  *flakyCoord
	timers *coordmem.Timers
	engine *engine.Engine
	wf     *engine.Workflow
}

func newPieces(t *testing.T) *embeddedPieces {
	t.Helper()
	cm := coordmem.New(coordmem.Options{})
	t.Cleanup(func() { _ = cm.Close() })
	p := &embeddedPieces{broker: memory.New(memory.Options{Logger: quiet}), coord: &flakyCoord{Coordinator: cm}, timers: coordmem.NewTimers()}
	t.Cleanup(func() { _ = p.broker.Close() })
	var err error
	p.engine, err = engine.New(engine.Config{Registry: nodes.NewRegistry(nodes.Options{Logger: quiet}), Coord: p.coord,
		Timers: p.timers, Barriers: coordmem.NewBarriers(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if p.wf, err = p.engine.Compile(waitThenSet(1)); err != nil {
		t.Fatal(err)
	}
	return p
}

// suspend starts execution id and handles its first message, which
// suspends it at the wait node: it schedules one timer.
func (p *embeddedPieces) suspend(t *testing.T, id string) {
	t.Helper()
	ctx := context.Background()
	var started engine.Effects
	if err := p.engine.Start(ctx, p.wf, id, nil, &started); err != nil {
		t.Fatal(err)
	}
	if len(started.Next) != 1 {
		t.Fatalf("start: %d messages, want 1", len(started.Next))
	}
	var waited engine.Effects
	if err := p.engine.Handle(ctx, engine.Delivery{}, started.Next[0].Msg, &waited); err != nil {
		t.Fatal(err)
	}
	if last := waited.Statuses[len(waited.Statuses)-1]; last.Status != message.StatusWaiting {
		t.Fatalf("wait node reported %s, want waiting", last.Status)
	}
}

// resumed collects the execution messages the scheduler publishes.
func (p *embeddedPieces) resumed(t *testing.T) <-chan *message.NodeExecution {
	out := make(chan *message.NodeExecution, 16)
	background(t, func(ctx context.Context) {
		_ = p.broker.Consume(ctx, broker.Execution, broker.ConsumeOptions{}, func(_ context.Context, d *broker.Delivery) error {
			out <- d.Body.(*message.NodeExecution)
			return nil
		})
	})
	return out
}

func expectResumed(t *testing.T, ch <-chan *message.NodeExecution, execs ...string) {
	t.Helper()
	want := map[string]bool{}
	for _, e := range execs {
		want[e] = true
	}
	timeout := time.After(5 * time.Second)
	for len(want) > 0 {
		select {
		case m := <-ch:
			if !want[m.ExecutionID] || m.CurrentNode != "after" || m.FromNode != "pause" {
				t.Fatalf("unexpected message: execution %s, node %s from %s", m.ExecutionID, m.CurrentNode, m.FromNode)
			}
			delete(want, m.ExecutionID)
		case <-timeout:
			t.Fatalf("no message resuming %v after 5s", want)
		}
	}
	select {
	case m := <-ch:
		t.Fatalf("extra message: execution %s, node %s", m.ExecutionID, m.CurrentNode)
	case <-time.After(50 * time.Millisecond):
	}
}

func stats(t *testing.T, ts coord.Timers) coord.TimerStats {
	t.Helper()
	st, err := ts.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestTickDropsUndecodableTimers: timers whose payload is not a message
// are removed, and the good timers of the same batch fire.
func TestTickDropsUndecodableTimers(t *testing.T) {
	p := newPieces(t)
	ctx := context.Background()
	p.suspend(t, "exec_a")
	p.suspend(t, "exec_b")
	past := time.Now().Add(-time.Minute) // due first: claimed first
	for id, payload := range map[string]string{"garbage": "{not json", "empty": "{}", "wrong": `{"message_id":"m","current_node":42}`} {
		if err := p.timers.Schedule(ctx, id, past, []byte(payload)); err != nil {
			t.Fatal(err)
		}
	}
	out := p.resumed(t)
	now := time.Now().Add(2 * time.Second) // the waits' timers are due too
	// Tick wants every setting given (Run applies the defaults).
	cfg := scheduler.Config{Timers: p.timers, Broker: p.broker, Engine: p.engine, Batch: 10, Lease: time.Minute, Concurrency: 4, Logger: quiet,
		Now: func() time.Time { return now }}
	n, err := scheduler.Tick(ctx, cfg)
	if err != nil || n != 5 {
		t.Fatalf("Tick = %d, %v; want 5 timers claimed", n, err)
	}
	if st := stats(t, p.timers); st.Scheduled != 0 || st.Claimed != 0 {
		t.Fatalf("after Tick: %+v, want every timer removed", st)
	}
	expectResumed(t, out, "exec_a", "exec_b")
}

// TestTickLeavesTimerClaimedOnTransientFailure: when the engine cannot
// resume (its coordination store is down), the timer stays claimed, is not
// claimed again during its lease, and fires once the lease has passed.
func TestTickLeavesTimerClaimedOnTransientFailure(t *testing.T) {
	p := newPieces(t)
	ctx := context.Background()
	p.suspend(t, "exec_c")
	out := p.resumed(t)
	now := time.Now().Add(2 * time.Second)
	var claims []int
	cfg := scheduler.Config{Timers: p.timers, Broker: p.broker, Engine: p.engine, Batch: 10, Lease: time.Minute, Concurrency: 4, Logger: quiet,
		Now: func() time.Time { return now },
		AfterClaim: func(ts []coord.Timer) {
			for _, tm := range ts {
				claims = append(claims, tm.Claims)
			}
		}}

	p.coord.down.Store(true)
	if n, err := scheduler.Tick(ctx, cfg); err != nil || n != 1 {
		t.Fatalf("Tick = %d, %v; want 1 timer claimed", n, err)
	}
	if st := stats(t, p.timers); st.Claimed != 1 || st.Scheduled != 0 {
		t.Fatalf("after a failed resume: %+v, want the timer still claimed", st)
	}
	now = now.Add(59 * time.Second)
	if n, err := scheduler.Tick(ctx, cfg); err != nil || n != 0 {
		t.Fatalf("Tick within the lease = %d, %v; want nothing claimed", n, err)
	}
	select {
	case m := <-out:
		t.Fatalf("a failed resume published %s", m.CurrentNode)
	case <-time.After(50 * time.Millisecond):
	}

	p.coord.down.Store(false)
	now = now.Add(time.Second + time.Millisecond)
	if n, err := scheduler.Tick(ctx, cfg); err != nil || n != 1 {
		t.Fatalf("Tick after the lease = %d, %v; want the timer claimed again", n, err)
	}
	if len(claims) != 2 || claims[0] != 1 || claims[1] != 2 {
		t.Fatalf("claim counts %v, want [1 2]", claims)
	}
	if st := stats(t, p.timers); st.Claimed != 0 || st.Scheduled != 0 {
		t.Fatalf("after the resume: %+v, want the timer removed", st)
	}
	expectResumed(t, out, "exec_c")
}

// TestFrozenSchedulerPublishesNothingAfterTakeover: a scheduler stalls
// right after its claim (a SIGSTOP, a VM pause) past its lease; another
// claims the timer and fires it. When the first wakes it finds the timer
// claimed again and publishes nothing: the branch resumes once.
func TestFrozenSchedulerPublishesNothingAfterTakeover(t *testing.T) {
	p := newPieces(t)
	ctx := context.Background()
	p.suspend(t, "exec_f")
	out := p.resumed(t)
	now := time.Now().Add(2 * time.Second)
	frozen, thawed := make(chan struct{}), make(chan struct{})
	first := scheduler.Config{Timers: p.timers, Broker: p.broker, Engine: p.engine, Batch: 10, Lease: time.Minute, Concurrency: 4, Logger: quiet,
		Now: func() time.Time { return now },
		AfterClaim: func([]coord.Timer) {
			close(frozen)
			<-thawed
		}}
	tick := make(chan error, 1)
	go func() {
		_, err := scheduler.Tick(ctx, first)
		tick <- err
	}()
	<-frozen
	later := now.Add(time.Minute)
	var claims []int
	second := scheduler.Config{Timers: p.timers, Broker: p.broker, Engine: p.engine, Batch: 10, Lease: time.Minute, Concurrency: 4, Logger: quiet,
		Now: func() time.Time { return later },
		AfterClaim: func(ts []coord.Timer) {
			for _, tm := range ts {
				claims = append(claims, tm.Claims)
			}
		}}
	if n, err := scheduler.Tick(ctx, second); err != nil || n != 1 || len(claims) != 1 || claims[0] != 2 {
		t.Fatalf("second scheduler's Tick = %d, %v, claims %v; want the timer claimed again (Claims 2)", n, err, claims)
	}
	expectResumed(t, out, "exec_f")
	close(thawed)
	if err := <-tick; err != nil {
		t.Fatalf("the frozen scheduler's Tick: %v", err)
	}
	select {
	case m := <-out:
		t.Fatalf("the scheduler that woke after the takeover published %s of %s", m.CurrentNode, m.ExecutionID)
	case <-time.After(200 * time.Millisecond):
	}
	if st := stats(t, p.timers); st.Claimed != 0 || st.Scheduled != 0 {
		t.Fatalf("after both: %+v, want the timer removed", st)
	}
}

// TestLeaseRenewedWhileResuming: a resume that takes several leases (a slow
// coordination store) keeps its timer: a second scheduler polling all along
// never claims it, and the branch resumes once. The schedulers' clock is
// the test's: it moves a third of a lease only after the holder renewed,
// and the resume ends when the test says, so no timing is assumed (a 300 ms
// lease renewed every 100 ms of real time once failed under -race on two
// loaded cores).
func TestLeaseRenewedWhileResuming(t *testing.T) {
	p := newPieces(t)
	p.suspend(t, "exec_r")
	out := p.resumed(t)
	const lease = 300 * time.Millisecond
	release := make(chan struct{})
	p.coord.hold = release // set before any scheduler runs
	var now atomic.Int64
	now.Store(time.Now().Add(2 * time.Second).UnixNano()) // the 1 s wait is due
	ts := &countingTimers{Timers: p.timers}
	var claims atomic.Int64
	cfg := scheduler.Config{Timers: ts, Broker: p.broker, Engine: p.engine, Poll: 10 * time.Millisecond, Lease: lease, Logger: quiet,
		Now:        func() time.Time { return time.Unix(0, now.Load()) },
		AfterClaim: func(ts []coord.Timer) { claims.Add(int64(len(ts))) }}
	for range 2 {
		background(t, func(ctx context.Context) { _ = scheduler.Run(ctx, cfg) })
	}
	// On failure the held resume is let go before the schedulers are
	// stopped (cleanups run last first), or stopping them would wait on it.
	var releaseOnce sync.Once
	let := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(let)
	waitUntil(t, 30*time.Second, "the timer claimed", func() bool { return claims.Load() > 0 })
	// Four leases pass, a third at a time, each after a renewal.
	for i := range 12 {
		renewed := ts.extends.Load()
		waitUntil(t, 30*time.Second, fmt.Sprintf("renewal %d", i+1), func() bool {
			if n := claims.Load(); n > 1 {
				t.Fatalf("after %d thirds of a lease, the timer was claimed %d times: its lease was not kept while it resumed", i, n)
			}
			return ts.extends.Load() > renewed
		})
		now.Add(int64(lease / 3))
	}
	let()
	expectResumedWithin(t, out, 30*time.Second, "exec_r")
	if n := claims.Load(); n != 1 {
		t.Fatalf("the timer was claimed %d times, want once: its lease was not kept while it resumed", n)
	}
}

// countingTimers counts Extend calls: lease renewals.
type countingTimers struct {
	coord.Timers
	extends atomic.Int64
}

func (c *countingTimers) Extend(ctx context.Context, now time.Time, lease time.Duration, held ...coord.Timer) ([]string, error) {
	lost, err := c.Timers.Extend(ctx, now, lease, held...)
	c.extends.Add(1)
	return lost, err
}

// waitUntil polls cond until it holds, or fails t after within.
func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// expectResumedWithin waits up to within for the first resumed message of
// each execution, then for none more (a loaded machine may be slow to
// resume, never to repeat).
func expectResumedWithin(t *testing.T, ch <-chan *message.NodeExecution, within time.Duration, execs ...string) {
	t.Helper()
	want := map[string]bool{}
	for _, e := range execs {
		want[e] = true
	}
	timeout := time.After(within)
	for len(want) > 0 {
		select {
		case m := <-ch:
			if !want[m.ExecutionID] {
				t.Fatalf("unexpected message: execution %s, node %s", m.ExecutionID, m.CurrentNode)
			}
			delete(want, m.ExecutionID)
		case <-timeout:
			t.Fatalf("no message resuming %v after %s", want, within)
		}
	}
	select {
	case m := <-ch:
		t.Fatalf("extra message: execution %s, node %s", m.ExecutionID, m.CurrentNode)
	case <-time.After(500 * time.Millisecond):
	}
}
