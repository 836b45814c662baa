package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rune-org/rune/internal/catcher"
	"github.com/rune-org/rune/message"
)

// runCLI runs the command line in process with the environment env.
func runCLI(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	e := &cliEnv{stdout: &out, stderr: &errOut, getenv: func(k string) string { return env[k] }}
	// A deadline against a hang, sized for a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code = runMain(ctx, e, args)
	return code, out.String(), errOut.String()
}

// welcomeSeries writes the example with a short delay, its input and
// credentials for the given catchers, and returns their paths.
func welcomeSeries(t *testing.T, smtpPort int, smsURL string) (wf, input, creds string) {
	t.Helper()
	dir := t.TempDir()
	raw, err := os.ReadFile("../../examples/welcome_series.json")
	if err != nil {
		t.Fatal(err)
	}
	raw = bytes.Replace(raw, []byte(`"duration": "2s"`), []byte(`"duration": "50ms"`), 1)
	wf = filepath.Join(dir, "wf.json")
	creds = filepath.Join(dir, "creds.json")
	write := func(path, text string) {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(wf, string(raw))
	write(creds, fmt.Sprintf(`{"mail": {"type": "smtp", "host": "127.0.0.1", "port": %d, "tls": "none"},
		"texts": {"type": "twilio", "base_url": %q, "account_sid": "ACdev", "auth_token": "tok-do-not-print"}}`, smtpPort, smsURL))
	return wf, "@../../examples/welcome_series.input.json", creds
}

// rune run --credentials runs the welcome series: one email, one text, and
// both results in $vars of the final context.
func TestRunWelcomeSeriesWithCredentialsFile(t *testing.T) {
	t.Parallel()
	mail, err := catcher.StartSMTP(catcher.SMTPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer mail.Close()
	texts, err := catcher.StartSMS(catcher.SMSConfig{Accounts: map[string]string{"ACdev": "tok-do-not-print"}})
	if err != nil {
		t.Fatal(err)
	}
	defer texts.Close()
	wf, input, creds := welcomeSeries(t, mail.Port(), texts.URL())
	code, stdout, stderr := runCLI(t, nil, "run", wf, "--input", input, "--credentials", creds, "--json", "--quiet")
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	var comp message.Completion
	if err := json.Unmarshal([]byte(stdout), &comp); err != nil {
		t.Fatal(err)
	}
	vars, _ := comp.FinalContext["$vars"].(map[string]any)
	email, _ := vars["email_welcome"].(map[string]any)
	sms, _ := vars["sms_reminder"].(map[string]any)
	if comp.Status != "completed" || email == nil || sms == nil {
		t.Fatalf("completion %s, $vars %v", comp.Status, vars)
	}
	if len(mail.Mails()) != 1 || len(texts.Messages()) != 1 {
		t.Fatalf("%d mails, %d texts; want 1 and 1", len(mail.Mails()), len(texts.Messages()))
	}
	m := mail.Mails()[0]
	if email["message_id"] != m.Header.Get("Message-Id") || m.Header.Get("Subject") != "Welcome to Rune, Ada (Pro)" {
		t.Errorf("$vars.email_welcome %v; mail Message-ID %s, subject %q", email, m.Header.Get("Message-Id"), m.Header.Get("Subject"))
	}
	if txt := texts.Messages()[0]; sms["message_id"] != txt.ID || !strings.Contains(txt.Body, "waiting in ada@example.com") {
		t.Errorf("$vars.sms_reminder %v; text %+v", sms, txt)
	}
	if strings.Contains(stdout+stderr, "tok-do-not-print") {
		t.Error("the auth token was printed")
	}
}

// A credential found nowhere halts the node, naming both places to put it;
// a broken file is a usage error that does not print its contents.
func TestRunCredentialsErrors(t *testing.T) {
	t.Parallel()
	wf, input, creds := welcomeSeries(t, 9, "http://127.0.0.1:9")
	if err := os.WriteFile(creds, []byte(`{"texts": {"type": "twilio"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ := runCLI(t, nil, "run", wf, "--input", input, "--credentials", creds, "--quiet")
	if code != 1 || !strings.Contains(stdout, `CREDENTIALS: credential "mail": not in the credentials file; or set RUNE_CREDENTIAL_MAIL`) {
		t.Fatalf("exit %d, stdout:\n%s", code, stdout)
	}
	if err := os.WriteFile(creds, []byte(`{"mail": "hunter2-secret"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, nil, "run", wf, "--input", input, "--credentials", creds)
	if code != 2 || !strings.Contains(stderr, `"mail": want an object of fields`) || strings.Contains(stderr, "hunter2") {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
}

// rune validate knows the notification nodes: the example is valid, and a
// broken email node gets every problem with its path.
func TestValidateNotificationNodes(t *testing.T) {
	t.Parallel()
	if code, _, stderr := runCLI(t, nil, "validate", "../../examples/welcome_series.json"); code != 0 {
		t.Fatalf("validate the example: exit %d\n%s", code, stderr)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"id": "bad", "nodes": [{"id": "s", "type": "trigger", "trigger": true},
		{"id": "mail", "type": "email", "parameters": {"to": [], "subject": "{% if x %}"}},
		{"id": "text", "type": "sms", "credentials": {"ref": "t"}, "parameters": {"to": "{{ $trigger.phone }}"}}],
		"edges": [{"id": "e1", "src": "s", "dst": "mail"}, {"id": "e2", "src": "s", "dst": "text"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, nil, "validate", bad)
	for _, want := range []string{"nodes[1].parameters.to: required", "nodes[1].parameters.subject: ", "nodes[1].parameters: an email needs a body",
		"nodes[1].credentials.ref: required", "nodes[2].parameters.body: required"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
}
