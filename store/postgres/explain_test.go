package postgres_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rune-org/rune/store/sqlfile"
	"github.com/rune-org/rune/store/storetest"
)

// TestHotQueriesUseIndexes EXPLAINs the server's hot queries — the
// dispatcher's claim, the history writes' reads, the execution list, the
// pruner's scan — with sequential scans disabled: each must be served by
// the index named, so it stays fast with millions of rows (issue 18). A
// missing index shows as a Seq Scan (disabled scans are still planned when
// nothing else can serve the query) or as another index.
func TestHotQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, err := os.ReadFile("queries.sql")
	if err != nil {
		t.Fatal(err)
	}
	q := sqlfile.MustParse(string(src))
	conn, err := pgx.Connect(ctx, storetest.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SET enable_seqscan = off"); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ids := []string{"a", "b"}
	for _, tc := range []struct {
		name    string
		args    []any
		indexes []string
	}{
		{"execution_claim", []any{"d1", now.Add(time.Minute), now, 200}, []string{"executions_enqueued", "executions_undispatched"}},
		{"execution_lock_many", []any{ids}, []string{"executions_pkey"}},
		{"run_get_many", []any{ids, ids, ids}, []string{"node_runs_execution_id_node_id_branch_key"}},
		{"events_recorded", []any{ids, ids}, []string{"events_dedupe"}},
		{"execution_dispatched_many", []any{now, ids, "d1"}, []string{"executions_pkey"}},
		{"execution_list", []any{"", "", "", nil, nil, nil, "", 51, "", ""}, []string{"executions_created"}},
		{"execution_list", []any{"wf", "", "", nil, nil, now, "x", 51, "", ""}, []string{"executions_workflow"}},
		{"execution_list", []any{"", "completed", "", nil, nil, nil, "", 51, "", ""}, []string{"executions_status"}},
		// Issue 38: the filter on input values, on its GIN index.
		{"execution_list_input", []any{"", "", "", nil, nil, nil, "", 51, "", "", `{"user_id":42}`}, []string{"executions_input"}},
		{"prune_pick", []any{now, 500}, []string{"executions_prunable"}},
		{"events_execution", []any{"a", int64(0), 500}, []string{"events_execution"}},
	} {
		rows, _ := conn.Query(ctx, "EXPLAIN "+q[tc.name], tc.args...)
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatalf("EXPLAIN %s: %v", tc.name, err)
		}
		plan := strings.Join(lines, "\n")
		if strings.Contains(plan, "Seq Scan") {
			t.Errorf("%s scans a table sequentially:\n%s", tc.name, plan)
		}
		for _, ix := range tc.indexes {
			if !strings.Contains(plan, ix) {
				t.Errorf("%s does not use index %s:\n%s", tc.name, ix, plan)
			}
		}
	}
}
