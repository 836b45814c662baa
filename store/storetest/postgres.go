package storetest

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rune-org/rune/internal/testinfra"
	"github.com/rune-org/rune/store/postgres"
	"github.com/rune-org/rune/store/sqlfile"
)

//go:embed postgres.sql
var postgresSQL string

var pgQueries = sqlfile.MustParse(postgresSQL)

// StaleSchemaAge is the age after which a test schema is taken for the
// leftover of a crashed run and dropped.
const StaleSchemaAge = time.Hour

var prepare struct {
	once sync.Once
	err  error
}

// PostgresURL returns the test database's URL (testinfra.PostgresURL) with
// search_path selecting a new schema of its own, created and migrated, and
// dropped at t's cleanup: pass it to postgres.Open with schema "" or to a
// subprocess (`rune server --postgres URL`). The first call in a process
// creates the database when it is missing and drops stale test schemas.
func PostgresURL(t testing.TB) string {
	t.Helper()
	base, schema := PostgresSchema(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := postgres.Open(ctx, base, schema)
	if err != nil {
		t.Fatalf("storetest: open PostgreSQL schema %s: %v", schema, err)
	}
	s.Close()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("storetest: RUNE_TEST_POSTGRES_URL is not a URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// PostgresSchema returns the test database's URL and the name of a schema
// that does not exist yet and is dropped at t's cleanup (if it was created).
// The first call in a process creates the database when it is missing and
// drops stale test schemas.
func PostgresSchema(t testing.TB) (base, schema string) {
	t.Helper()
	base = testinfra.PostgresURL(t)
	prepare.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		prepare.err = prepareDatabase(ctx, base)
	})
	if prepare.err != nil {
		t.Fatalf("storetest: prepare the test database: %v", prepare.err)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	schema = fmt.Sprintf("rt_%d_%s", time.Now().Unix(), hex.EncodeToString(b[:]))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := dropSchema(ctx, base, schema); err != nil {
			t.Errorf("storetest: drop schema %s: %v", schema, err)
		}
	})
	return base, schema
}

// Postgres returns a store on a fresh schema of the test database (see
// PostgresURL), closed at t's cleanup.
func Postgres(t testing.TB) *postgres.Store {
	t.Helper()
	u := PostgresURL(t)
	s, err := postgres.Open(context.Background(), u, "")
	if err != nil {
		t.Fatalf("storetest: open PostgreSQL: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// PostgresTwin opens a second store, with its own pool, on s's schema.
func PostgresTwin(t testing.TB, s *postgres.Store) *postgres.Store {
	t.Helper()
	twin, err := postgres.Open(context.Background(), testinfra.PostgresURL(t), s.Schema())
	if err != nil {
		t.Fatalf("storetest: open a second pool: %v", err)
	}
	t.Cleanup(func() { twin.Close() })
	return twin
}

// prepareDatabase creates the database of base when it is missing and drops
// the schemas crashed test runs left behind.
func prepareDatabase(ctx context.Context, base string) error {
	conn, err := pgx.Connect(ctx, base)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "3D000" { // invalid_catalog_name: no such database
		cfg, perr := pgx.ParseConfig(base)
		if perr != nil {
			return perr
		}
		name := cfg.Database
		cfg.Database = "postgres"
		admin, aerr := pgx.ConnectConfig(ctx, cfg)
		if aerr != nil {
			return aerr
		}
		// Identifiers cannot be parameters. Another test process may create it first.
		_, cerr := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
		admin.Close(ctx)
		if cerr != nil && !(errors.As(cerr, &pgErr) && pgErr.Code == "42P04") { // duplicate_database
			return cerr
		}
		conn, err = pgx.Connect(ctx, base)
	}
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	rows, _ := conn.Query(ctx, pgQueries["test_schemas"])
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, n := range names {
		parts := strings.SplitN(n, "_", 3)
		if len(parts) != 3 {
			continue
		}
		sec, perr := strconv.ParseInt(parts[1], 10, 64)
		if perr == nil && time.Since(time.Unix(sec, 0)) > StaleSchemaAge {
			// Best effort: another process may be dropping it too.
			_, _ = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{n}.Sanitize()+" CASCADE")
		}
	}
	return nil
}

func dropSchema(ctx context.Context, base, schema string) error {
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	return err
}
