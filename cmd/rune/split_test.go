package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestSplitWithoutAggregatorFinalContext: the branches of a split without
// aggregator leave nothing in the final context (docs/dsl.md, "split"); it
// held the context of whichever branch ended last, $item included.
func TestSplitWithoutAggregatorFinalContext(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "split.json")
	if err := os.WriteFile(path, []byte(`{"id": "s", "nodes": [
		{"id": "start", "type": "trigger", "trigger": true},
		{"id": "each", "type": "split", "parameters": {"input_array": "{{ $trigger.xs }}"}},
		{"id": "say", "type": "log", "parameters": {"message": "item {{ $item }}"}}],
		"edges": [{"id": "e1", "src": "start", "dst": "each"}, {"id": "e2", "src": "each", "dst": "say"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, nil, "run", path, "--input", `{"xs": [1, 2, 3]}`, "--json", "--quiet")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var comp struct {
		Status       string         `json:"status"`
		FinalContext map[string]any `json:"final_context"`
	}
	if err := json.Unmarshal([]byte(stdout), &comp); err != nil {
		t.Fatal(err)
	}
	if comp.Status != "completed" || len(comp.FinalContext) != 0 {
		t.Errorf("status %s, final context %v; want completed and {}", comp.Status, comp.FinalContext)
	}
}
