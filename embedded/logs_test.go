package embedded_test

import (
	"bufio"
	"context"
	"encoding/json"
	"github.com/rune-org/rune/internal/testinfra"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rune-org/rune/embedded"
	"github.com/rune-org/rune/message"
)

// Every log line of a node run carries the execution id, the node id and,
// on a split's branch, the lineage; the log node's lines too, and the
// engine's own (a node that panics).
func TestLogLinesCarryRunAttributes(t *testing.T) {
	t.Parallel()
	var buf testinfra.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rt, err := embedded.New(embedded.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := rt.Run(ctx, []byte(`{"id": "logged", "nodes": [
	  {"id": "start", "type": "trigger", "trigger": true},
	  {"id": "each", "type": "split", "parameters": {"input_array": "{{ $trigger.xs }}"}},
	  {"id": "say", "type": "log", "parameters": {"message": "item {{ $item }}"}},
	  {"id": "all", "type": "aggregator"},
	  {"id": "done", "type": "log", "parameters": {"message": "all done", "level": "warn"}}],
	 "edges": [{"id": "e1", "src": "start", "dst": "each"}, {"id": "e2", "src": "each", "dst": "say"},
	  {"id": "e3", "src": "say", "dst": "all"}, {"id": "e4", "src": "all", "dst": "done"}]}`),
		map[string]any{"xs": []any{"a", "b"}}, nil)
	if err != nil || c.Status != message.CompletionCompleted {
		t.Fatalf("run: %v %v", c, err)
	}
	rt.Close() // every line is written
	out := string(buf.Bytes())
	seen := map[string]map[string]any{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("not a JSON line: %q", sc.Text())
		}
		if msg, _ := l["msg"].(string); strings.HasPrefix(msg, "item ") || msg == "all done" {
			seen[msg] = l
		}
	}
	want := map[string]map[string]any{
		"item a":   {"node_id": "say", "lineage": "each[0]", "level": "INFO"},
		"item b":   {"node_id": "say", "lineage": "each[1]", "level": "INFO"},
		"all done": {"node_id": "done", "lineage": nil, "level": "WARN"},
	}
	for msg, attrs := range want {
		l, ok := seen[msg]
		if !ok {
			t.Errorf("no log line %q in:\n%s", msg, out)
			continue
		}
		if l["execution_id"] != c.ExecutionID || l["workflow_id"] != "logged" {
			t.Errorf("line %q: execution_id %v workflow_id %v, want %s logged", msg, l["execution_id"], l["workflow_id"], c.ExecutionID)
		}
		for k, v := range attrs {
			if l[k] != v {
				t.Errorf("line %q: %s = %v, want %v", msg, k, l[k], v)
			}
		}
	}
}

// fixedSecrets resolves every credential reference to one token.
type fixedSecrets string

func (f fixedSecrets) Resolve(context.Context, string) (map[string]string, error) {
	return map[string]string{"token": string(f)}, nil
}

// A credential's value appears in no log line (at debug level), status or
// completion, even when the node using it fails and is retried.
func TestNoSecretInLogsOrStatuses(t *testing.T) {
	t.Parallel()
	const secret = "tok-9f2c-SECRET-value"
	var authorized atomic.Int64 // the secret was really sent
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer "+secret {
			authorized.Add(1)
		}
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
	}))
	defer svc.Close()
	var buf testinfra.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rt, err := embedded.New(embedded.Options{Logger: log, Secrets: fixedSecrets(secret)})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var seen []string
	var mu sync.Mutex
	c, err := rt.Run(ctx, []byte(`{"id": "secretive", "nodes": [
	  {"id": "start", "type": "trigger", "trigger": true},
	  {"id": "call", "type": "http", "parameters": {"method": "GET", "url": "`+svc.URL+`/x"},
	   "credentials": {"ref": "api"}, "retry": {"max_attempts": 2, "initial_delay": "10ms"}}],
	 "edges": [{"id": "e1", "src": "start", "dst": "call"}]}`), map[string]any{}, func(s *message.NodeStatus) {
		b, _ := json.Marshal(s)
		mu.Lock()
		seen = append(seen, string(b))
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	rt.Close()
	comp, _ := json.Marshal(c)
	logs := string(buf.Bytes())
	mu.Lock()
	statuses := strings.Join(seen, "\n")
	mu.Unlock()
	if n := authorized.Load(); n != 2 {
		t.Fatalf("the service got the credential %d times, want 2 (two attempts)", n)
	}
	if !strings.Contains(statuses, `"status":"retrying"`) || c.Status != message.CompletionFailed {
		t.Fatalf("want a retry and a failed completion; statuses:\n%s\ncompletion %s", statuses, comp)
	}
	for what, text := range map[string]string{"logs": logs, "statuses": statuses, "completion": string(comp)} {
		if strings.Contains(text, secret) {
			t.Errorf("the secret appears in the %s:\n%s", what, text)
		}
	}
}
