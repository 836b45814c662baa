package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestTokenRolesCLI: rune token create --role --workflows --expires makes a
// token the server holds to its role; rune token list shows role, scope and
// expiry; rune audit shows an admin what changed and who was refused.
func TestTokenRolesCLI(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	addr := freeAddr(t)
	c := &cli{t: t, vars: map[string]string{"RUNE_API_TOKEN": "roles-admin-token", "RUNE_SERVER": "http://" + addr}}
	stop := startServer(t, c, addr, data)
	defer stop()

	code, tok, stderr := c.run("token", "create", "reader", "--role", "viewer", "--workflows", "hello*", "--expires", "30d", "--data", data)
	if code != 0 {
		t.Fatalf("token create --role viewer: exit %d, %s", code, stderr)
	}
	viewerTok := strings.TrimSpace(tok)
	if code, _, stderr := c.run("token", "create", "x", "--role", "root", "--data", data); code != exitInvalid || !strings.Contains(stderr, "root") {
		t.Fatalf("token create --role root: exit %d, %s; want 2 naming the role", code, stderr)
	}
	if code, _, stderr := c.run("token", "create", "y", "--expires", "soon", "--data", data); code != exitInvalid || !strings.Contains(stderr, "--expires") {
		t.Fatalf("token create --expires soon: exit %d, %s; want 2 naming the flag", code, stderr)
	}
	code, out, _ := c.run("token", "list", "--data", data)
	if code != 0 || !strings.Contains(out, "reader") || !strings.Contains(out, "viewer") || !strings.Contains(out, "hello*") || !strings.Contains(out, "expires ") {
		t.Fatalf("token list: exit %d %q, want reader's role, scope and expiry", code, out)
	}
	if !strings.HasPrefix(out, "NAME ") {
		t.Fatalf("token list: %q, want a header first", out)
	}
	code, out, _ = c.run("token", "list", "--json", "--data", data)
	var toks []struct {
		Name, Role, Hash string
		Workflows        []string
	}
	if code != 0 || json.Unmarshal([]byte(out), &toks) != nil || !slices.ContainsFunc(toks, func(tk struct {
		Name, Role, Hash string
		Workflows        []string
	}) bool {
		return tk.Name == "reader" && tk.Role == "viewer" && tk.Hash == "" && len(tk.Workflows) == 1
	}) {
		t.Fatalf("token list --json: exit %d %q, want reader, a viewer scoped to one pattern, no hash", code, out)
	}

	hello := filepath.Join("..", "..", "examples", "hello.json")
	c.vars["RUNE_TOKEN"] = "roles-admin-token"
	if code, _, stderr := c.run("workflows", "push", hello); code != 0 {
		t.Fatalf("push as admin: exit %d %s", code, stderr)
	}
	c.vars["RUNE_TOKEN"] = viewerTok
	code, _, stderr = c.run("workflows", "push", hello)
	if code == 0 || !strings.Contains(stderr, "forbidden") && !strings.Contains(stderr, "may not") {
		t.Fatalf("push as a viewer: exit %d %s, want refused", code, stderr)
	}
	if code, _, _ := c.run("audit"); code == 0 {
		t.Fatalf("rune audit as a viewer: exit 0, want refused")
	}
	c.vars["RUNE_TOKEN"] = "roles-admin-token"
	code, out, stderr = c.run("audit")
	if code != 0 {
		t.Fatalf("rune audit: exit %d %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) > 0 && strings.HasPrefix(lines[0], "AT ") { // the table's header
		lines = lines[1:]
	} else {
		t.Fatalf("rune audit:\n%s\nwant a header first", out)
	}
	if len(lines) != 2 || !strings.Contains(lines[0], "reader") || !strings.Contains(lines[0], "403") ||
		!strings.Contains(lines[1], "RUNE_API_TOKEN") || !strings.Contains(lines[1], "/v1/workflows") {
		t.Fatalf("rune audit:\n%s\nwant the viewer's refused push, then the admin's push", out)
	}
}
