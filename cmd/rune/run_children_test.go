package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestRunWorkflowsDir: `rune run --workflows DIR` starts the example's
// child from its file and completes with the child's final context;
// without the directory the node fails naming the flag.
func TestRunWorkflowsDir(t *testing.T) {
	args := []string{"run", "../../examples/parent_calls_child.json", "--input", "@../../examples/parent_calls_child.input.json", "--json", "--quiet"}
	code, stdout, stderr := runCLI(t, nil, append(args, "--workflows", "../../examples")...)
	if code != 0 {
		t.Fatalf("exit %d: %s %s", code, stdout, stderr)
	}
	var comp struct {
		Status       string                    `json:"status"`
		FinalContext map[string]map[string]any `json:"final_context"`
	}
	if err := json.Unmarshal([]byte(stdout), &comp); err != nil {
		t.Fatal(err)
	}
	if comp.Status != "completed" || comp.FinalContext["$reply"]["total"] != 37.5 || comp.FinalContext["$quote"]["status"] != "completed" {
		t.Fatalf("completion %s, want completed with $reply.total 37.5 from the child", stdout)
	}
	code, stdout, _ = runCLI(t, nil, args...)
	if code != exitFailed || !strings.Contains(stdout, "UNSUPPORTED_NODE") || !strings.Contains(stdout, "--workflows") {
		t.Fatalf("without --workflows: exit %d, %s; want failed with UNSUPPORTED_NODE naming --workflows", code, stdout)
	}
}
