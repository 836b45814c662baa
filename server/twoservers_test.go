package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rune-org/rune/store"
)

// TestTwoServersKillNineNoneLostNoneTwice: two `rune server` processes share
// one PostgreSQL and dispatch 1,000 executions, each of which calls an HTTP
// endpoint once with its execution id. Mid-run one server is killed with
// SIGKILL and started again; clients retry a trigger whose answer was lost
// with its Idempotency-Key. Every execution completes (none lost or stuck),
// there are exactly 1,000, and every one called the endpoint exactly once
// (none dispatched into a second run).
func TestTwoServersKillNineNoneLostNoneTwice(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 executions on real processes")
	}
	t.Parallel()
	const n = 1000
	var mu sync.Mutex
	hits := map[string]int{}
	counter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := strings.TrimPrefix(r.URL.Path, "/hit/")
		mu.Lock()
		hits[id]++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok":true}`)
	}))
	defer counter.Close()

	d := newDeployment(t)
	d.env = allowLoopback // the workflow calls the counter on 127.0.0.1
	d.worker()
	d.worker()
	d.scheduler()
	lease := []string{"--dispatch-lease", "5s"}
	a := d.server(lease...)
	b := d.server(lease...)
	d.waitHealthy(a)
	d.waitHealthy(b)
	st := d.store()
	tok := newToken(t, st, "load")
	wfID := "twoservers"
	def := wfDef(wfID, `
		{"id":"call","type":"http","parameters":{"method":"GET","url":"`+counter.URL+`/hit/{{ $execution.id }}"},"retry":{"max_attempts":1}},
		{"id":"done","type":"set","parameters":{"values":{"ok":true}}}`,
		`{"id":"e1","src":"start","dst":"call"},{"id":"e2","src":"call","dst":"done"}`)
	post := func(addr, path, body, key string) (int, error) {
		req, _ := http.NewRequest("POST", "http://"+addr+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := post(a.addr, "/v1/workflows", def, ""); err != nil || code != http.StatusCreated {
		t.Fatalf("create workflow: %d %v", code, err)
	}

	// Trigger through both servers from 8 clients; after 300 accepted,
	// kill -9 server a and start it again. A trigger refused while a is
	// down is sent to b.
	var accepted atomic.Int64
	var addrMu sync.RWMutex
	addrs := []string{a.addr, b.addr}
	killed := make(chan struct{})
	var wg sync.WaitGroup
	next := atomic.Int64{}
	start := time.Now()
	for c := range 8 {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= n {
					return
				}
				for try := 0; ; try++ {
					addrMu.RLock()
					addr := addrs[(int(i)+try)%2]
					addrMu.RUnlock()
					// A trigger whose answer was lost with the killed
					// server is sent again with its key: never twice.
					code, err := post(addr, "/v1/workflows/"+wfID+"/executions", fmt.Sprintf(`{"i":%d}`, i), fmt.Sprintf("load-%d", i))
					if err == nil && (code == http.StatusCreated || code == http.StatusOK) {
						break
					}
					if try > 50 {
						t.Errorf("client %d: trigger %d: %d %v", c, i, code, err)
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
				if accepted.Add(1) == 300 {
					close(killed)
				}
			}
		})
	}
	<-killed
	a.kill()
	t.Logf("server a killed (SIGKILL) after 300 triggers accepted")
	a2 := d.server(lease...)
	d.waitHealthy(a2)
	addrMu.Lock()
	addrs[0] = a2.addr
	addrMu.Unlock()
	wg.Wait()
	t.Logf("%d triggers accepted in %s over HTTP (with a server killed and restarted)", accepted.Load(), time.Since(start).Round(time.Millisecond))
	if accepted.Load() != n {
		t.Fatalf("%d triggers accepted, want %d", accepted.Load(), n)
	}

	// Every execution completes; none is left enqueued or processing.
	ctx := context.Background()
	deadline := time.Now().Add(120 * time.Second)
	for {
		counts := map[string]int{}
		cursor := ""
		for {
			page, err := st.ListExecutions(ctx, store.ExecutionFilter{WorkflowID: wfID, Limit: 500, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range page.Items {
				counts[x.Status]++
			}
			if cursor = page.Next; cursor == "" {
				break
			}
		}
		total := 0
		for _, c := range counts {
			total += c
		}
		if total != n {
			t.Fatalf("%d executions (%v), want %d: a retried trigger was enqueued twice", total, counts, n)
		}
		if counts[store.StatusCompleted] == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 120 s: executions by status %v, want all %d completed", counts, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(hits) != n {
		t.Fatalf("%d executions called the endpoint, want %d", len(hits), n)
	}
	for id, c := range hits {
		if c != 1 {
			t.Fatalf("execution %s called the endpoint %d times: it ran twice", id, c)
		}
	}
}
