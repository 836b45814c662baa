package embedded_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/rune-org/rune/embedded"
	"github.com/rune-org/rune/internal/catcher"
	"github.com/rune-org/rune/internal/testinfra"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/runtimetest"
	"github.com/rune-org/rune/secrets"
)

// Issue 36, item 9: redaction hid every field of a credential, so an SMS
// output said "provider": "[redacted]", an SMTP error "SMTP
// [redacted]:[redacted]" and a Bcc to the credential's own from address
// "[redacted]". Through the whole worker path, the host, port, type, from
// address and account now show, and the password and token, in any form,
// still appear in no status, completion or log line.
func TestNotificationOutputsAreReadable(t *testing.T) {
	t.Parallel()
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
	rt, err := embedded.New(embedded.Options{
		Secrets: secrets.Static{
			// The user name is the from address, as with most mail providers.
			"mail": {"type": "smtp", "host": "127.0.0.1", "port": strconv.Itoa(mail.Port()), "tls": "none",
				"username": from, "password": password, "from": from},
			"texts": {"type": "twilio", "base_url": texts.URL(), "account_sid": sid, "auth_token": token, "from": "+15550001111"},
		},
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
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
	forms := append(runtimetest.SecretForms(password), runtimetest.SecretForms(token)...)
	forms = append(forms, base64.StdEncoding.EncodeToString([]byte(sid+":"+token)))
	for name, data := range map[string][]byte{"statuses or completion": out, "logs": logs.Bytes()} {
		if f := runtimetest.FindSecret(data, forms); f != "" {
			t.Errorf("a secret (as %q) is in the %s:\n%s", f, name, data)
		}
	}
	if !strings.Contains(string(out), `"server":"`+server+`"`) {
		t.Errorf("the statuses and completion do not name the server %s:\n%s", server, out)
	}
}
