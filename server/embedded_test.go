package server_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/rune-org/rune/embedded"
	"github.com/rune-org/rune/internal/testinfra"
	"github.com/rune-org/rune/nodes"
	"github.com/rune-org/rune/secrets"
	"github.com/rune-org/rune/server"
	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/store/sqlite"
	"github.com/rune-org/rune/subscribers"
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
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "rune.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() }) // after the server's clean-up, registered later
	return runTarget(t, st, "suite", func(c *server.Config) { c.Tracer = tr })
}

// runTarget is a server on st with the in-process runtime (worker and
// scheduler), its API on an httptest server, and a token named token; tweak
// adjusts the server's config. Logs at debug level go to a buffer the
// credential tests search. Everything stops when the test ends.
func runTarget(t testing.TB, st store.Store, token string, tweak func(*server.Config)) *target {
	t.Helper()
	_, tg := runServer(t, st, token, tweak)
	return tg
}

// runServer is runTarget that returns the server too.
func runServer(t testing.TB, st store.Store, token string, tweak func(*server.Config)) (*server.Server, *target) {
	t.Helper()
	keys, err := secrets.LoadKeys("", filepath.Join(t.TempDir(), "secret.key"), true)
	if err != nil {
		t.Fatal(err)
	}
	logs := &testinfra.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := server.Config{Store: st, Keys: keys, Logger: log}
	tweak(&cfg)
	// The API's address is known before the runtime starts: the email
	// nodes' unsubscribe links point at it (issue 36).
	hs := httptest.NewUnstartedServer(nil)
	rt, err := embedded.New(embedded.Options{Logger: log, ConsumeEvents: true, Tracer: cfg.Tracer, Secrets: secrets.Store{Store: st, Keys: keys},
		Nodes: nodes.Options{Subscribers: subscribers.Source{Store: st, Keys: keys, PublicURL: "http://" + hs.Listener.Addr().String()}, Templates: st}})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Broker, cfg.Engine = rt.Broker, rt.Engine
	s, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	hs.Config.Handler = s.Handler()
	hs.Start()
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server run: %v", err)
		}
		rt.Close()
	})
	return s, &target{url: hs.URL, token: newToken(t, st, token), store: st, output: logs.String}
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
