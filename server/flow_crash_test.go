package server_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rune-org/rune/store"
)

// Flow control by key surviving crashes (issue 35, done-when): with a
// concurrency limit, a worker's kill -9 on the distributed runtime and a
// kill -9 and restart of the durable embedded server. Every execution
// completes once and no slot leaks: after the crash the key's remaining
// queued executions all run, never more than the limit at once.

// execPeer counts, per key, the executions whose call is in flight
// (distinct execution numbers: a call redelivered after a kill may overlap
// the dying one's, which is one execution, one slot).
type execPeer struct {
	mu    sync.Mutex
	now   map[string]map[string]int // key → n → calls in flight
	most  map[string]int
	calls map[string]int // key/n → calls
	delay time.Duration
	srv   *httptest.Server
}

func newExecPeer(t *testing.T, delay time.Duration) *execPeer {
	p := &execPeer{now: map[string]map[string]int{}, most: map[string]int{}, calls: map[string]int{}, delay: delay}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/k/"), "/")
		if len(parts) != 2 {
			http.Error(w, "want /k/<key>/<n>", http.StatusBadRequest)
			return
		}
		key, n := parts[0], parts[1]
		p.mu.Lock()
		if p.now[key] == nil {
			p.now[key] = map[string]int{}
		}
		p.now[key][n]++
		p.most[key] = max(p.most[key], len(p.now[key]))
		p.calls[key+"/"+n]++
		p.mu.Unlock()
		time.Sleep(p.delay)
		p.mu.Lock()
		if p.now[key][n]--; p.now[key][n] == 0 {
			delete(p.now[key], n)
		}
		p.mu.Unlock()
		w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *execPeer) total() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.calls {
		n += c
	}
	return n
}

// flowCrash runs executions of a limit-2 workflow over keys, crashes the
// runtime once a few calls were made (crash returns the API to use from
// then on), and checks that every execution completed and the limit held.
func flowCrash(t *testing.T, a *api, st store.Store, crash func() *api) {
	const keys, per, limit = 3, 12, 2
	t.Cleanup(func() {
		if t.Failed() {
			out := a.tg.output()
			t.Logf("process output (last 20000 bytes):\n%s", out[max(0, len(out)-20000):])
		}
	})
	peer := newExecPeer(t, 300*time.Millisecond)
	id := "crash_" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "_"))
	a.pushWorkflow(fmt.Sprintf(`{"id":%q,"settings":{"concurrency":{"key":"{{ $trigger.tenant }}","limit":%d}},"nodes":[`+
		`{"id":"start","type":"trigger","trigger":true},`+
		`{"id":"call","type":"http","parameters":{"method":"GET","url":"%s/k/{{ $trigger.tenant }}/{{ $trigger.n }}"},"retry":{"max_attempts":1}}],`+
		`"edges":[{"id":"e1","src":"start","dst":"call"}]}`, id, limit, peer.srv.URL))
	ids := map[string]string{}
	for i := range keys * per {
		x := a.trigger(id, fmt.Sprintf(`{"tenant":"t%d","n":%d}`, i%keys, i))
		ids[x.ID] = fmt.Sprintf("t%d/%d", i%keys, i)
	}
	deadline := time.Now().Add(60 * time.Second)
	for peer.total() < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d calls within 60 s", peer.total())
		}
		time.Sleep(10 * time.Millisecond)
	}
	a = crash()
	// Sample the running executions per key until all completed.
	deadline = time.Now().Add(3 * time.Minute)
	for {
		running := map[string]int{}
		for _, status := range []string{store.StatusProcessing, store.StatusWaiting} {
			_, by := countStatus(t, st, id, status, true)
			for k, v := range by {
				running[k] += v
			}
		}
		for k, v := range running {
			if v > limit {
				t.Errorf("key %s: %d executions running at once after the crash, over the limit of %d", k, v, limit)
			}
		}
		done, _ := countStatus(t, st, id, store.StatusCompleted)
		if done == keys*per {
			break
		}
		if time.Now().After(deadline) {
			total, by := countStatus(t, st, id, store.StatusEnqueued)
			t.Fatalf("%d of %d executions completed within 3 minutes of the crash; %d still enqueued %v (a slot leaked?)",
				done, keys*per, total, by)
		}
		time.Sleep(100 * time.Millisecond)
	}
	total, _ := countStatus(t, st, id, "")
	if total != keys*per {
		t.Errorf("%d executions of the workflow, want %d", total, keys*per)
	}
	for xid, kn := range ids {
		x := a.waitStatus(xid, "completed")
		if x.Status != "completed" {
			t.Errorf("execution %s (%s): %s", xid, kn, x.Status)
		}
	}
	peer.mu.Lock()
	defer peer.mu.Unlock()
	for _, kn := range ids {
		if peer.calls[kn] == 0 {
			t.Errorf("execution %s never called", kn)
		}
	}
	for k, m := range peer.most {
		if m > limit {
			t.Errorf("key %s: %d executions calling at once, over the limit of %d", k, m, limit)
		}
	}
	t.Logf("calls per execution (over 1: re-run after the crash): %v", peer.calls)
}

// TestFlowWorkerKillNine: the distributed runtime (a `rune server` on
// PostgreSQL, two `rune worker` processes); one worker is killed with
// kill -9 while executions of a concurrency-limited workflow run.
func TestFlowWorkerKillNine(t *testing.T) {
	if testing.Short() {
		t.Skip("kills real processes")
	}
	t.Parallel()
	d := newDeployment(t)
	d.env = allowLoopback
	w1 := d.worker()
	d.worker()
	d.scheduler()
	srv := d.server()
	d.waitHealthy(srv)
	st := d.store()
	a := newAPI(t, &target{url: "http://" + srv.addr, token: newToken(t, st, "flow"), store: st, output: d.logs.String})
	flowCrash(t, a, st, func() *api {
		w1.kill()
		return a
	})
}

// TestFlowServerKillNine: the durable embedded server (`rune server` on
// SQLite) killed with kill -9 and started again.
func TestFlowServerKillNine(t *testing.T) {
	if testing.Short() {
		t.Skip("kills real processes")
	}
	t.Parallel()
	r := newScheduleRig(t, "sqlite")
	r.d.env = allowLoopback
	p := r.server()
	flowCrash(t, r.api(p), r.st, func() *api {
		p.kill()
		p2 := r.server()
		t.Cleanup(p2.stop)
		return r.api(p2)
	})
}
