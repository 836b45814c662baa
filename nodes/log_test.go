package nodes

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"reflect"
	"testing"

	"github.com/rune-org/rune/workflow"
)

func TestLogCheck(t *testing.T) {
	wantProblems(t, checkNode(t, workflow.Node{ID: "n", Type: "log", Parameters: map[string]any{"level": "loud"}}), map[string]string{
		"nodes[1].parameters.message": "required",
		"nodes[1].parameters.level":   `unknown level "loud"`,
	})
	wantProblems(t, checkNode(t, workflow.Node{ID: "n", Type: "log", Parameters: map[string]any{"message": "hi {{ $x. }}"}}),
		map[string]string{"nodes[1].parameters.message": "column"})
}

func TestLogRun(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	reg := NewRegistry(Options{Logger: logger})
	env := map[string]any{"$trigger": map[string]any{"name": "ann", "items": []any{1.0}}}

	r := compileNode(t, reg, workflow.Node{ID: "n", Type: "log", Parameters: map[string]any{"message": "hello {{ $trigger.name }}"}})
	res, err := run(t, r, env)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res.Output, map[string]any{"message": "hello ann", "level": "info"}) {
		t.Errorf("output %v", res.Output)
	}
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("log line %q: %v", buf.String(), err)
	}
	for k, v := range map[string]any{"msg": "hello ann", "level": "INFO", "execution_id": "ex1", "node_id": "n"} {
		if line[k] != v {
			t.Errorf("log line %s = %v, want %v (line %s)", k, line[k], v, buf.String())
		}
	}

	buf.Reset()
	r = compileNode(t, reg, workflow.Node{ID: "n", Type: "log", Parameters: map[string]any{"message": "{{ $trigger.items }}", "level": "warn"}})
	res, err = run(t, r, env)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res.Output, map[string]any{"message": "[1]", "level": "warn"}) {
		t.Errorf("output %v", res.Output)
	}
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil || line["level"] != "WARN" {
		t.Errorf("log line %q", buf.String())
	}

	r = compileNode(t, reg, workflow.Node{ID: "n", Type: "log", Parameters: map[string]any{"message": "{{ $nope }}"}})
	_, err = run(t, r, env)
	nodeError(t, err, CodeExpression, false)
}
