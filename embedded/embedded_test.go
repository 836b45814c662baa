package embedded_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rune-org/rune/embedded"
	"github.com/rune-org/rune/internal/sqlitedb"
	"github.com/rune-org/rune/internal/testinfra"
	"github.com/rune-org/rune/runtimetest"
	"github.com/rune-org/rune/workflow"
)

func TestRuntimeConformance(t *testing.T) {
	runtimetest.Run(t, func(t *testing.T) runtimetest.Runtime {
		rt, err := embedded.New(embedded.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rt.Close() })
		return rt
	})
}

func TestDuplicateAggregatorArrival(t *testing.T) {
	rt, err := embedded.New(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	runtimetest.DuplicateArrival(t, rt.Engine, "exec_dup")
}

func TestRetrySpacing(t *testing.T) {
	rt, err := embedded.New(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	runtimetest.RetrySpacing(t, rt)
}

func TestHaltFromOutside(t *testing.T) {
	t.Parallel()
	rt, err := embedded.New(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	runtimetest.HaltFromOutside(t, rt, rt.Engine)
}

// Issue 12: a server echoing the request's headers put the bearer token
// into the failed status, the completion and the final context. No status,
// completion or log line (at debug level) may hold a secret.
func TestSecretsNeverLeak(t *testing.T) {
	t.Parallel()
	var logs testinfra.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rt, err := embedded.New(embedded.Options{Secrets: runtimetest.LeakSecrets(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	runtimetest.LeakScenario(t, rt)
	if f := runtimetest.FindLeak(logs.Bytes()); f != "" {
		t.Errorf("the secret (as %q) is in the logs:\n%s", f, logs.Bytes())
	}
	if !bytes.Contains(logs.Bytes(), []byte("[redacted]")) {
		t.Errorf("the log node's line was not logged, or not redacted:\n%s", logs.Bytes())
	}
}

// Issue 30, item 6: a split with two outgoing edges ran both paths per item
// and its aggregator kept one of them, dropping the other's result without
// a word. The runtime now refuses the definition, naming the split and its
// edges; joined by a merge (runtimetest's MergeInsideSplit) the paths run.
func TestSplitWithTwoPathsIsRefused(t *testing.T) {
	rt, err := embedded.New(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	def := `{"id":"twopaths","nodes":[{"id":"start","type":"trigger","trigger":true},
		{"id":"each","type":"split","parameters":{"input_array":"{{ $trigger.n }}"}},
		{"id":"sq","type":"set","parameters":{"values":{"v":"{{ $item * $item }}"}}},
		{"id":"neg","type":"set","parameters":{"values":{"v":"{{ -$item }}"}}},
		{"id":"agg","type":"aggregator"}],
		"edges":[{"id":"e1","src":"start","dst":"each"},{"id":"e2","src":"each","dst":"sq"},{"id":"e3","src":"each","dst":"neg"},
		{"id":"e4","src":"sq","dst":"agg"},{"id":"e5","src":"neg","dst":"agg"}]}`
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := rt.Run(ctx, []byte(def), map[string]any{"n": []any{1, 2, 3}}, nil)
	var ps workflow.Problems
	if !errors.As(err, &ps) {
		t.Fatalf("Run: completion %+v, err %v; want the definition refused", c, err)
	}
	if want := `nodes[1]: split "each" sends each item down 2 paths at once (edges "e2", "e3")`; !strings.HasPrefix(ps.Error()[strings.Index(ps.Error(), "nodes["):], want) {
		t.Fatalf("Run: %v\nwant a problem starting %s", err, want)
	}
}

// durable starts a runtime on a SQLite file of its own (Options.DB).
func durable(t *testing.T, opts embedded.Options) *embedded.Runtime {
	t.Helper()
	db, err := sqlitedb.Open(context.Background(), filepath.Join(t.TempDir(), "runtime.db"), sqlitedb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	opts.DB = db
	rt, err := embedded.New(opts)
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		rt.Close()
		db.Close()
	})
	return rt
}

// The durable runtime passes the suite the in-memory one does.
func TestDurableRuntimeConformance(t *testing.T) {
	runtimetest.Run(t, func(t *testing.T) runtimetest.Runtime { return durable(t, embedded.Options{}) })
}

func TestDurableRetrySpacing(t *testing.T) {
	rt := durable(t, embedded.Options{})
	runtimetest.RetrySpacing(t, rt)
}

func TestDurableHaltFromOutside(t *testing.T) {
	t.Parallel()
	rt := durable(t, embedded.Options{})
	runtimetest.HaltFromOutside(t, rt, rt.Engine)
}
