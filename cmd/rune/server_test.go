package main

import (
	"context"
	"encoding/json"
	"github.com/rune-org/rune/internal/testinfra"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// cli runs rune commands in this process with the variables vars.
type cli struct {
	t    *testing.T
	vars map[string]string
}

func (c *cli) run(args ...string) (code int, stdout, stderr string) {
	c.t.Helper()
	var out, errOut testinfra.Buffer
	env := &cliEnv{stdout: &out, stderr: &errOut, getenv: func(k string) string { return c.vars[k] }}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	code = runMain(ctx, env, args)
	return code, out.String(), errOut.String()
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startServer runs `rune server` (the embedded default) until the returned
// stop is called, and waits until it answers.
func startServer(t *testing.T, c *cli, addr, data string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs := &testinfra.Buffer{}
	env := &cliEnv{stdout: logs, stderr: logs, getenv: func(k string) string { return c.vars[k] }}
	done := make(chan int, 1)
	go func() { done <- runMain(ctx, env, []string{"server", "--addr", addr, "--data", data}) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		select {
		case code := <-done:
			t.Fatalf("rune server exited %d: %s", code, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("rune server not answering after 60 s: %s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("rune server exited %d: %s", code, logs.String())
		}
	}
}

// trigger posts a trigger payload and returns the execution id.
func trigger(t *testing.T, addr, token, workflow, input string) string {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+addr+"/v1/workflows/"+workflow+"/executions", strings.NewReader(input))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var x struct{ ID string }
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(body, &x) != nil {
		t.Fatalf("trigger: %d %s", resp.StatusCode, body)
	}
	return x.ID
}

// TestServerEmbeddedCLI drives the embedded default through the command
// line: rune server, rune token create, rune workflows push|list, rune
// executions list|get|follow|cancel, and a restart that keeps the history.
func TestServerEmbeddedCLI(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	addr := freeAddr(t)
	c := &cli{t: t, vars: map[string]string{"RUNE_API_TOKEN": "first-start-token", "RUNE_SERVER": "http://" + addr}}
	stop := startServer(t, c, addr, data)

	// token create prints the token alone; the server accepts it.
	code, tok, stderr := c.run("token", "create", "ci", "--data", data)
	tok = strings.TrimSuffix(tok, "\n")
	if code != 0 || !strings.HasPrefix(tok, "rune_") || strings.ContainsAny(tok, " \n") {
		t.Fatalf("token create: exit %d, stdout %q, stderr %s", code, tok, stderr)
	}
	if code, _, _ := c.run("token", "create", "ci", "--data", data); code != exitInvalid {
		t.Fatalf("a second token named ci: exit %d, want %d", code, exitInvalid)
	}
	c.vars["RUNE_TOKEN"] = tok

	hello := filepath.Join("..", "..", "examples", "hello.json")
	code, out, stderr := c.run("workflows", "push", hello)
	if code != 0 || !strings.Contains(out, "workflow hello version 1") {
		t.Fatalf("push: exit %d, %q %s", code, out, stderr)
	}
	code, out, _ = c.run("workflows", "push", hello)
	if code != 0 || !strings.Contains(out, "workflow hello unchanged (version 1)") {
		t.Fatalf("second push: exit %d, %q, want unchanged (version 1)", code, out)
	}
	// Many files, as examples/*.json: what is not a workflow is skipped with a note.
	examples, _ := filepath.Glob(filepath.Join("..", "..", "examples", "*.json"))
	code, out, stderr = c.run(append([]string{"workflows", "push"}, examples...)...)
	if code != 0 || !strings.Contains(out, "workflow hello unchanged (version 1)") || !strings.Contains(out, "workflow order_routing version 1") ||
		!strings.Contains(stderr, "hello.input.json: skipped: a trigger payload") || !strings.Contains(stderr, "welcome_series.credentials.json: skipped: credentials") {
		t.Fatalf("push examples/*.json: exit %d, stdout %q, stderr %s", code, out, stderr)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"id":"bad","nodes":[{"id":"start","type":"trigger","trigger":true},{"id":"x","type":"nosuch"}],"edges":[]}`), 0o600)
	code, _, stderr = c.run("workflows", "push", bad)
	if code != exitInvalid || !strings.Contains(stderr, "nodes[1]") {
		t.Fatalf("push of an invalid workflow: exit %d, stderr %s; want 2 with the problem's path", code, stderr)
	}
	code, out, _ = c.run("workflows", "list")
	if code != 0 || !strings.HasPrefix(out, "ID ") || !strings.Contains(out, "hello") {
		t.Fatalf("workflows list: exit %d %q, want a header and hello", code, out)
	}
	var wfs []struct {
		ID      string
		Version int
	}
	code, out, _ = c.run("workflows", "list", "--json")
	if code != 0 || json.Unmarshal([]byte(out), &wfs) != nil || !slices.ContainsFunc(wfs, func(w struct {
		ID      string
		Version int
	}) bool {
		return w.ID == "hello" && w.Version == 1
	}) {
		t.Fatalf("workflows list --json: exit %d %q", code, out)
	}

	id := trigger(t, addr, tok, "hello", `{"name":"Ada"}`)
	code, out, stderr = c.run("executions", "follow", id, "--json")
	var comp struct {
		ExecutionID  string         `json:"execution_id"`
		Status       string         `json:"status"`
		FinalContext map[string]any `json:"final_context"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &comp) != nil || comp.ExecutionID != id || comp.Status != "completed" {
		t.Fatalf("follow --json: exit %d, stdout %q, stderr %s", code, out, stderr)
	}
	if !strings.Contains(stderr, "greet") {
		t.Fatalf("follow showed no progress for node greet: %s", stderr)
	}
	code, out, _ = c.run("executions", "list", "--workflow", "hello")
	if code != 0 || !strings.HasPrefix(out, "ID ") || !strings.Contains(out, "STATUS") || !strings.Contains(out, id) || !strings.Contains(out, "completed") {
		t.Fatalf("executions list: exit %d %q, want a header and the execution", code, out)
	}
	var xs struct {
		Items []struct{ ID, Status string }
	}
	code, out, _ = c.run("executions", "list", "--workflow", "hello", "--json")
	if code != 0 || json.Unmarshal([]byte(out), &xs) != nil || len(xs.Items) != 1 || xs.Items[0].ID != id || xs.Items[0].Status != "completed" {
		t.Fatalf("executions list --json: exit %d %q", code, out)
	}
	// Re-run from a node, pause and resume the workflow (issue 34).
	if code, out, stderr := c.run("executions", "rerun", id, "--from", "greet"); code != 0 || !strings.Contains(out, "from node greet") {
		t.Fatalf("executions rerun --from: exit %d %q %s", code, out, stderr)
	}
	if code, out, stderr := c.run("executions", "rerun", id, "--from", "start"); code == 0 || !strings.Contains(stderr, "trigger") {
		t.Fatalf("executions rerun --from the trigger: exit %d %q %s, want a refusal", code, out, stderr)
	}
	if code, out, stderr := c.run("workflows", "pause", "hello"); code != 0 || !strings.Contains(out, "paused") {
		t.Fatalf("workflows pause: exit %d %q %s", code, out, stderr)
	}
	if code, out, stderr := c.run("workflows", "resume", "hello"); code != 0 || !strings.Contains(out, "resumed") {
		t.Fatalf("workflows resume: exit %d %q %s", code, out, stderr)
	}

	// Cancel a waiting execution; follow then exits 1 (halted).
	wait := filepath.Join(t.TempDir(), "wait.json")
	os.WriteFile(wait, []byte(`{"id":"waits","nodes":[{"id":"start","type":"trigger","trigger":true},{"id":"p","type":"wait","parameters":{"amount":600}}],"edges":[{"id":"e1","src":"start","dst":"p"}]}`), 0o600)
	if code, out, stderr := c.run("workflows", "push", wait); code != 0 {
		t.Fatalf("push: %d %s %s", code, out, stderr)
	}
	waiting := trigger(t, addr, tok, "waits", `{}`)
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, out, _ := c.run("executions", "get", waiting)
		if strings.Contains(out, `"status": "waiting"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not waiting after 60 s: %s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Pause and resume the execution (issue 34).
	if code, out, stderr := c.run("executions", "pause", waiting); code != 0 || !strings.Contains(out, "pause requested (status paused)") {
		t.Fatalf("executions pause: exit %d %q %s", code, out, stderr)
	}
	if _, out, _ := c.run("executions", "get", waiting); !strings.Contains(out, `"status": "paused"`) {
		t.Fatalf("executions get of a paused execution: %s", out)
	}
	if code, out, stderr := c.run("executions", "resume", waiting); code != 0 || !strings.Contains(out, "resume requested") {
		t.Fatalf("executions resume: exit %d %q %s", code, out, stderr)
	}
	if code, out, stderr := c.run("executions", "cancel", waiting); code != 0 || !strings.Contains(out, "cancel requested") {
		t.Fatalf("cancel: exit %d %q %s", code, out, stderr)
	}
	if code, out, _ := c.run("executions", "follow", waiting, "--quiet"); code != exitFailed || !strings.Contains(out, "halted") {
		t.Fatalf("follow of a cancelled execution: exit %d %q, want 1 and halted", code, out)
	}
	if code, _, _ := c.run("executions", "get", "exec_none"); code != exitFailed {
		t.Fatalf("get of an unknown execution: exit %d, want 1", code)
	}

	// A restart keeps the history; RUNE_API_TOKEN still works.
	stop()
	stop = startServer(t, c, addr, data)
	defer stop()
	code, out, _ = c.run("executions", "get", id)
	if code != 0 || !strings.Contains(out, `"status": "completed"`) || !strings.Contains(out, "Hello, Ada!") {
		t.Fatalf("after a restart: exit %d %s", code, out)
	}
	c.vars["RUNE_TOKEN"] = "first-start-token"
	if code, out, _ := c.run("executions", "get", waiting); code != 0 || !strings.Contains(out, `"status": "cancelled"`) {
		t.Fatalf("with RUNE_API_TOKEN after a restart: exit %d %s", code, out)
	}
	c.vars["RUNE_TOKEN"] = "wrong"
	if code, _, stderr := c.run("workflows", "list"); code != exitFailed || !strings.Contains(stderr, "401") {
		t.Fatalf("a wrong token: exit %d %s, want 1 and 401", code, stderr)
	}
}

// TestServerAfterTheDistributedSection: the README's Server section pasted
// after its Distributed one, RUNE_AMQP_URL and RUNE_REDIS_URL still set,
// starts the embedded default (it exited 2); the start-up lines say where
// the console is and how to get a token.
func TestServerAfterTheDistributedSection(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"RUNE_AMQP_URL": "amqp://guest:guest@127.0.0.1:1/", "RUNE_REDIS_URL": "redis://127.0.0.1:1/0"}
	logs := &testinfra.Buffer{}
	env := &cliEnv{stdout: logs, stderr: logs, getenv: func(k string) string { return vars[k] }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- runMain(ctx, env, []string{"server", "--addr", "127.0.0.1:0", "--data", t.TempDir()})
	}()
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(logs.String(), "sign in with a token"); time.Sleep(20 * time.Millisecond) {
		select {
		case code := <-done:
			t.Fatalf("rune server exited %d:\n%s", code, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no start-up lines after 60 s:\n%s", logs.String())
		}
	}
	out := logs.String()
	for _, want := range []string{"RUNE_AMQP_URL and RUNE_REDIS_URL are ignored without --postgres", "mode=embedded", "console and API at http://127.0.0.1:", "rune token create NAME"} {
		if !strings.Contains(out, want) {
			t.Errorf("start-up lines lack %q:\n%s", want, out)
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("exit %d:\n%s", code, logs.String())
	}
	// Given as flags, the URLs still ask for the distributed master, which
	// needs --postgres too.
	c := &cli{t: t, vars: nil}
	if code, _, stderr := c.run("server", "--amqp", "amqp://127.0.0.1:1/", "--redis", "redis://127.0.0.1:1/0"); code != exitInvalid || !strings.Contains(stderr, "needs --postgres") {
		t.Errorf("--amqp and --redis without --postgres: exit %d, %s", code, stderr)
	}
}
