package console_test

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rune-org/rune/internal/testinfra"
	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/store/postgres"
)

// BenchmarkConsoleSearch10k (issue 38): the executions list of 10,000
// executions filtered by an input value (docs/benchmarks.md):
//
//	RUNE_BENCH_STORE=postgres go test -run '^$' -bench BenchmarkConsoleSearch10k -benchtime 20x ./console/
//
// Each input is {"user_id": i % 1000, "order": i, "plan": …}: user_id = 42
// matches 10 executions, order = 4242 one, and plan = "pro" a third (a page
// of 50 at once); each filter also with a status, and a trigger filter.
func BenchmarkConsoleSearch10k(b *testing.B) {
	ctx := context.Background()
	st := benchStore(b)
	def := `{"id":"shop","nodes":[{"id":"start","type":"trigger","trigger":true}],"edges":[]}`
	if _, err := st.CreateWorkflow(ctx, store.WorkflowInput{ID: "shop", Definition: []byte(def), At: time.Now()}); err != nil {
		b.Fatal(err)
	}
	const n = 10_000
	base := time.Now().Add(-n * time.Second)
	var wg sync.WaitGroup
	work := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range work {
				in := store.ExecutionInput{ID: fmt.Sprintf("exec_%06d", i), WorkflowID: "shop",
					Input:   fmt.Appendf(nil, `{"user_id":%d,"order":%d,"plan":%q}`, i%1000, i, []string{"free", "pro", "team"}[i%3]),
					Trigger: []string{"api", "hook:h1", "schedule:s1"}[i%3], At: base.Add(time.Duration(i) * time.Second)}
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
	get := benchConsole(b, st)
	where := func(s string) string { return "where=" + url.QueryEscape(s) }
	// Before PostgreSQL's statistics of the new rows (autovacuum's analyze
	// comes within a minute of a load like this one), the planner reads
	// every row rather than the GIN index: measured once, then analysed.
	if pg, ok := st.(*postgres.Store); ok {
		b.Run("input-10-of-10k-unanalysed", func(b *testing.B) { timeGets(b, get, "/executions?"+where("$trigger.user_id = 42")) })
		conn, err := pgx.Connect(ctx, testinfra.PostgresURL(b)+"&search_path="+pg.Schema())
		if err != nil {
			b.Fatal(err)
		}
		if _, err := conn.Exec(ctx, "ANALYZE executions"); err != nil {
			b.Fatal(err)
		}
		conn.Close(ctx)
	}
	for _, c := range []struct{ name, path string }{
		{"no-filter", "/executions"},
		{"input-10-of-10k", "/executions?" + where("$trigger.user_id = 42")},
		{"input-1-of-10k", "/executions?" + where("$trigger.order = 4242")},
		{"input-none", "/executions?" + where("$trigger.order = 99999")},
		{"input-third", "/executions?" + where(`$trigger.plan = pro`)},
		{"input-and-status", "/executions?status=enqueued&" + where("$trigger.user_id = 42")},
		{"trigger-kind", "/executions?trigger=hook"},
		{"live-rows-input", "/ui/rows?" + where("$trigger.user_id = 42")},
	} {
		b.Run(c.name, func(b *testing.B) { timeGets(b, get, c.path) })
	}
}
