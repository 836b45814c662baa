package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/rune-org/rune/message"
)

// A node that fails under the halt strategy (examples/halt_on_error.json)
// ends the execution failed, not halted: `rune run` says so, names the
// node, and exits 1; --json prints the failed CompletionMessage.
func TestRunNodeFailureIsFailed(t *testing.T) {
	t.Parallel()
	args := []string{"run", "../../examples/halt_on_error.json", "--input", "@../../examples/halt_on_error.input.json", "--quiet"}
	code, out, errOut := runCLI(t, nil, args...)
	if code != exitFailed || !strings.Contains(out, " failed in ") || !strings.Contains(out, "stopped by node check_stock: EXPRESSION") {
		t.Fatalf("rune run: exit %d, stdout %q, stderr %q; want 1, failed, stopped by node check_stock", code, out, errOut)
	}
	code, out, _ = runCLI(t, nil, append(args, "--json")...)
	var c message.Completion
	if err := json.Unmarshal([]byte(out), &c); err != nil || code != exitFailed || c.Status != message.CompletionFailed ||
		c.FailureReason == nil || c.FailureReason.NodeID != "check_stock" {
		t.Fatalf("rune run --json: exit %d, %s (%v); want 1 and a failed completion by check_stock", code, out, err)
	}
}
