package e2e

// Flow control by key (issues 35, 36) on real processes: two `rune worker`
// and a `rune scheduler` hold a node's rate limit of 10 per second between
// them, and a worker's kill -9 loses no deferred run and takes no extra
// slot.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rune-org/rune/internal/catcher"
)

// rateSeconds is how long TestRateLimitTwoWorkers keeps the limit busy:
// RUNE_TEST_RATE_SECONDS, default 6 (the figure, 30, is recorded in
// docs/benchmarks.md).
func rateSeconds(t *testing.T) int {
	s := os.Getenv("RUNE_TEST_RATE_SECONDS")
	if s == "" {
		return 6
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 2 {
		t.Fatalf("RUNE_TEST_RATE_SECONDS=%q: want a whole number of seconds, at least 2", s)
	}
	return n
}

// arrivals is an HTTP server that records when each execution's call came.
type arrivals struct {
	mu  sync.Mutex
	at  map[string]time.Time // first call per execution
	all []time.Time
	srv *httptest.Server
}

func newArrivals(t *testing.T) *arrivals {
	a := &arrivals{at: map[string]time.Time{}}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		var body struct {
			Exec string `json:"exec"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		a.mu.Lock()
		if _, ok := a.at[body.Exec]; !ok {
			a.at[body.Exec] = now
			a.all = append(a.all, now)
		}
		a.mu.Unlock()
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *arrivals) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.at)
}

func (a *arrivals) times() []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	ts := slices.Clone(a.all)
	slices.SortFunc(ts, func(x, y time.Time) int { return x.Compare(y) })
	return ts
}

// maxInWindow is the most calls in any span of w.
func maxInWindow(ts []time.Time, w time.Duration) int {
	best, j := 0, 0
	for i := range ts {
		for ts[i].Sub(ts[j]) >= w {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}

func rateLimitedWorkflow(url string) []byte {
	return fmt.Appendf(nil, `{"id":"rate_e2e","nodes":[
		{"id":"start","type":"trigger","trigger":true},
		{"id":"send","type":"http","parameters":{"method":"POST","url":%q,"body":{"exec":"{{ $execution.id }}"}},
		 "rate_limit":{"key":"sms-provider","limit":10,"per":"1s"}}],
		"edges":[{"id":"e1","src":"start","dst":"send"}]}`, url)
}

// rateRun starts two workers and a scheduler and n executions of the
// rate-limited workflow; kill, when set, runs once a tenth of the calls
// came, with the workers.
func rateRun(t *testing.T, n int, kill func(c *cluster, workers []*proc) []*proc) (*arrivals, time.Duration) {
	c := newCluster(t, "")
	a := newArrivals(t)
	workers := []*proc{c.startWorker(allowLoopback...), c.startWorker(allowLoopback...)}
	sched := startProc(t, "scheduler", append([]string{"scheduler"}, c.serverArgs()...)...)
	sched.waitLog(t, "scheduler started", 30*time.Second)
	waitFor(t, 30*time.Second, "both workers consuming", func() bool {
		return inspectQueue(t, c, c.prefix+".workflow.execution").Consumers == 2
	})
	cs := c.collect()
	wf := c.compile(rateLimitedWorkflow(a.srv.URL))
	ids := linearIDs(c.prefix, n)
	began := time.Now()
	c.startAll(wf, ids, func(int) any { return map[string]any{} })
	if kill != nil {
		waitFor(t, 60*time.Second, "a tenth of the calls", func() bool { return a.count() >= n/10 })
		workers = kill(c, workers)
	}
	cs.waitDistinct(n, time.Duration(n)*100*time.Millisecond+2*time.Minute)
	took := time.Since(began)
	if got := a.count(); got != n {
		t.Fatalf("%d executions called the server, want %d", got, n)
	}
	cs.mu.Lock()
	for id, comp := range cs.first {
		if comp.Status != "completed" {
			t.Errorf("execution %s ended %s (%v)", id, comp.Status, comp.FailureReason)
		}
	}
	cs.mu.Unlock()
	for _, w := range workers {
		w.terminate(t, 30*time.Second)
	}
	sched.terminate(t, 30*time.Second)
	return a, took
}

// checkRate: the calls came at 10 per second within 10 %, overall and in
// every second.
func checkRate(t *testing.T, a *arrivals) {
	ts := a.times()
	span := ts[len(ts)-1].Sub(ts[0])
	rate := float64(len(ts)-1) / span.Seconds()
	worst := maxInWindow(ts, time.Second)
	t.Logf("%d calls in %v: %.2f per second; at most %d in any second", len(ts), span.Round(time.Millisecond), rate, worst)
	if rate < 9 || rate > 11 {
		t.Fatalf("%.2f calls per second over %v, want 10 within 10 %%", rate, span)
	}
	if worst > 11 {
		t.Fatalf("%d calls in one second, want at most 10 (11 within 10 %%)", worst)
	}
}

// TestRateLimitTwoWorkers: 10 per second held across two workers.
func TestRateLimitTwoWorkers(t *testing.T) {
	n := 10 * rateSeconds(t)
	a, _ := rateRun(t, n, nil)
	checkRate(t, a)
}

// TestRateLimitWorkerKilled: a worker's kill -9 while most runs wait for
// their slots loses none (every execution completes, each calls once) and
// breaks no limit: the reservations and the deferred runs' timers are in
// Redis, and the redelivered messages find theirs.
func TestRateLimitWorkerKilled(t *testing.T) {
	a, _ := rateRun(t, 40, func(c *cluster, workers []*proc) []*proc {
		if err := workers[0].cmd.Process.Kill(); err != nil {
			t.Fatalf("kill -9 worker 1: %v", err)
		}
		if code := workers[0].wait(t, 10*time.Second); code != -1 {
			t.Fatalf("worker 1 exited with status %d, want killed (-1)", code)
		}
		return []*proc{workers[1], c.startWorker(allowLoopback...)}
	})
	checkRate(t, a)
}

// The rate-limited SMS example (examples/rate_limited_sms.json) on `rune
// run`, sending to the local SMS provider: twelve recipients get one text
// each, the thirteenth entry (a recipient listed twice) is throttled, and
// twelve texts at 10 per second take more than a second.
func TestRateLimitedSMSExample(t *testing.T) {
	t.Parallel()
	svc := startNotifyServices(t, true, catcher.SMTPConfig{})
	began := time.Now()
	out, errOut, code := runCLI(t, 60*time.Second, "run", "../examples/rate_limited_sms.json",
		"--input", "@../examples/rate_limited_sms.input.json", "--credentials", svc.creds, "--json")
	took := time.Since(began)
	if code != 0 {
		t.Fatalf("rune run: exit status %d\n%s\n%s", code, out, errOut)
	}
	c := decodeCompletion(t, "run", out, errOut)
	summary, _ := c["final_context"].(map[string]any)["$summary"].(map[string]any)
	if c["status"] != "completed" || summary["texts"] != 12.0 || summary["throttled"] != 1.0 {
		t.Fatalf("completion %s, want completed with 12 texts and 1 throttled", jsonOf(c))
	}
	to := map[string]int{}
	for _, m := range svc.texts.Messages() {
		to[m.To]++
	}
	if len(to) != 12 || to["+14155550003"] != 1 {
		t.Fatalf("texts by recipient %v, want one each to 12 recipients", to)
	}
	if took < 1100*time.Millisecond {
		t.Fatalf("12 texts took %v, want over 1.1 s at 10 per second", took)
	}
}
