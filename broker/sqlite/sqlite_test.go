package sqlite_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/broker/brokertest"
	"github.com/rune-org/rune/broker/sqlite"
	"github.com/rune-org/rune/internal/sqlitedb"
)

var ctxBG = context.Background()

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// openDB opens a SQLite file in t's temporary directory, closed when t ends.
func openDB(t testing.TB, path string) *sqlitedb.DB {
	t.Helper()
	db, err := sqlitedb.Open(ctxBG, path, sqlitedb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func newBroker(t testing.TB, db *sqlitedb.DB, opts sqlite.Options) *sqlite.Broker {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = discard()
	}
	b, err := sqlite.New(db, opts)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestConformance(t *testing.T) {
	brokertest.Run(t, func(t *testing.T) broker.Broker {
		return newBroker(t, openDB(t, filepath.Join(t.TempDir(), "rune.db")), sqlite.Options{})
	})
}
