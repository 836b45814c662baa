package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/store/postgres"
	"github.com/rune-org/rune/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Exercise(context.Background(), t, func(t *testing.T) store.Store { return storetest.Postgres(t) },
		storetest.WithTwin(func(t *testing.T, s store.Store) store.Store {
			return storetest.PostgresTwin(t, s.(*postgres.Store))
		}))
}

// Servers starting together on one new schema create and migrate it once
// between them; starting again applies nothing.
func TestMigrateConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base, schema := storetest.PostgresSchema(t)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			s, err := postgres.Open(ctx, base, schema)
			if err != nil {
				t.Error(err)
				return
			}
			s.Close()
		})
	}
	wg.Wait()
	s, err := postgres.Open(ctx, base, schema)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n, max int
	if err := conn.QueryRow(ctx, "SELECT count(*), max(version) FROM "+pgx.Identifier{schema, "schema_migrations"}.Sanitize()).Scan(&n, &max); err != nil {
		t.Fatal(err)
	}
	if n != max {
		t.Errorf("%d version rows for %d versions", n, max)
	}
}

// The URL's search_path selects the schema; the URL never appears in errors
// (it may hold a password).
func TestOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := storetest.PostgresURL(t)
	s, err := postgres.Open(ctx, u, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !strings.Contains(u, "search_path="+s.Schema()) || s.Schema() == "" {
		t.Errorf("schema %q from %s", s.Schema(), u)
	}
	_, err = postgres.Open(ctx, "postgres://user:sekrit@127.0.0.1:1/db?sslmode=disable&connect_timeout=1", "")
	if err == nil || strings.Contains(err.Error(), "sekrit") {
		t.Errorf("Open of an unreachable server: %v", err)
	}
	_, err = postgres.Open(ctx, "postgres://user:sekrit@[bad", "")
	if !errors.Is(err, store.ErrInvalid) || strings.Contains(err.Error(), "sekrit") {
		t.Errorf("Open of a malformed URL: %v", err)
	}
	_, err = postgres.Open(ctx, u, "Bad-Schema")
	if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "schema") {
		t.Errorf("Open with a bad schema: %v", err)
	}
}

func BenchmarkAppendHistory(b *testing.B) {
	for _, batch := range []int{100, 500} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			storetest.BenchAppendHistory(b, storetest.Postgres(b), batch)
		})
	}
}

func BenchmarkCreateExecution(b *testing.B) {
	storetest.BenchCreateExecution(b, storetest.Postgres(b))
}

// Tests work in schemas of their own: nothing is created in the test
// database's default schema.
func TestNothingInPublic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	storetest.Postgres(t) // makes sure the database exists and one store was opened
	base, _ := storetest.PostgresSchema(t)
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, _ := conn.Query(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'")
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(tables) != 0 {
		t.Errorf("tables in public: %v, %v", tables, err)
	}
}
