package postgres_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/store/postgres"
	"github.com/rune-org/rune/store/storetest"
)

// BenchmarkClaimAtScale measures the dispatcher's claim (ClaimExecutions of
// 200, then MarkDispatchedAll of them: one dispatcher round's two writes)
// with RUNE_SCALE_EXECUTIONS stored executions (default 1,000,000): 99 %
// finished, 1 % due, inserted by one INSERT … SELECT FROM generate_series
// and analysed, as a server with a long history holds them (issue 18). Run
// it with `go test -run XXX -bench ClaimAtScale -benchtime 20x ./store/postgres/`;
// each op claims a batch of 200 of the due executions.
func BenchmarkClaimAtScale(b *testing.B) {
	total := 1_000_000
	if v := os.Getenv("RUNE_SCALE_EXECUTIONS"); v != "" {
		total, _ = strconv.Atoi(v)
	}
	ctx := context.Background()
	url := storetest.PostgresURL(b)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	s, err := postgres.Open(ctx, url, "")
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if _, err := s.CreateWorkflow(ctx, store.WorkflowInput{ID: "wf", Definition: []byte(`{"id":"wf"}`)}); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	// Every 100th execution is enqueued and due; the others finished, spread
	// over the last 30 days.
	if _, err := conn.Exec(ctx, `
INSERT INTO executions (id, workflow_id, version, status, input, trigger_source, available_at, attempts, created_at,
    updated_at, finished_at, dispatched_at, completion)
SELECT 'x' || lpad(i::text, 9, '0'), 'wf', 1,
    CASE WHEN i % 100 = 0 THEN 'enqueued' ELSE 'completed' END, '{}', 'api',
    now() - (i % 2592000) * interval '1 second', 1,
    now() - (i % 2592000) * interval '1 second', now(),
    CASE WHEN i % 100 = 0 THEN NULL ELSE now() - (i % 2592000) * interval '1 second' + interval '1 second' END,
    CASE WHEN i % 100 = 0 THEN NULL ELSE now() - (i % 2592000) * interval '1 second' END,
    CASE WHEN i % 100 = 0 THEN NULL ELSE '{"status":"completed"}'::json END
FROM generate_series(1, $1) AS i`, total); err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "ANALYZE executions"); err != nil {
		b.Fatal(err)
	}
	b.Logf("%d executions inserted and analysed in %s", total, time.Since(start).Round(time.Millisecond))
	due := total / 100
	if b.N*200 > due {
		b.Fatalf("-benchtime %dx claims %d executions; only %d are due", b.N, b.N*200, due)
	}
	var lat []time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		xs, err := s.ClaimExecutions(ctx, store.Claim{Owner: "d1", Now: time.Now(), Lease: time.Minute, Limit: 200})
		if err != nil || len(xs) != 200 {
			b.Fatalf("claimed %d: %v", len(xs), err)
		}
		ids := make([]string, len(xs))
		for i, x := range xs {
			ids[i] = x.ID
		}
		if notMarked, err := s.MarkDispatchedAll(ctx, ids, "d1", time.Now()); err != nil || len(notMarked) != 0 {
			b.Fatalf("mark dispatched: %v, %v", notMarked, err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(lat[len(lat)/2]), "p50_ms/claim")
	b.ReportMetric(ms(lat[len(lat)-1]), "max_ms/claim")
	b.ReportMetric(float64(200*b.N)/b.Elapsed().Seconds(), "executions_claimed/s")
	fmt.Fprintf(os.Stderr, "claim of 200 among %d stored executions: p50 %.1f ms, max %.1f ms\n", total, ms(lat[len(lat)/2]), ms(lat[len(lat)-1]))
}
