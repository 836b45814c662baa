package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTemplatesCLI drives `rune templates` against the embedded server:
// put stores versions 1 and 2, list and versions show them, get shows one,
// preview renders with --data and the layout, a Liquid error names the
// field, delete hides the template.
func TestTemplatesCLI(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	addr := freeAddr(t)
	c := &cli{t: t, vars: map[string]string{"RUNE_API_TOKEN": "cli-token", "RUNE_TOKEN": "cli-token", "RUNE_SERVER": "http://" + addr}}
	stop := startServer(t, c, addr, data)
	defer stop()
	file := func(name, body string) string {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, put := range []struct{ name, body, want string }{
		{"base", `{"html": "<main>{{ content }}</main>"}`, "template base: version 1"},
		{"welcome", `{"subject": "Hi {{ $trigger.name }}", "html": "<p>v1</p>", "layout": "base"}`, "template welcome: version 1"},
		{"welcome", `{"subject": "Hello {{ $trigger.name }}", "html": "<p>v2 {{ $trigger.name }}</p>", "layout": "base"}`, "template welcome: version 2"},
	} {
		if code, out, stderr := c.run("templates", "put", put.name, file(put.name+".json", put.body)); code != 0 || strings.TrimSpace(out) != put.want {
			t.Fatalf("templates put %s: exit %d %q %s, want %q", put.name, code, out, stderr, put.want)
		}
	}
	if code, out, _ := c.run("templates", "list"); code != 0 || !strings.HasPrefix(out, "NAME ") || !strings.Contains(out, "welcome") || !strings.Contains(out, "Hello {{ $trigger.name }}") {
		t.Fatalf("templates list: exit %d %q", code, out)
	}
	var versions []struct{ Version int }
	if code, out, _ := c.run("templates", "versions", "welcome", "--json"); code != 0 || json.Unmarshal([]byte(out), &versions) != nil || len(versions) != 2 || versions[0].Version != 2 {
		t.Fatalf("templates versions --json: exit %d %q", code, out)
	}
	var got struct {
		Version int
		HTML    string
	}
	if code, out, _ := c.run("templates", "get", "welcome", "--version", "1"); code != 0 || json.Unmarshal([]byte(out), &got) != nil || got.Version != 1 || got.HTML != "<p>v1</p>" {
		t.Fatalf("templates get --version 1: exit %d %q", code, out)
	}
	code, out, stderr := c.run("templates", "preview", "welcome", "--data", `{"$trigger": {"name": "Ada"}}`)
	if code != 0 || !strings.Contains(out, "template welcome version 2, in layout base@1") || !strings.Contains(out, "subject:\nHello Ada") ||
		!strings.Contains(out, "<main><p>v2 Ada</p></main>") {
		t.Fatalf("templates preview: exit %d %q %s", code, out, stderr)
	}
	if code, _, stderr := c.run("templates", "put", "welcome", file("bad.json", `{"text": "{% if $x %}"}`)); code == 0 || !strings.Contains(stderr, "text") || !strings.Contains(stderr, "line 1, column 1") {
		t.Fatalf("templates put (bad Liquid): exit %d %s, want the field and position", code, stderr)
	}
	if code, _, _ := c.run("templates", "delete", "welcome"); code != 0 {
		t.Fatalf("templates delete: exit %d", code)
	}
	if code, _, stderr := c.run("templates", "get", "welcome"); code == 0 || !strings.Contains(stderr, "does not exist") {
		t.Fatalf("templates get (deleted): exit %d %s", code, stderr)
	}
}

// `rune run` has no template store: an email node naming a template fails
// with TEMPLATE_NOT_FOUND saying so, before any connection is made.
func TestRunTemplateWithoutStore(t *testing.T) {
	t.Parallel()
	wf := filepath.Join(t.TempDir(), "wf.json")
	def := `{"id":"tpl","nodes":[{"id":"start","type":"trigger","trigger":true},
 {"id":"mail","type":"email","credentials":{"ref":"mail"},"parameters":{"to":"a@example.com","template":"welcome"}}],
 "edges":[{"id":"e1","src":"start","dst":"mail"}]}`
	if err := os.WriteFile(wf, []byte(def), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runCLI(t, nil, "validate", wf); code != 0 {
		t.Fatalf("rune validate: exit %d %s %s, want a template to stand for subject and body", code, out, errOut)
	}
	code, out, errOut := runCLI(t, nil, "run", wf, "--quiet")
	if code != exitFailed || !strings.Contains(out+errOut, "TEMPLATE_NOT_FOUND") {
		t.Fatalf("rune run: exit %d, stdout %q, stderr %q; want 1 and TEMPLATE_NOT_FOUND", code, out, errOut)
	}
	code, out, _ = runCLI(t, nil, "run", wf, "--json")
	if code != exitFailed || !strings.Contains(out, "no template store") {
		t.Fatalf("rune run --json: exit %d %s, want the reason", code, out)
	}
}
