package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/coord/coordtest"
	"github.com/rune-org/rune/internal/sqlitedb"
)

// openDB opens a fresh SQLite file in t's temporary directory.
func openDB(t testing.TB, path string) *sqlitedb.DB {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "rune.db")
	}
	db, err := sqlitedb.Open(context.Background(), path, sqlitedb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// newStore opens a Store on db (a fresh file when nil), closed at cleanup
// before the file.
func newStore(t testing.TB, db *sqlitedb.DB, opts Options) *Store {
	t.Helper()
	if db == nil {
		db = openDB(t, "")
	}
	s, err := New(context.Background(), db, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	coordtest.Run(t, func(t *testing.T) coord.Coordinator { return newStore(t, nil, Options{}).Coordinator() })
}

func TestBarriersConformance(t *testing.T) {
	coordtest.RunBarriers(t, func(t *testing.T) coord.Barriers { return newStore(t, nil, Options{}).Barriers() })
}

func TestBlobsConformance(t *testing.T) {
	coordtest.RunBlobs(t, func(t *testing.T) coord.Blobs { return newStore(t, nil, Options{}).Blobs() })
}

func TestTimersConformance(t *testing.T) {
	coordtest.RunTimers(t, func(t *testing.T) coord.Timers { return newStore(t, nil, Options{}).Timers() })
}

func TestEffectsConformance(t *testing.T) {
	coordtest.RunEffects(t, func(t *testing.T) coord.Effects { return newStore(t, nil, Options{}).Effects() })
}
