package console_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rune-org/rune/console"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/store/storetest"
)

// The console's measurements (docs/benchmarks.md, "Console (issue 16)"):
//
//	go test -run '^$' -bench BenchmarkConsole -benchtime 20x ./console/
//
// RUNE_BENCH_STORE=postgres measures on PostgreSQL instead of SQLite.

// benchTokens has one session, "bench", of an administrator.
type benchTokens struct{}

func (benchTokens) Login(context.Context, string) (string, error) { return "", errors.New("no logins") }

func (benchTokens) Session(ctx context.Context, session string) (context.Context, console.Access, error) {
	if session != "bench" {
		return ctx, console.Access{}, errors.New("invalid session")
	}
	return ctx, console.Access{Operate: true, Edit: true, Replay: true, Purge: true}, nil
}

func (benchTokens) Logout(context.Context, string) error { return nil }

// benchStore opens the store the benchmark measures.
func benchStore(b *testing.B) store.Store {
	if os.Getenv("RUNE_BENCH_STORE") == "postgres" {
		return storetest.Postgres(b)
	}
	return storetest.SQLite(b)
}

// benchConsole serves the console over st, logged in.
func benchConsole(b *testing.B, st store.Store) func(path string) (int, int) {
	body := benchBodies(b, st)
	return func(path string) (int, int) {
		code, text := body(path)
		return code, len(text)
	}
}

// benchBodies is benchConsole answering the body itself.
func benchBodies(b *testing.B, st store.Store) func(path string) (int, string) {
	c, err := console.New(console.Config{API: http.NotFoundHandler(), Store: st, Tokens: benchTokens{}})
	if err != nil {
		b.Fatal(err)
	}
	h := c.Handler()
	return func(path string) (int, string) {
		req := httptest.NewRequest("GET", path, nil)
		req.AddCookie(&http.Cookie{Name: "rune_session", Value: "bench"})
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
}

// timeGets requests path b.N times and reports latency percentiles.
func timeGets(b *testing.B, get func(string) (int, int), path string) {
	var ds []time.Duration
	size := 0
	cpu0 := cpuTime()
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		code, n := get(path)
		ds = append(ds, time.Since(start))
		if code != http.StatusOK {
			b.Fatalf("GET %s: %d", path, code)
		}
		size = n
	}
	b.StopTimer()
	// CPU time of the whole process (console, store, SQLite in process;
	// not PostgreSQL's server) per request: what the wall time would be
	// on an idle core, whatever else loads the machine.
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(len(ds)), "cpu-ms/op")
	slices.Sort(ds)
	pct := func(p float64) float64 { return float64(ds[int(p*float64(len(ds)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.5), "p50-ms")
	b.ReportMetric(pct(0.95), "p95-ms")
	b.ReportMetric(pct(1), "max-ms")
	b.ReportMetric(float64(size)/1024, "page-KiB")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

const splitDef = `{"id":"wide","nodes":[{"id":"start","type":"trigger","trigger":true},
 {"id":"each","type":"split","parameters":{"input_array":"{{ $trigger.items }}"}},
 {"id":"check","type":"conditional","parameters":{"expression":"$item >= 0","true_edge_id":"e3"}},
 {"id":"shape","type":"set","parameters":{"values":{"v":"{{ $item }}"}}},
 {"id":"gather","type":"aggregator","parameters":{"timeout":60}},
 {"id":"report","type":"log","parameters":{"message":"done"}}],
 "edges":[{"id":"e1","src":"start","dst":"each"},{"id":"e2","src":"each","dst":"check"},{"id":"e3","src":"check","dst":"shape"},
 {"id":"e4","src":"shape","dst":"gather"},{"id":"e5","src":"gather","dst":"report"}]}`

// BenchmarkConsoleExecutionPage10kSplit: the page of an execution whose
// split has 10,000 items, each branch two nodes (20,000 node runs, 40,000
// statuses), 9,000 of them done: the full page, the live state the page
// re-reads after events, and the split node's panel.
func BenchmarkConsoleExecutionPage10kSplit(b *testing.B) {
	ctx := context.Background()
	st := benchStore(b)
	if _, err := st.CreateWorkflow(ctx, store.WorkflowInput{ID: "wide", Definition: []byte(splitDef), At: time.Now()}); err != nil {
		b.Fatal(err)
	}
	const id, items = "exec_wide", 10_000
	if _, _, err := st.CreateExecution(ctx, store.ExecutionInput{ID: id, WorkflowID: "wide", Input: []byte(`{"items":[]}`), At: time.Now()}); err != nil {
		b.Fatal(err)
	}
	if _, err := st.ClaimExecutions(ctx, store.Claim{Owner: "bench", Now: time.Now(), Lease: time.Hour, Limit: 1}); err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	var events []store.HistoryEvent
	add := func(node, status string, lineage []message.Frame) {
		s := &message.NodeStatus{WorkflowID: "wide", ExecutionID: id, NodeID: node, Status: status, Attempt: 1,
			ExecutedAt: now, DurationMS: 2, LineageStack: lineage, Output: map[string]any{"v": len(events)}}
		events = append(events, store.HistoryEvent{ExecutionID: id, DedupeKey: fmt.Sprint(len(events)), Status: s, ReceivedAt: now})
	}
	add("start", message.StatusSuccess, nil)
	add("each", message.StatusRunning, nil)
	add("each", message.StatusSuccess, nil)
	for i := range items {
		lin := []message.Frame{{SplitNodeID: "each", BranchID: fmt.Sprint(i), ItemIndex: i, TotalItems: items}}
		add("check", message.StatusRunning, lin)
		add("check", message.StatusSuccess, lin)
		add("shape", message.StatusRunning, lin)
		if i < 9000 {
			add("shape", message.StatusSuccess, lin)
		}
	}
	for chunk := range slices.Chunk(events, 500) {
		if _, err := st.AppendHistory(ctx, chunk); err != nil {
			b.Fatal(err)
		}
	}
	get := benchConsole(b, st)
	b.Run("page", func(b *testing.B) { timeGets(b, get, "/executions/"+id) })
	b.Run("live-state", func(b *testing.B) { timeGets(b, get, "/ui/executions/"+id+"/state") })
	// A live page that has the timeline already (past its 500 events a
	// split's timeline no longer changes) is not sent it again.
	_, state := benchBodies(b, st)("/ui/executions/" + id + "/state")
	key := between(state, `"timeline_key":"`, `"`)
	b.Run("live-state-same-timeline", func(b *testing.B) {
		timeGets(b, get, "/ui/executions/"+id+"/state?timeline="+url.QueryEscape(key))
	})
	b.Run("node-panel", func(b *testing.B) { timeGets(b, get, "/ui/executions/"+id+"/nodes/shape") })
}

// BenchmarkConsoleList100k: the executions list with 100,000 executions
// stored (created through the store, as the trigger API does; a tenth of
// them claimed): first page, a status filter, a workflow filter, a search
// by idempotency key and by execution id, a later page, the live refresh,
// and the dashboard (its counts read the ~86,000 created in the last day).
func BenchmarkConsoleList100k(b *testing.B) {
	ctx := context.Background()
	st := benchStore(b)
	for _, wf := range []string{"alpha", "beta"} {
		def := fmt.Sprintf(`{"id":%q,"nodes":[{"id":"start","type":"trigger","trigger":true}],"edges":[]}`, wf)
		if _, err := st.CreateWorkflow(ctx, store.WorkflowInput{ID: wf, Definition: []byte(def), At: time.Now()}); err != nil {
			b.Fatal(err)
		}
	}
	const n = 100_000
	start := time.Now()
	base := time.Now().Add(-n * time.Second)
	var wg sync.WaitGroup
	work := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range work {
				in := store.ExecutionInput{ID: fmt.Sprintf("exec_%06d", i), WorkflowID: []string{"alpha", "beta"}[i%2],
					Input: []byte(`{"n":1}`), IdempotencyKey: fmt.Sprintf("key-%d", i), Trigger: "api", At: base.Add(time.Duration(i) * time.Second)}
				in.AvailableAt = in.At.Add(time.Hour) // not due: nothing dispatches them
				if _, _, err := st.CreateExecution(ctx, in); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	b.Logf("stored %d executions in %v", n, time.Since(start).Round(time.Millisecond))
	get := benchConsole(b, st)
	for _, c := range []struct{ name, path string }{
		{"first-page", "/executions"},
		{"status-filter", "/executions?status=enqueued"},
		{"workflow-filter", "/executions?workflow=beta"},
		{"time-filter", "/executions?before=" + base.Add(n/2*time.Second).UTC().Format("2006-01-02T15:04")},
		{"search-key", "/executions?q=key-4242"},
		{"search-id", "/executions?q=exec_004242"},
		{"live-rows", "/ui/rows"},
		{"dashboard", "/dashboard"},
	} {
		b.Run(c.name, func(b *testing.B) { timeGets(b, get, c.path) })
	}
}
