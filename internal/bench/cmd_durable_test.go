package bench

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// The embedded-server bench wakes the server's dispatcher on each
// execution it enqueues, as a trigger through the API does: with a poll of
// an hour, only the wakes can start them.
func TestEmbeddedServerBenchWakesDispatcher(t *testing.T) {
	t.Parallel()
	var stdout strings.Builder
	env := &Env{Stdout: &stdout, Stderr: io.Discard, Getenv: func(string) string { return "" }, Logger: slog.New(slog.DiscardHandler)}
	// A deadline against a hang; it takes well under a second unloaded.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n = 20
	err := benchEmbeddedServer(ctx, env, embeddedServerBench{executions: n, inflight: 4, nodes: 2, chain: "set",
		data: t.TempDir(), asJSON: true, dispatchPoll: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var res EmbeddedServerResult
	if err := json.Unmarshal([]byte(stdout.String()), &res); err != nil {
		t.Fatalf("result: %v in %q", err, stdout.String())
	}
	if res.Throughput == nil || res.Throughput.Executions != n || res.Throughput.Failed != 0 || res.Throughput.NodeExecutions != 2*n {
		t.Fatalf("result %+v: want %d executions of 2 nodes, none failed", res.Throughput, n)
	}
}
