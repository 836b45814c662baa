package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidateManyFiles: each file gets its verdict, one bad file does not
// stop the others, and the exit status is 2 when any is invalid.
func TestValidateManyFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hello := "../../examples/hello.json"
	// $nosuch passed validation and failed only when the node ran.
	ref := write("ref.json", `{"id": "ref", "nodes": [
		{"id": "start", "type": "trigger", "trigger": true},
		{"id": "say", "type": "log", "parameters": {"message": "hi {{ $nosuch.x }}"}}],
		"edges": [{"id": "e1", "src": "start", "dst": "say"}]}`)
	notJSON := write("broken.json", `{"id": `)
	code, stdout, stderr := runCLI(t, nil, "validate", hello, ref, filepath.Join(dir, "missing.json"), notJSON, "../../examples/order_routing.json")
	if code != exitInvalid {
		t.Errorf("exit %d, want 2", code)
	}
	for _, want := range []string{hello + ": valid", "order_routing.json: valid"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	for _, want := range []string{
		ref + ": 1 problem(s):\n  nodes[1].parameters.message: $nosuch: no node \"nosuch\" in this workflow",
		"missing.json", "not valid JSON: line 1",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if code, _, stderr := runCLI(t, nil, "validate"); code != exitInvalid || !strings.Contains(stderr, "want one or more workflow files") {
		t.Errorf("no file: exit %d, %s", code, stderr)
	}
}
