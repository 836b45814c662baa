package embedded_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rune-org/rune/embedded"
	"github.com/rune-org/rune/message"
)

// lockedBuffer is a bytes.Buffer safe for concurrent writers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// Every log line of a node run carries the execution id, the node id and,
// on a split's branch, the lineage; the log node's lines too, and the
// engine's own (a node that panics).
func TestLogLinesCarryRunAttributes(t *testing.T) {
	t.Parallel()
	var buf lockedBuffer
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
	buf.mu.Lock()
	out := buf.b.String()
	buf.mu.Unlock()
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
