package server_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/emersion/go-smtp"

	"github.com/rune-org/rune/internal/catcher"
	"github.com/rune-org/rune/runtimetest"
)

// Issue 36, items 9 and 10, through the API: credentials stored with POST
// /v1/credentials, workflows run by the server's worker, results read with
// GET /v1/executions/{id}. The sms node retries a 400 with "on": "any" and
// the API says it took 2 attempts; without "on" the same 400 is final after
// 1. The execution shows the SMS provider, the Bcc to the credential's own
// from address and the SMTP server's host and port; the password and the
// auth token, in any form, are in no response and no log line.
func TestNotificationSendsReadableThroughAPI(t *testing.T) {
	t.Parallel()
	const (
		from     = "news@rune.test"
		password = "pw-S3cret-api-smtp-58"
		sid      = "AC00aa11bb22cc33dd"
		token    = "tok-S3cret-api-sms-63"
	)
	mail, err := catcher.StartSMTP(catcher.SMTPConfig{
		Users: map[string]string{from: password},
		Reply: func(stage, arg string) error {
			if stage == "RCPT" && strings.HasPrefix(arg, "nobody@") {
				return &smtp.SMTPError{Code: 550, Message: "no such user"}
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer mail.Close()
	// Requests 1 and 3 get a 400, which the sms node does not mark
	// retryable: the first is retried (on any), the third is final.
	texts, err := catcher.StartSMS(catcher.SMSConfig{Accounts: map[string]string{sid: token}, Reply: func(n int) (int, string) {
		if n == 1 || n == 3 {
			return http.StatusBadRequest, ""
		}
		return 0, ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer texts.Close()

	tg := embeddedTarget(t)
	a := newAPI(t, tg)
	a.want(http.StatusCreated, "POST", "/v1/credentials", []byte(fmt.Sprintf(`{"name": "mail", "type": "smtp", "value": {
		"type": "smtp", "host": "127.0.0.1", "port": "%d", "tls": "none", "username": %q, "password": %q, "from": %q}}`,
		mail.Port(), from, password, from)), nil)
	a.want(http.StatusCreated, "POST", "/v1/credentials", []byte(fmt.Sprintf(`{"name": "texts", "type": "twilio", "value": {
		"type": "twilio", "base_url": %q, "account_sid": %q, "auth_token": %q, "from": "+15550001111"}}`,
		texts.URL(), sid, token)), nil)
	const fast = `"initial_delay": "10ms", "multiplier": 1`
	a.pushWorkflow(wfDef("api_sends", `
		{"id": "text", "type": "sms", "credentials": {"ref": "texts"}, "retry": {"max_attempts": 3, "on": "any", `+fast+`},
		 "parameters": {"to": "+14155550100", "body": "Hello"}},
		{"id": "welcome", "type": "email", "credentials": {"ref": "mail"},
		 "parameters": {"to": "ann@example.com", "bcc": "`+from+`", "subject": "Hi", "text": "Hello"}}`,
		`{"id": "e1", "src": "start", "dst": "text"}, {"id": "e2", "src": "text", "dst": "welcome"}`))
	a.pushWorkflow(wfDef("api_bounce", `
		{"id": "bounce", "type": "email", "credentials": {"ref": "mail"}, "retry": {"max_attempts": 1},
		 "parameters": {"to": "nobody@example.com", "subject": "Hi", "text": "Hello"}}`,
		`{"id": "e1", "src": "start", "dst": "bounce"}`))
	a.pushWorkflow(wfDef("api_default", `
		{"id": "text", "type": "sms", "credentials": {"ref": "texts"}, "retry": {"max_attempts": 3, `+fast+`},
		 "parameters": {"to": "+14155550100", "body": "Hello"}}`,
		`{"id": "e1", "src": "start", "dst": "text"}`))

	// on any: the 400 is retried, the second attempt sends.
	x := a.waitStatus(a.trigger("api_sends", `{}`).ID, "completed", "failed")
	if x.Status != "completed" {
		t.Fatalf("api_sends %s: %s", x.Status, x.Completion)
	}
	var sms, email map[string]any
	if err := json.Unmarshal(x.Vars["sms_text"], &sms); err != nil {
		t.Fatalf("vars.sms_text %s: %v", x.Vars["sms_text"], err)
	}
	if err := json.Unmarshal(x.Vars["email_welcome"], &email); err != nil {
		t.Fatalf("vars.email_welcome %s: %v", x.Vars["email_welcome"], err)
	}
	if sms["provider"] != "twilio" || fmt.Sprint(sms["attempts"]) != "2" {
		t.Errorf("vars.sms_text = %v, want provider twilio and attempts 2", sms)
	}
	if got := fmt.Sprint(email["accepted"]); got != "[ann@example.com "+from+"]" || fmt.Sprint(email["attempts"]) != "1" {
		t.Errorf("vars.email_welcome = %v, want accepted [ann@example.com %s] (the Bcc to the from address) and attempts 1", email, from)
	}
	for _, n := range x.Nodes {
		if n.NodeID != "text" {
			continue
		}
		var out map[string]any
		_ = json.Unmarshal(n.Output, &out)
		if n.Attempt != 2 || fmt.Sprint(out["attempts"]) != "2" {
			t.Errorf("nodes[text]: attempt %d, output %s; want attempt 2 and output.attempts 2", n.Attempt, n.Output)
		}
	}
	if len(texts.Messages()) != 1 || len(mail.Mails()) != 1 {
		t.Fatalf("%d texts and %d mails kept, want 1 and 1", len(texts.Messages()), len(mail.Mails()))
	}

	// A refused mail: the error names the server by its host and port.
	x = a.waitStatus(a.trigger("api_bounce", `{}`).ID, "completed", "failed")
	server := "127.0.0.1:" + strconv.Itoa(mail.Port())
	if want := "parameters.to: nobody@example.com refused by " + server + ": 550"; x.Status != "failed" || !strings.Contains(string(x.Completion), want) {
		t.Errorf("api_bounce %s, completion %s; want failed with %q", x.Status, x.Completion, want)
	}

	// The default (retryable only): the same 400 is final after 1 attempt.
	x = a.waitStatus(a.trigger("api_default", `{}`).ID, "completed", "failed")
	if x.Status != "failed" || x.Attempts != 1 || texts.Requests() != 3 {
		t.Errorf("api_default %s after %d attempts and %d provider requests in all; want failed after 1 attempt (3 requests)", x.Status, x.Attempts, texts.Requests())
	}

	// What must stay hidden, in every response read and every log line.
	forms := append(runtimetest.SecretForms(password), runtimetest.SecretForms(token)...)
	forms = append(forms, base64.StdEncoding.EncodeToString([]byte(sid+":"+token)),
		base64.StdEncoding.EncodeToString([]byte(from+":"+password)))
	a.mu.Lock()
	bodies := append([]byte(nil), a.bodies.Bytes()...)
	a.mu.Unlock()
	for name, data := range map[string][]byte{"API responses": bodies, "logs": []byte(tg.output())} {
		if f := runtimetest.FindSecret(data, forms); f != "" {
			t.Errorf("a secret (as %q) is in the %s", f, name)
		}
	}
}
