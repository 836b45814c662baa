package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/store/sqlite"
	"github.com/rune-org/rune/store/storetest"
)

func TestConformance(t *testing.T) {
	// No twin: a file is one server's (a second process on it, such as
	// `rune token create`, is served, but not as a path for throughput).
	storetest.Exercise(context.Background(), t, func(t *testing.T) store.Store { return storetest.SQLite(t) })
}

// Opening an existing database applies nothing twice and keeps its data.
func TestReopen(t *testing.T) {
	ctx := context.Background()
	s := storetest.SQLite(t)
	if _, err := s.CreateWorkflow(ctx, store.WorkflowInput{ID: "wf", Definition: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	again, err := sqlite.Open(ctx, s.Path())
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer again.Close()
	if w, err := again.GetWorkflow(ctx, "wf", 0); err != nil || w.Version != 1 {
		t.Errorf("after reopening: %+v, %v", w, err)
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := sqlite.Open(context.Background(), ""); err == nil {
		t.Error("Open(\"\") succeeded")
	}
	if _, err := sqlite.Open(context.Background(), t.TempDir()+"/missing/dir/rune.db"); err == nil {
		t.Error("Open in a missing directory succeeded")
	}
}

func BenchmarkAppendHistory(b *testing.B) {
	for _, batch := range []int{100, 500} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			storetest.BenchAppendHistory(b, storetest.SQLite(b), batch)
		})
	}
}

// Processes starting together on a new file migrate it once between them.
func TestOpenConcurrent(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "rune.db")
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			s, err := sqlite.Open(context.Background(), path)
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := s.ListWorkflows(context.Background(), 0, ""); err != nil {
				t.Error(err)
			}
			s.Close()
		})
	}
	wg.Wait()
}

func BenchmarkCreateExecution(b *testing.B) {
	storetest.BenchCreateExecution(b, storetest.SQLite(b))
}
