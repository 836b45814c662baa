package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestHooksAndSchedulesCLI drives `rune hooks` and `rune schedules` against
// the embedded server: a signed hook is created (secrets shown once),
// listed, disabled (its URL then 404), enabled and rotated; a schedule is
// created with its next fire times, paused, resumed and deleted.
func TestHooksAndSchedulesCLI(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	addr := freeAddr(t)
	c := &cli{t: t, vars: map[string]string{"RUNE_API_TOKEN": "cli-token", "RUNE_TOKEN": "cli-token", "RUNE_SERVER": "http://" + addr}}
	stop := startServer(t, c, addr, data)
	defer stop()
	if code, out, stderr := c.run("workflows", "push", filepath.Join("..", "..", "examples", "hello.json")); code != 0 {
		t.Fatalf("push: %d %s %s", code, out, stderr)
	}
	code, out, stderr := c.run("hooks", "create", "hello", "--name", "gh", "--signed", "--settings", `{"headers":["X-GitHub-Event"]}`)
	var hk struct {
		ID, URL, Secret string
		SigningSecret   string `json:"signing_secret"`
		Headers         []string
	}
	if code != 0 || json.Unmarshal([]byte(out), &hk) != nil || hk.SigningSecret == "" || !strings.HasPrefix(hk.URL, "/v1/hooks/rh_") || len(hk.Headers) != 1 {
		t.Fatalf("hooks create: exit %d %s %s", code, out, stderr)
	}
	code, out, _ = c.run("hooks", "list", "hello")
	if code != 0 || !strings.Contains(out, hk.ID) || !strings.Contains(out, "enabled") || strings.Contains(out, hk.Secret) {
		t.Fatalf("hooks list: exit %d %q", code, out)
	}
	code, out, _ = c.run("hooks", "list", "hello", "--json")
	var hooks []struct{ ID string }
	if code != 0 || json.Unmarshal([]byte(out), &hooks) != nil || len(hooks) != 1 || hooks[0].ID != hk.ID {
		t.Fatalf("hooks list --json: exit %d %q", code, out)
	}
	post := func(url string) int {
		resp, err := http.Post("http://"+addr+url, "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code, out, _ = c.run("hooks", "disable", "hello", hk.ID); code != 0 || !strings.Contains(out, `"disabled": true`) {
		t.Fatalf("hooks disable: exit %d %s", code, out)
	}
	if s := post(hk.URL); s != http.StatusNotFound {
		t.Fatalf("disabled hook answered %d, want 404", s)
	}
	if code, out, _ = c.run("hooks", "enable", "hello", hk.ID); code != 0 || !strings.Contains(out, `"disabled": false`) || !strings.Contains(out, `"signed": true`) {
		t.Fatalf("hooks enable: exit %d %s (the signing secret must be kept)", code, out)
	}
	if s := post(hk.URL); s != http.StatusUnauthorized {
		t.Fatalf("unsigned delivery to the enabled hook answered %d, want 401", s)
	}
	code, out, _ = c.run("hooks", "rotate", "hello", hk.ID)
	if code != 0 || !strings.Contains(out, "/v1/hooks/rh_") || strings.Contains(out, hk.Secret) {
		t.Fatalf("hooks rotate: exit %d %s", code, out)
	}
	if s := post(hk.URL); s != http.StatusNotFound {
		t.Fatalf("old URL after rotate answered %d, want 404", s)
	}

	code, out, stderr = c.run("schedules", "create", "hello", "--cron", "0 9 * * 1-5", "--timezone", "Europe/Paris",
		"--policy", "catch_up", "--input", `{"name":"Ada"}`, "--name", "weekday mornings")
	var sc struct {
		ID            string
		NextFireTimes []string `json:"next_fire_times"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &sc) != nil || len(sc.NextFireTimes) != 5 {
		t.Fatalf("schedules create: exit %d %s %s", code, out, stderr)
	}
	if code, out, _ = c.run("schedules", "pause", "hello", sc.ID); code != 0 || !strings.Contains(out, `"paused": true`) {
		t.Fatalf("schedules pause: exit %d %s", code, out)
	}
	if code, out, _ = c.run("schedules", "list", "hello"); code != 0 || !strings.HasPrefix(out, "ID ") || !strings.Contains(out, sc.ID) || !strings.Contains(out, "paused") {
		t.Fatalf("schedules list: exit %d %q, want a header and the schedule", code, out)
	}
	var schedules []struct {
		ID     string
		Paused bool
	}
	if code, out, _ = c.run("schedules", "list", "hello", "--json"); code != 0 || json.Unmarshal([]byte(out), &schedules) != nil || len(schedules) != 1 || !schedules[0].Paused {
		t.Fatalf("schedules list --json: exit %d %q", code, out)
	}
	if code, out, _ = c.run("schedules", "resume", "hello", sc.ID); code != 0 || !strings.Contains(out, `"paused": false`) {
		t.Fatalf("schedules resume: exit %d %s", code, out)
	}
	if code, _, stderr = c.run("schedules", "create", "hello", "--cron", "* * *"); code == 0 || !strings.Contains(stderr, "field cron") {
		t.Fatalf("invalid cron: exit %d %s", code, stderr)
	}
	if code, _, _ = c.run("schedules", "delete", "hello", sc.ID); code != 0 {
		t.Fatalf("schedules delete: exit %d", code)
	}
	if code, _, _ = c.run("schedules", "get", "hello", sc.ID); code == 0 {
		t.Fatal("schedules get after delete succeeded")
	}
}

// TestTriggerCommandsUsage: `rune hooks` and `rune schedules` refuse an
// unknown subcommand or the wrong arguments with exit 2 and the usage
// wanted, before any request (no server runs here).
func TestTriggerCommandsUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"hooks", "frob", "hello"}, `unknown subcommand "frob": want create, list, get, update, enable, disable, rotate or delete`},
		{[]string{"schedules", "frob", "hello"}, `unknown subcommand "frob": want create, list, get, pause, resume or delete`},
		{[]string{"schedules", "list"}, "want a subcommand and a workflow id (rune schedules --help)"},
		{[]string{"hooks", "get", "hello"}, "get: want WORKFLOW HOOK"},
		{[]string{"hooks", "create", "hello", "extra"}, "create: want WORKFLOW"},
		{[]string{"schedules", "pause", "hello", "a", "b"}, "pause: want WORKFLOW ID"},
		{[]string{"hooks", "update", "hello", "h1"}, "update: want --settings JSON"},
		{[]string{"schedules", "create", "hello", "--input", "{"}, "--input: not valid JSON"},
	} {
		code, _, stderr := runCLI(t, map[string]string{"RUNE_SERVER": "http://127.0.0.1:1"}, tc.args...)
		if code != exitInvalid || !strings.Contains(stderr, tc.want) {
			t.Errorf("rune %v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, exitInvalid, tc.want)
		}
	}
}
