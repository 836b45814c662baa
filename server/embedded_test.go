package server_test

import (
	"context"
	"github.com/rune-org/rune/internal/testinfra"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/rune-org/rune/embedded"
	"github.com/rune-org/rune/secrets"
	"github.com/rune-org/rune/server"
	"github.com/rune-org/rune/store/sqlite"
	"github.com/rune-org/rune/tracing"
)

// embeddedTarget is the embedded default in this process: SQLite in a
// temporary directory, the in-process runtime (worker and scheduler), the
// server's API on an httptest server. Logs at debug level go to a buffer
// the credential test searches.
func embeddedTarget(t *testing.T) *target { return embeddedTargetTraced(t, nil) }

// embeddedTargetTraced is embeddedTarget with tr making the spans of the
// server's dispatches and of the runtime's node runs.
func embeddedTargetTraced(t *testing.T, tr *tracing.Tracer) *target {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "rune.db"))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := secrets.LoadKeys("", filepath.Join(t.TempDir(), "secret.key"), true)
	if err != nil {
		t.Fatal(err)
	}
	logs := &testinfra.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rt, err := embedded.New(embedded.Options{Logger: log, ConsumeEvents: true, Tracer: tr, Secrets: secrets.Store{Store: st, Keys: keys}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.New(server.Config{Store: st, Broker: rt.Broker, Engine: rt.Engine, Keys: keys, Logger: log, Tracer: tr})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server run: %v", err)
		}
		rt.Close()
		st.Close()
	})
	return &target{url: hs.URL, token: newToken(t, st, "suite"), store: st, output: logs.String}
}

func TestAPIEmbedded(t *testing.T) {
	apiSuite(t, embeddedTarget(t))
}

func readExample(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
