package main

import (
	"context"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/rune-org/rune/internal/testinfra"
	"github.com/rune-org/rune/tracing"
)

// otlpReceiver is an in-process OTLP/HTTP trace receiver: it keeps every
// span's name by trace id.
type otlpReceiver struct {
	mu    sync.Mutex
	spans map[string][]string // trace id (hex) → span names
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req coltracepb.ExportTraceServiceRequest
	if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
		http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				id := hex.EncodeToString(s.TraceId)
				o.spans[id] = append(o.spans[id], s.Name)
			}
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	_, _ = w.Write(b)
}

// With OTEL_EXPORTER_OTLP_ENDPOINT set, rune worker exports a span per
// node run over OTLP, all in the execution's trace, and flushes them when
// it stops. (Not parallel: the OTLP exporter reads the process's
// environment.)
func TestWorkerExportsTraces(t *testing.T) {
	amqpURL, redisURL, prefix := testinfra.AMQPURL(t), testinfra.RedisURL(t), testinfra.Name(t)
	t.Cleanup(func() { cleanupPrefix(t, amqpURL, redisURL, prefix) })
	recv := &otlpReceiver{spans: map[string][]string{}}
	srv := httptest.NewServer(recv)
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	// Fusion on (the default): both nodes run in one hop, and still have a
	// span each.
	_, logs, stop := serveCommandEnv(t, os.Getenv, "worker", "--amqp", amqpURL, "--redis", redisURL, "--prefix", prefix,
		"--metrics-addr", "127.0.0.1:0", "--log-format", "json", "--concurrency", "4")
	wf := filepath.Join(t.TempDir(), "wf.json")
	if err := os.WriteFile(wf, []byte(`{"id": "traced", "nodes": [
	  {"id": "start", "type": "trigger", "trigger": true},
	  {"id": "one", "type": "set", "parameters": {"values": {"a": 1}}},
	  {"id": "two", "type": "set", "parameters": {"values": {"b": 2}}}],
	 "edges": [{"id": "e1", "src": "start", "dst": "one"}, {"id": "e2", "src": "one", "dst": "two"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, nil, "start", wf, "--wait", "--json", "--quiet", "--amqp", amqpURL, "--redis", redisURL, "--prefix", prefix)
	if code != exitOK {
		t.Fatalf("rune start --wait: exit %d\n%s\n%s", code, out, errOut)
	}
	var execID string
	if i := strings.Index(out, `"execution_id": "`); i >= 0 {
		execID = strings.SplitN(out[i+len(`"execution_id": "`):], `"`, 2)[0]
	}
	if c := stop(); c != exitOK {
		t.Fatalf("worker exit %d\n%s", c, logs.String())
	}
	root := tracing.Root(execID).TraceID().String()
	recv.mu.Lock()
	names := recv.spans[root]
	recv.mu.Unlock()
	if strings.Join(names, ",") != "node one,node two" && strings.Join(names, ",") != "node two,node one" {
		t.Fatalf("spans of execution %s's trace %s: %v (all: %v), want node one and node two", execID, root, names, recv.spans)
	}
}

// OTEL_TRACES_EXPORTER=none traces with no exporter: spans are made (they
// record) and dropped; with no endpoint and no such setting, or with
// OTEL_SDK_DISABLED=true, there is no Tracer at all.
func TestTracerNoExporter(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{map[string]string{"OTEL_TRACES_EXPORTER": "none"}, true},
		{map[string]string{}, false},
		{map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_SDK_DISABLED": "true"}, false},
	} {
		env := &cliEnv{stdout: io.Discard, stderr: io.Discard, getenv: func(k string) string { return c.env[k] }}
		tr, stop, err := tracer(context.Background(), env, "rune-worker", slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatalf("%v: %v", c.env, err)
		}
		_, span := tr.Start(context.Background(), tracing.Run{ExecutionID: "exec_1", NodeID: "n"})
		if span.IsRecording() != c.want {
			t.Errorf("%v: span recording %v, want %v", c.env, span.IsRecording(), c.want)
		}
		span.End()
		stop()
	}
}
