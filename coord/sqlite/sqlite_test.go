package sqlite

import (
	"context"
	"path/filepath"
	"reflect"
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

func TestEventsConformance(t *testing.T) {
	coordtest.RunEvents(t, func(t *testing.T) coord.Events { return newStore(t, nil, Options{}).Events() })
}

// TestEndKeys: End keys that a JSON path would read otherwise (dots,
// quotes, brackets, the empty key) come back as given, with their values,
// the later Finish winning a key.
func TestEndKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newStore(t, nil, Options{}).Coordinator()
	if err := c.Start(ctx, "e", 2); err != nil {
		t.Fatal(err)
	}
	first := map[string]any{"a.b": 1.0, `"q"`: "x", "[0]": []any{true}, "": nil, "$.x": map[string]any{"k.k": "v"}, "ünï ☃": -0.5, "k": "first"}
	if _, err := c.Finish(ctx, "e", "a", coord.Finish{End: first}); err != nil {
		t.Fatal(err)
	}
	o, err := c.Finish(ctx, "e", "b", coord.Finish{End: map[string]any{"k": "second", "big": 12345678901234567.0}})
	if err != nil || !o.Last() {
		t.Fatalf("Finish b: %+v, %v", o, err)
	}
	want := map[string]any{"k": "second", "big": 12345678901234567.0}
	for k, v := range first {
		if k != "k" {
			want[k] = v
		}
	}
	if !reflect.DeepEqual(o.Completion.FinalContext, want) {
		t.Fatalf("FinalContext %#v, want %#v", o.Completion.FinalContext, want)
	}
}

func TestLimiterConformance(t *testing.T) {
	coordtest.RunLimiter(t, func(t *testing.T) coord.Limiter { return newStore(t, nil, Options{}).Limiter() })
}

func TestDigestsConformance(t *testing.T) {
	coordtest.RunDigests(t, func(t *testing.T) coord.Digests { return newStore(t, nil, Options{}).Digests() })
}
