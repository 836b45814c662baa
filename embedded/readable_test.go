package embedded_test

import (
	"log/slog"
	"testing"

	"github.com/rune-org/rune/embedded"
	"github.com/rune-org/rune/runtimetest"
)

// withSecrets starts an in-memory runtime resolving secrets.
func withSecrets(t *testing.T) runtimetest.NewWithSecrets {
	return func(secrets runtimetest.MapSecrets, log *slog.Logger) runtimetest.Runtime {
		rt, err := embedded.New(embedded.Options{Secrets: secrets, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rt.Close() })
		return rt
	}
}

// Issue 36, item 9: outputs and errors show a credential's host, port,
// type and from address, and never its secrets.
func TestNotificationOutputsAreReadable(t *testing.T) {
	t.Parallel()
	runtimetest.ReadableOutputs(t, withSecrets(t))
}

// Issue 36, item 10: "retry": {"on": "any"}.
func TestRetryOnAnyFailure(t *testing.T) {
	t.Parallel()
	runtimetest.RetryOnAny(t, withSecrets(t))
}
