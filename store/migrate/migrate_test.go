package migrate

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
)

func fsOf(names ...string) fstest.MapFS {
	m := fstest.MapFS{}
	for _, n := range names {
		m["m/"+n] = &fstest.MapFile{Data: []byte("-- " + n)}
	}
	return m
}

func TestLoad(t *testing.T) {
	ms, err := Load(fsOf("002_b.up.sql", "001_a.up.sql", "001_a.down.sql", "003_c.up.sql", "README.md"), "m")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, m.Name)
		if m.SQL != "-- "+m.Name {
			t.Errorf("%s: SQL %q", m.Name, m.SQL)
		}
	}
	if !slices.Equal(got, []string{"001_a.up.sql", "002_b.up.sql", "003_c.up.sql"}) {
		t.Errorf("order = %q", got)
	}
}

func TestLoadRejects(t *testing.T) {
	tests := []struct {
		files []string
		want  string
	}{
		{[]string{"001_a.up.sql", "003_c.up.sql"}, "version 2 missing"},
		{[]string{"001_a.up.sql", "001_b.up.sql"}, "version 1 twice"},
		{[]string{"002_a.up.sql"}, "version 1 missing"},
		{[]string{"001-a.up.sql"}, `"001-a.up.sql" is not NNN_name.up.sql`},
		{[]string{"001_A.up.sql"}, "is not NNN_name.up.sql"},
		{nil, "no migrations"},
	}
	for _, tc := range tests {
		fsys := fsOf(tc.files...)
		fsys["m/.keep"] = &fstest.MapFile{}
		_, err := Load(fsys, "m")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Load(%q) = %v, want an error containing %q", tc.files, err, tc.want)
		}
	}
}

// fakeTarget records applied versions in memory, failing on a version when told.
type fakeTarget struct {
	mu      sync.Mutex
	lock    sync.Mutex
	applied []int
	failOn  int
}

func (f *fakeTarget) Lock(context.Context) (func(), error) { f.lock.Lock(); return f.lock.Unlock, nil }
func (f *fakeTarget) Applied(context.Context) ([]int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.applied), nil
}
func (f *fakeTarget) Apply(_ context.Context, m Migration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if m.Version == f.failOn {
		return errors.New("syntax error")
	}
	if slices.Contains(f.applied, m.Version) {
		return errors.New("applied twice")
	}
	f.applied = append(f.applied, m.Version)
	return nil
}

func TestRun(t *testing.T) {
	ms, err := Load(fsOf("001_a.up.sql", "002_b.up.sql", "003_c.up.sql"), "m")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	f := &fakeTarget{failOn: 3}
	ran, err := Run(ctx, f, ms)
	if err == nil || !strings.Contains(err.Error(), "003_c.up.sql: syntax error") || !slices.Equal(ran, []int{1, 2}) {
		t.Fatalf("Run with a failing 3 = %v, %v", ran, err)
	}
	f.failOn = 0
	// Concurrent runs (serialised by the lock) apply 3 once between them.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var all []int
	for range 4 {
		wg.Go(func() {
			ran, err := Run(ctx, f, ms)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			all = append(all, ran...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if !slices.Equal(all, []int{3}) || !slices.Equal(f.applied, []int{1, 2, 3}) {
		t.Errorf("concurrent runs applied %v (recorded %v)", all, f.applied)
	}
	if _, err := Run(ctx, f, ms[:2]); !errors.Is(err, ErrNewer) {
		t.Errorf("Run on a newer database = %v, want ErrNewer", err)
	}
}
