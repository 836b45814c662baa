package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rune-org/rune/internal/testinfra"
	"github.com/rune-org/rune/server"
	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/store/sqlite"
)

// Flow control by key (issue 35): concurrency, priority, debounce and the
// visibility of why an execution is enqueued, on both runtimes.

// flowSuite runs the flow-control tests against one target.
func flowSuite(t *testing.T, tg *target) {
	for _, tc := range []struct {
		name string
		f    func(t *testing.T, a *api, id string)
	}{
		{"ConcurrencyPerKey", testConcurrencyPerKey},
		{"PriorityUnderBacklog", testPriorityUnderBacklog},
		{"Debounce", testDebounce},
		{"OnLimitDrop", testOnLimitDrop},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.f(t, newAPI(t, tg), strings.ToLower(tc.name)+"_"+testinfra.Name(t))
		})
	}
}

// TestFlowEmbedded runs the flow suite on the embedded server (SQLite).
func TestFlowEmbedded(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "rune.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	flowSuite(t, runTarget(t, st, "flow", func(c *server.Config) { c.Flow.Poll = 20 * time.Millisecond }))
}

// TestFlowDistributed runs the flow suite on the distributed master: a
// `rune server` on PostgreSQL and two `rune worker` processes.
func TestFlowDistributed(t *testing.T) {
	d := newDeployment(t)
	d.env = allowLoopback
	d.worker()
	d.worker()
	d.scheduler()
	srv := d.server()
	d.waitHealthy(srv)
	st := d.store()
	flowSuite(t, &target{url: "http://" + srv.addr, token: newToken(t, st, "flow"), store: st, output: d.logs.String})
}

// inflight is an HTTP peer that counts the calls in flight per key (the
// path's last element) and records the most seen at once.
type inflight struct {
	mu    sync.Mutex
	now   map[string]int
	most  map[string]int
	order []string
	delay time.Duration
	// gate, when not nil, holds every call until closed.
	gate chan struct{}
	srv  *httptest.Server
}

func newInflight(t *testing.T, delay time.Duration) *inflight {
	p := &inflight{now: map[string]int{}, most: map[string]int{}, delay: delay}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		p.mu.Lock()
		p.now[key]++
		p.most[key] = max(p.most[key], p.now[key])
		p.order = append(p.order, key)
		gate := p.gate
		p.mu.Unlock()
		if gate != nil {
			<-gate
		}
		time.Sleep(p.delay)
		p.mu.Lock()
		p.now[key]--
		p.mu.Unlock()
		w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *inflight) calls() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.order)
}

// flowDef is a workflow that calls url/<key> with the given settings.
// The call's timeout is long: a test holds it while it sets up a backlog,
// which on a loaded machine under -race takes longer than the default 30 s.
func flowDef(id, settings, url, key string) string {
	return fmt.Sprintf(`{"id":%q,"settings":%s,"nodes":[{"id":"start","type":"trigger","trigger":true},`+
		`{"id":"call","type":"http","parameters":{"method":"GET","url":"%s/k/%s","timeout":"5m"},"retry":{"max_attempts":1}}],`+
		`"edges":[{"id":"e1","src":"start","dst":"call"}]}`, id, settings, url, key)
}

// countStatus counts workflow id's executions in status, by their input's
// "tenant".
func countStatus(t *testing.T, st store.Store, id, status string, dispatched ...bool) (total int, byKey map[string]int) {
	t.Helper()
	byKey = map[string]int{}
	f := store.ExecutionFilter{WorkflowID: id, Status: status, Limit: 500}
	for {
		page, err := st.ListExecutions(context.Background(), f)
		if err != nil {
			t.Errorf("list executions: %v", err)
			return total, byKey
		}
		for _, x := range page.Items {
			if len(dispatched) > 0 && x.DispatchedAt == nil {
				continue
			}
			var in struct {
				Tenant string `json:"tenant"`
			}
			_ = json.Unmarshal(x.Input, &in)
			byKey[in.Tenant]++
			total++
		}
		if page.Next == "" {
			return total, byKey
		}
		f.Cursor = page.Next
	}
}

// testConcurrencyPerKey: 1,000 executions over 10 keys with a limit of 2;
// sampled throughout, never more than 2 of one key past enqueued, and
// never more than 2 calls of one key in flight.
func testConcurrencyPerKey(t *testing.T, a *api, id string) {
	const keys, per, limit = 10, 100, 2
	peer := newInflight(t, 20*time.Millisecond)
	a.pushWorkflow(flowDef(id, `{"concurrency":{"key":"{{ $trigger.tenant }}","limit":2}}`, peer.srv.URL, "{{ $trigger.tenant }}"))
	stop := make(chan struct{})
	sampled := make(chan int)
	go func() {
		n := 0
		defer func() { sampled <- n }()
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			// Running: dispatched and not ended. (A claim shows
			// processing for the moment its slot is decided.)
			running := map[string]int{}
			for _, status := range []string{store.StatusProcessing, store.StatusWaiting} {
				_, by := countStatus(t, a.tg.store, id, status, true)
				for k, v := range by {
					running[k] += v
				}
			}
			for k, v := range running {
				if v > limit {
					t.Errorf("key %s: %d executions running at once, over the limit of %d", k, v, limit)
				}
			}
			n++
		}
	}()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range keys * per {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			a.trigger(id, fmt.Sprintf(`{"tenant":"t%d","n":%d}`, i%keys, i))
		})
	}
	wg.Wait()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		done, _ := countStatus(t, a.tg.store, id, store.StatusCompleted)
		if done == keys*per {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d executions completed within 5 minutes", done, keys*per)
		}
		time.Sleep(200 * time.Millisecond)
	}
	close(stop)
	if n := <-sampled; n < 5 {
		t.Errorf("only %d samples of the running executions were taken", n)
	}
	peer.mu.Lock()
	defer peer.mu.Unlock()
	for k, m := range peer.most {
		if m > limit {
			t.Errorf("key %s: %d calls in flight at once, over the limit of %d", k, m, limit)
		}
	}
	if len(peer.most) != keys {
		t.Errorf("calls came for %d keys, want %d", len(peer.most), keys)
	}
}

// queueView is the queue state GET /v1/executions/{id} shows.
type queueView struct {
	Priority    int     `json:"priority"`
	AvailableAt *string `json:"available_at"`
	Queue       *struct {
		Reason         string  `json:"reason"`
		ConcurrencyKey *string `json:"concurrency_key"`
		Limit          int     `json:"limit"`
		Running        int     `json:"running"`
		Position       int     `json:"position"`
		DebounceKey    *string `json:"debounce_key"`
		StartAt        *string `json:"start_at"`
	} `json:"queue"`
}

func (a *api) queueOf(id string) queueView {
	a.t.Helper()
	var v queueView
	a.want(http.StatusOK, "GET", "/v1/executions/"+id, nil, &v)
	return v
}

// waitQueue polls execution id until cond holds of its queue state.
func (a *api) waitQueue(id, what string, cond func(queueView) bool) queueView {
	a.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		v := a.queueOf(id)
		if cond(v) {
			return v
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("execution %s: not %s within 60 s; last %+v", id, what, v.Queue)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testPriorityUnderBacklog: with the one slot of a limit-1 workflow taken,
// nine executions of priorities given in a shuffled order queue up, each
// showing its reason and place; once the slot frees they start highest
// priority first.
func testPriorityUnderBacklog(t *testing.T, a *api, id string) {
	peer := newInflight(t, 0)
	gate := make(chan struct{})
	peer.gate = gate
	a.pushWorkflow(flowDef(id, `{"concurrency":{"limit":1},"priority":3}`, peer.srv.URL, "{{ $trigger.n }}"))
	first := a.trigger(id, `{"n":"first"}`)
	a.waitFor(first.ID, "calling", func(*execution) bool { return len(peer.calls()) == 1 })
	// Nine at the workflow's default priority (3), then nine with
	// ?priority=, in a shuffled order.
	prios := []int{4, 9, 1, 7, 2, 10, 5, 8, 6}
	for _, p := range prios {
		a.trigger(id, fmt.Sprintf(`{"n":"p%d"}`, p))
	}
	ids := map[int]string{}
	for _, p := range prios {
		var x execution
		a.want(http.StatusCreated, "POST", fmt.Sprintf("/v1/workflows/%s/executions?priority=%d", id, p),
			[]byte(fmt.Sprintf(`{"n":"q%d"}`, p)), &x)
		ids[p] = x.ID
	}
	for _, p := range prios {
		a.waitQueue(ids[p], "queued for a slot", func(v queueView) bool { return v.Queue != nil && v.Queue.Reason == "concurrency" })
	}
	for _, p := range prios {
		v := a.queueOf(ids[p])
		if v.Priority != p || v.Queue.Limit != 1 || v.Queue.Running != 1 || v.Queue.ConcurrencyKey == nil || *v.Queue.ConcurrencyKey != "" || v.AvailableAt != nil {
			t.Errorf("priority %d: queue %+v priority %d available_at %v; want priority %d, limit 1, 1 running, key \"\", no available_at",
				p, *v.Queue, v.Priority, v.AvailableAt, p)
		}
		ahead := 0
		for _, o := range prios {
			if o > p {
				ahead++
			}
		}
		if p < 3 {
			ahead += len(prios) // the default-priority ones
		}
		if v.Queue.Position != ahead+1 {
			t.Errorf("priority %d: position %d, want %d", p, v.Queue.Position, ahead+1)
		}
	}
	close(gate)
	deadline := time.Now().Add(2 * time.Minute)
	for len(peer.calls()) < 1+2*len(prios) {
		if time.Now().After(deadline) {
			t.Fatalf("calls %v: not all within 2 minutes", peer.calls())
		}
		time.Sleep(50 * time.Millisecond)
	}
	calls := peer.calls()[1:]
	// Priority order: q10 … q4, then the nine of the default 3 (p*) in
	// arrival order, then q2, q1.
	var got []string
	for _, c := range calls {
		if strings.HasPrefix(c, "q") {
			got = append(got, c)
		}
	}
	wantQ := []string{"q10", "q9", "q8", "q7", "q6", "q5", "q4", "q2", "q1"}
	if !slices.Equal(got, wantQ) {
		t.Errorf("the ?priority= executions started in order %v, want %v (all calls %v)", got, wantQ, calls)
	}
	// The default-priority (3) ones come after q4 and before q2, in arrival order.
	i4, i2 := slices.Index(calls, "q4"), slices.Index(calls, "q2")
	var mid []string
	if i4 >= 0 && i2 > i4 {
		mid = calls[i4+1 : i2]
	}
	wantMid := []string{"p4", "p9", "p1", "p7", "p2", "p10", "p5", "p8", "p6"}
	if !slices.Equal(mid, wantMid) {
		t.Errorf("the default-priority executions started as %v between q4 and q2, want %v in arrival order", mid, wantMid)
	}
}

// testDebounce: 100 triggers with one key collapse into one execution that
// runs once with the last trigger's input; each is answered with its id.
func testDebounce(t *testing.T, a *api, id string) {
	peer := newInflight(t, 0)
	a.pushWorkflow(flowDef(id, `{"debounce":{"key":"{{ $trigger.user }}","period":"5s"}}`, peer.srv.URL, "{{ $trigger.n }}"))
	var first string
	for i := range 100 {
		var x struct {
			ID        string `json:"id"`
			Debounced bool   `json:"debounced"`
			Input     struct {
				N int `json:"n"`
			} `json:"input"`
		}
		status := http.StatusOK
		if i == 0 {
			status = http.StatusCreated
		}
		a.want(status, "POST", "/v1/workflows/"+id+"/executions", []byte(fmt.Sprintf(`{"user":"u1","n":%d}`, i)), &x)
		if i == 0 {
			first = x.ID
			v := a.queueOf(first)
			if v.Queue == nil || v.Queue.Reason != "debounce" || v.Queue.DebounceKey == nil || *v.Queue.DebounceKey != "u1" || v.Queue.StartAt == nil {
				t.Errorf("first trigger's queue state %+v, want reason debounce, key u1 and start_at", v.Queue)
			}
			continue
		}
		if x.ID != first || !x.Debounced || x.Input.N != i {
			t.Fatalf("trigger %d: answered execution %s debounced %v input n %d; want %s, true, %d", i, x.ID, x.Debounced, x.Input.N, first, i)
		}
	}
	a.waitStatus(first, "completed")
	if calls := peer.calls(); !slices.Equal(calls, []string{"99"}) {
		t.Errorf("calls %v, want one with the last input (99)", calls)
	}
	total, _ := countStatus(t, a.tg.store, id, "")
	if total != 1 {
		t.Errorf("%d executions of the workflow, want 1", total)
	}
}

// testOnLimitDrop: with the slot taken, a trigger of a "drop" workflow ends
// halted with CONCURRENCY_LIMIT and never runs.
func testOnLimitDrop(t *testing.T, a *api, id string) {
	peer := newInflight(t, 0)
	gate := make(chan struct{})
	peer.gate = gate
	a.pushWorkflow(flowDef(id, `{"concurrency":{"key":"one","limit":1,"on_limit":"drop"}}`, peer.srv.URL, "{{ $trigger.n }}"))
	first := a.trigger(id, `{"n":"first"}`)
	a.waitFor(first.ID, "calling", func(*execution) bool { return len(peer.calls()) == 1 })
	second := a.trigger(id, `{"n":"second"}`)
	x := a.waitStatus(second.ID, "halted")
	if !strings.Contains(string(x.Completion), "CONCURRENCY_LIMIT") {
		t.Errorf("dropped execution's completion %s, want CONCURRENCY_LIMIT", x.Completion)
	}
	close(gate)
	a.waitStatus(first.ID, "completed")
	third := a.trigger(id, `{"n":"third"}`)
	a.waitStatus(third.ID, "completed") // the slot came back
	if calls := peer.calls(); !slices.Equal(calls, []string{"first", "third"}) {
		t.Errorf("calls %v, want first and third", calls)
	}
}
