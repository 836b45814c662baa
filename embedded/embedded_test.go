package embedded_test

import (
	"bytes"
	"github.com/rune-org/rune/internal/testinfra"
	"log/slog"
	"testing"

	"github.com/rune-org/rune/embedded"
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
