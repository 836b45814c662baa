package sqlitedb

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync"
	"testing"
)

func open(t *testing.T) *DB {
	t.Helper()
	d, err := Open(context.Background(), filepath.Join(t.TempDir(), "t.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if _, err := d.W.Exec("CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestWriteGroups: concurrent writes all commit, a failing one rolls back
// only itself, and readers see every committed write.
func TestWriteGroups(t *testing.T) {
	d := open(t)
	ctx := context.Background()
	boom := errors.New("boom")
	var wg sync.WaitGroup
	errs := make([]error, 200)
	for i := range 200 {
		wg.Go(func() {
			errs[i] = d.Write(ctx, func(tx *sql.Tx) error {
				if _, err := tx.Exec("INSERT INTO kv VALUES (?, ?)", i, i); err != nil {
					return err
				}
				if i%10 == 0 {
					return boom
				}
				return nil
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if i%10 == 0 && !errors.Is(err, boom) || i%10 != 0 && err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	var n int
	if err := d.R.QueryRow("SELECT count(*) FROM kv").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 180 {
		t.Fatalf("committed rows = %d, want 180 (the 20 failing writes rolled back alone)", n)
	}
}

// TestWriteAfterClose returns ErrClosed, every time: the request queue has
// room, and a Write that queued its request after the writer stopped used
// to wait for ever.
func TestWriteAfterClose(t *testing.T) {
	d := open(t)
	d.Close()
	for range 1000 {
		if err := d.Write(context.Background(), func(*sql.Tx) error { return nil }); !errors.Is(err, ErrClosed) {
			t.Fatalf("Write after Close = %v, want ErrClosed", err)
		}
	}
}

// TestWriteDuringClose: writes racing Close either commit or return
// ErrClosed; none waits for ever.
func TestWriteDuringClose(t *testing.T) {
	d := open(t)
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			err := d.Write(context.Background(), func(tx *sql.Tx) error {
				_, err := tx.Exec("INSERT INTO kv VALUES (?, ?)", i, i)
				return err
			})
			if err != nil && !errors.Is(err, ErrClosed) {
				t.Errorf("write %d: %v", i, err)
			}
		})
	}
	d.Close()
	wg.Wait()
}

// TestReopenKeeps: what committed is there after reopening the file.
func TestReopenKeeps(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	ctx := context.Background()
	d, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.W.Exec("CREATE TABLE kv (k TEXT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if err := d.Write(ctx, func(tx *sql.Tx) error { _, err := tx.Exec("INSERT INTO kv VALUES ('a')"); return err }); err != nil {
		t.Fatal(err)
	}
	d.Close()
	d, err = Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var k string
	if err := d.R.QueryRow("SELECT k FROM kv").Scan(&k); err != nil || k != "a" {
		t.Fatalf("after reopen: %q, %v", k, err)
	}
}
