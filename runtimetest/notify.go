package runtimetest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/rune-org/rune/internal/catcher"
	"github.com/rune-org/rune/internal/testinfra"
	"github.com/rune-org/rune/message"
)

// NewWithSecrets starts a runtime whose nodes resolve credentials from
// secrets and log to log (nil: the runtime's default).
type NewWithSecrets func(secrets MapSecrets, log *slog.Logger) Runtime

// ReadableOutputs sends a mail, a text and a refused mail on a runtime
// (issue 36, item 9). Redaction hid every field of a credential, so an SMS
// output said "provider": "[redacted]", an SMTP error "SMTP
// [redacted]:[redacted]" and a Bcc to the credential's own from address
// "[redacted]". Through the whole worker path, the host, port, type, from
// address and account now show, and the password and token, in any form,
// still appear in no status, completion or log line.
func ReadableOutputs(t *testing.T, newRuntime NewWithSecrets) {
	t.Helper()
	const (
		from     = "news@rune.test"
		password = "pw-S3cret-smtp-41"
		sid      = "AC0123456789abcdef"
		token    = "tok-S3cret-sms-97"
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
	texts, err := catcher.StartSMS(catcher.SMSConfig{Accounts: map[string]string{sid: token}})
	if err != nil {
		t.Fatal(err)
	}
	defer texts.Close()
	var logs testinfra.Buffer
	rt := newRuntime(MapSecrets{
		// The user name is the from address, as with most mail providers.
		"mail": {"type": "smtp", "host": "127.0.0.1", "port": strconv.Itoa(mail.Port()), "tls": "none",
			"username": from, "password": password, "from": from},
		"texts": {"type": "twilio", "base_url": texts.URL(), "account_sid": sid, "auth_token": token, "from": "+15550001111"},
	}, slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	def := `{"id": "readable", "nodes": [
		{"id": "start", "type": "trigger", "trigger": true},
		{"id": "welcome", "type": "email", "credentials": {"ref": "mail"},
		 "parameters": {"to": "ann@example.com", "bcc": "` + from + `", "subject": "Hi", "text": "Hello"}},
		{"id": "text", "type": "sms", "credentials": {"ref": "texts"}, "parameters": {"to": "+14155550100", "body": "Hello"}},
		{"id": "bounce", "type": "email", "credentials": {"ref": "mail"}, "retry": {"max_attempts": 1},
		 "parameters": {"to": "nobody@example.com", "subject": "Hi", "text": "Hello"}}
	], "edges": [{"id": "e1", "src": "start", "dst": "welcome"}, {"id": "e2", "src": "welcome", "dst": "text"},
		{"id": "e3", "src": "text", "dst": "bounce"}]}`
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var mu sync.Mutex
	var statuses []*message.NodeStatus
	comp, err := rt.Run(ctx, []byte(def), nil, func(s *message.NodeStatus) {
		mu.Lock()
		defer mu.Unlock()
		statuses = append(statuses, s)
	})
	if err != nil {
		t.Fatal(err)
	}
	if comp.Status != message.CompletionFailed || comp.FailureReason == nil || comp.FailureReason.NodeID != "bounce" {
		t.Fatalf("completion %+v, want failed by node bounce", comp)
	}
	if len(mail.Mails()) != 1 || len(texts.Messages()) != 1 {
		t.Fatalf("%d mails and %d texts sent, want 1 and 1", len(mail.Mails()), len(texts.Messages()))
	}

	// What the user reads.
	welcome, _ := comp.FinalContext["$welcome"].(map[string]any)
	if got := fmt.Sprint(welcome["accepted"]); got != "[ann@example.com "+from+"]" {
		t.Errorf("$welcome.accepted = %s, want the to and the Bcc to the from address", got)
	}
	vars, _ := comp.FinalContext["$vars"].(map[string]any)
	for _, out := range []any{comp.FinalContext["$text"], vars["sms_text"]} {
		if m, _ := out.(map[string]any); m["provider"] != "twilio" {
			t.Errorf("sms output %v, want provider twilio", out)
		}
	}
	server := "127.0.0.1:" + strconv.Itoa(mail.Port())
	want := "parameters.to: nobody@example.com refused by " + server + ": 550"
	if msg := comp.FailureReason.Message; !strings.Contains(msg, want) {
		t.Errorf("failure %q, want it to hold %q", msg, want)
	}

	// What must stay hidden.
	out, err := json.Marshal(map[string]any{"statuses": statuses, "completion": comp})
	if err != nil {
		t.Fatal(err)
	}
	forms := append(SecretForms(password), SecretForms(token)...)
	forms = append(forms, base64.StdEncoding.EncodeToString([]byte(sid+":"+token)))
	for name, data := range map[string][]byte{"statuses or completion": out, "logs": logs.Bytes()} {
		if f := FindSecret(data, forms); f != "" {
			t.Errorf("a secret (as %q) is in the %s:\n%s", f, name, data)
		}
	}
	if !strings.Contains(string(out), `"server":"`+server+`"`) {
		t.Errorf("the statuses and completion do not name the server %s:\n%s", server, out)
	}
}

// RetryOnAny runs sms, email and http nodes whose failures are not
// retryable (issue 36, item 10): with "retry": {"on": "any"} a node retries failures
// its type does not mark retryable (a 4xx, an SMTP 5xx) until its attempts
// run out; without it, such a failure is final as before. The email and
// sms outputs, and $vars, say which attempt sent.
func RetryOnAny(t *testing.T, newRuntime NewWithSecrets) {
	t.Helper()
	var rcptRefusals, smsRefusals atomic.Int32
	mail, err := catcher.StartSMTP(catcher.SMTPConfig{Reply: func(stage, _ string) error {
		if stage == "RCPT" && rcptRefusals.Add(1) == 1 {
			return &smtp.SMTPError{Code: 550, Message: "mailbox unavailable"}
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer mail.Close()
	texts, err := catcher.StartSMS(catcher.SMSConfig{Reply: func(int) (int, string) {
		if smsRefusals.Add(1) <= 2 {
			return http.StatusBadRequest, ""
		}
		return 0, ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer texts.Close()
	var calls atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusBadRequest)
	}))
	defer api.Close()
	rt := newRuntime(MapSecrets{
		"mail":  {"type": "smtp", "host": "127.0.0.1", "port": strconv.Itoa(mail.Port()), "tls": "none", "from": "news@rune.test"},
		"texts": {"type": "webhook", "url": texts.URL() + "/webhook"},
	}, nil)
	run := func(nodes, edges string) (*message.Completion, map[string]int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var mu sync.Mutex
		retrying := map[string]int{}
		def := `{"id": "retry_on", "nodes": [{"id": "start", "type": "trigger", "trigger": true}, ` + nodes + `], "edges": [` + edges + `]}`
		c, err := rt.Run(ctx, []byte(def), nil, func(s *message.NodeStatus) {
			mu.Lock()
			defer mu.Unlock()
			if s.Status == message.StatusRetrying {
				retrying[s.NodeID]++
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		return c, retrying
	}
	const fast = `"initial_delay": "10ms", "multiplier": 1`

	// The default: a 400 is final, for the sms node as for the others.
	c, retrying := run(`{"id": "text", "type": "sms", "credentials": {"ref": "texts"}, "retry": {"max_attempts": 3, `+fast+`},
		"parameters": {"to": "+14155550100", "body": "hi"}}`, `{"id": "e1", "src": "start", "dst": "text"}`)
	if c.Status != message.CompletionFailed || retrying["text"] != 0 || texts.Requests() != 1 {
		t.Fatalf("default policy: completion %s, %d retries, %d requests; want failed after 1 request", c.Status, retrying["text"], texts.Requests())
	}

	// on any: the sms node's second 400 is retried too, the third attempt
	// sends; the email's 550 is retried once.
	c, retrying = run(`{"id": "text", "type": "sms", "credentials": {"ref": "texts"}, "retry": {"max_attempts": 3, "on": "any", `+fast+`},
		"parameters": {"to": "+14155550100", "body": "hi"}},
		{"id": "mail", "type": "email", "credentials": {"ref": "mail"}, "retry": {"max_attempts": 2, "on": "any", `+fast+`},
		"parameters": {"to": "ann@example.com", "subject": "hi", "text": "hi"}}`,
		`{"id": "e1", "src": "start", "dst": "text"}, {"id": "e2", "src": "text", "dst": "mail"}`)
	if c.Status != message.CompletionCompleted || retrying["text"] != 1 || retrying["mail"] != 1 {
		t.Fatalf("on any: completion %+v, retries %v; want completed after 1 retry of each", c, retrying)
	}
	vars, _ := c.FinalContext["$vars"].(map[string]any)
	for path, out := range map[string]any{"$text": c.FinalContext["$text"], "$vars.sms_text": vars["sms_text"],
		"$mail": c.FinalContext["$mail"], "$vars.email_mail": vars["email_mail"]} {
		// A number: an int in process, a float64 once it travelled as JSON.
		if m, _ := out.(map[string]any); fmt.Sprint(m["attempts"]) != "2" {
			t.Errorf("%s = %v, want attempts 2", path, out)
		}
	}
	if n := len(texts.Messages()); n != 1 || len(mail.Mails()) != 1 {
		t.Errorf("%d texts and %d mails sent, want 1 and 1", n, len(mail.Mails()))
	}

	// on any, until the attempts run out: an http 400, three times.
	c, retrying = run(`{"id": "call", "type": "http", "retry": {"max_attempts": 3, "on": "any", `+fast+`},
		"parameters": {"url": "`+api.URL+`"}}`, `{"id": "e1", "src": "start", "dst": "call"}`)
	if c.Status != message.CompletionFailed || retrying["call"] != 2 || calls.Load() != 3 {
		t.Fatalf("http on any: completion %s, %d retries, %d calls; want failed after 3 calls", c.Status, retrying["call"], calls.Load())
	}
}
