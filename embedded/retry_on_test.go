package embedded_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/rune-org/rune/embedded"
	"github.com/rune-org/rune/internal/catcher"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/secrets"
)

// Issue 36, item 10: with "retry": {"on": "any"} a node retries failures
// its type does not mark retryable (a 4xx, an SMTP 5xx) until its attempts
// run out; without it, such a failure is final as before. The email and
// sms outputs, and $vars, say which attempt sent.
func TestRetryOnAnyFailure(t *testing.T) {
	t.Parallel()
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
	rt, err := embedded.New(embedded.Options{Secrets: secrets.Static{
		"mail":  {"type": "smtp", "host": "127.0.0.1", "port": strconv.Itoa(mail.Port()), "tls": "none", "from": "news@rune.test"},
		"texts": {"type": "webhook", "url": texts.URL() + "/webhook"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
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
		want := 2
		if m, _ := out.(map[string]any); m["attempts"] != want {
			t.Errorf("%s = %v, want attempts %d", path, out, want)
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
