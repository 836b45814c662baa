package embedded_test

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/rune-org/rune/embedded"
	"github.com/rune-org/rune/internal/sqlitedb"
	"github.com/rune-org/rune/internal/testinfra"
	"github.com/rune-org/rune/runtimetest"
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
