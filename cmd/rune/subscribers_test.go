package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSubscribersCLI drives `rune subscribers` against the embedded
// server: an import reports a bad line by its line number in the file and
// writes the others; get shows one; delete removes it.
func TestSubscribersCLI(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	addr := freeAddr(t)
	c := &cli{t: t, vars: map[string]string{"RUNE_API_TOKEN": "cli-token", "RUNE_TOKEN": "cli-token", "RUNE_SERVER": "http://" + addr}}
	stop := startServer(t, c, addr, data)
	defer stop()
	file := filepath.Join(t.TempDir(), "subs.ndjson")
	rows := "{\"id\": \"u1\", \"email\": \"ann@example.com\", \"data\": {\"first_name\": \"Ann\"}}\n\n{\"id\": \"u2\", \"timezone\": \"Mars/Olympus\"}\n{\"id\": \"u3\"}\n"
	if err := os.WriteFile(file, []byte(rows), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := c.run("subscribers", "import", file)
	if code == 0 || !strings.Contains(out, "2 created, 0 replaced, 1 refused") || !strings.Contains(stderr, file+":3: timezone:") {
		t.Fatalf("import: exit %d %q %q", code, out, stderr)
	}
	code, out, _ = c.run("subscribers", "get", "u1")
	if code != 0 || !strings.Contains(out, `"first_name": "Ann"`) {
		t.Fatalf("get: exit %d %s", code, out)
	}
	if code, out, _ = c.run("subscribers", "delete", "u1"); code != 0 {
		t.Fatalf("delete: exit %d %s", code, out)
	}
	if code, _, stderr = c.run("subscribers", "get", "u1"); code == 0 || !strings.Contains(stderr, "does not exist") {
		t.Fatalf("get after delete: exit %d %s", code, stderr)
	}
}
