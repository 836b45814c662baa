package distributed_test

import (
	"log/slog"
	"testing"

	"github.com/rune-org/rune/distributed"
	"github.com/rune-org/rune/runtimetest"
)

// withSecrets starts a distributed runtime (RabbitMQ, Redis, a worker)
// resolving secrets.
func withSecrets(t *testing.T) runtimetest.NewWithSecrets {
	return func(secrets runtimetest.MapSecrets, log *slog.Logger) runtimetest.Runtime {
		return newRuntimeWith(t, distributed.Config{Secrets: secrets, Logger: log})
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
