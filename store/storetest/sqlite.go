package storetest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/rune-org/rune/store/sqlite"
)

// SQLite returns a fresh SQLite store in a file under t.TempDir(), closed at
// t's cleanup.
func SQLite(t testing.TB) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "rune.db"))
	if err != nil {
		t.Fatalf("storetest: open SQLite: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("storetest: close SQLite: %v", err)
		}
	})
	return s
}
