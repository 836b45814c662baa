package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Schemas left by a crashed run are dropped by the next one; recent ones,
// perhaps another process's running tests, stay.
func TestPrepareDropsStaleSchemas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base, _ := PostgresSchema(t)
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	stale := fmt.Sprintf("rt_%d_deadbeef", time.Now().Add(-2*StaleSchemaAge).Unix())
	recent := fmt.Sprintf("rt_%d_cafef00d", time.Now().Unix())
	for _, s := range []string{stale, recent} {
		if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{s}.Sanitize()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = dropSchema(context.Background(), base, s) })
	}
	if err := prepareDatabase(ctx, base); err != nil {
		t.Fatal(err)
	}
	for s, want := range map[string]bool{stale: false, recent: true} {
		var exists bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", s).Scan(&exists); err != nil {
			t.Fatal(err)
		}
		if exists != want {
			t.Errorf("schema %s exists = %v, want %v", s, exists, want)
		}
	}
}
