package nodes

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	coordmem "github.com/rune-org/rune/coord/memory"
	"github.com/rune-org/rune/internal/catcher"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/workflow"
)

func startSMS(t *testing.T, cfg catcher.SMSConfig) *catcher.SMSServer {
	t.Helper()
	s, err := catcher.StartSMS(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func runSMS(t *testing.T, opts Options, cred map[string]string, params map[string]any, key string) (node.Result, error) {
	t.Helper()
	n := workflow.Node{ID: "remind", Type: "sms", Parameters: params, Credentials: &workflow.CredentialRef{Ref: "texts"}}
	r := compileNode(t, NewRegistry(opts), n)
	return r.Run(t.Context(), &node.Input{Env: welcomeEnv, NodeID: "remind", ExecutionID: "ex1", Attempt: 1,
		IdempotencyKey: key, Secrets: mapSecrets{"texts": cred}})
}

func twilioCred(s *catcher.SMSServer) map[string]string {
	return map[string]string{"type": "twilio", "base_url": s.URL(), "account_sid": "AC123", "auth_token": "tok-secret-9", "from": "+15550001111"}
}

var smsParams = map[string]any{"to": "+4915112345678", "body": "Hi {{ $trigger.name | capitalize }}, {% if $trigger.vip %}VIP{% endif %} café"}

// The Twilio-compatible provider posts the form with basic auth and the
// idempotency key, and reads sid.
func TestSMSTwilio(t *testing.T) {
	t.Parallel()
	s := startSMS(t, catcher.SMSConfig{Accounts: map[string]string{"AC123": "tok-secret-9"}})
	res, err := runSMS(t, Options{}, twilioCred(s), smsParams, "key-1")
	if err != nil {
		t.Fatal(err)
	}
	msgs := s.Messages()
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
	m := msgs[0]
	if m.To != "+4915112345678" || m.From != "+15550001111" || m.Body != "Hi Ada, VIP café" || m.IdempotencyKey != "key-1" {
		t.Errorf("message %+v", m)
	}
	out := res.Output.(map[string]any)
	if out["message_id"] != m.ID || out["provider"] != "twilio" || out["segments"] != 1 {
		t.Errorf("output %v, want message_id %s, provider twilio, 1 segment", out, m.ID)
	}
	// A wrong token is a 401: not retried, and the token is not shown.
	cred := twilioCred(s)
	cred["auth_token"] = "wrong-token-77"
	_, err = runSMS(t, Options{}, cred, smsParams, "key-2")
	ne := nodeError(t, err, CodeSMS, false)
	if strings.Contains(ne.Message, "wrong-token-77") || !strings.Contains(ne.Message, "401") {
		t.Errorf("error %q", ne.Message)
	}
}

// The webhook provider posts JSON with the credential's headers.
func TestSMSWebhook(t *testing.T) {
	t.Parallel()
	s := startSMS(t, catcher.SMSConfig{})
	cred := map[string]string{"type": "webhook", "url": s.URL() + "/webhook", "headers": `{"X-Api-Key": "k-55"}`}
	res, err := runSMS(t, Options{}, cred, map[string]any{"from": "Rune", "to": " +14155550100 ", "body": strings.Repeat("x", 161)}, "key-w")
	if err != nil {
		t.Fatal(err)
	}
	msgs := s.Messages()
	if len(msgs) != 1 || msgs[0].Provider != "webhook" || msgs[0].To != "+14155550100" || msgs[0].From != "Rune" ||
		msgs[0].Header.Get("X-Api-Key") != "k-55" || msgs[0].IdempotencyKey != "key-w" {
		t.Fatalf("messages %+v", msgs)
	}
	out := res.Output.(map[string]any)
	if out["provider"] != "webhook" || out["segments"] != 2 || out["message_id"] != msgs[0].ID {
		t.Errorf("output %v", out)
	}
}

// 429 with a short Retry-After is waited out; a long one, and 5xx, are
// retryable failures; other 4xx are not.
func TestSMSReplies(t *testing.T) {
	t.Parallel()
	t.Run("429_then_ok", func(t *testing.T) {
		t.Parallel()
		s := startSMS(t, catcher.SMSConfig{Reply: func(n int) (int, string) {
			if n == 1 {
				return 429, "1"
			}
			return 0, ""
		}})
		start := time.Now()
		if _, err := runSMS(t, Options{}, twilioCred(s), smsParams, "k"); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < time.Second {
			t.Errorf("sent again after %v, before the Retry-After of 1 s", d)
		}
		if s.Requests() != 2 || len(s.Messages()) != 1 {
			t.Errorf("%d requests, %d messages; want 2 and 1", s.Requests(), len(s.Messages()))
		}
	})
	for _, tc := range []struct {
		status     int
		retryAfter string
		retryable  bool
	}{{429, "120", true}, {429, "", true}, {503, "", true}, {500, "", true}, {400, "", false}, {404, "", false}} {
		t.Run(fmt.Sprintf("%d_%s", tc.status, tc.retryAfter), func(t *testing.T) {
			t.Parallel()
			s := startSMS(t, catcher.SMSConfig{Reply: func(int) (int, string) { return tc.status, tc.retryAfter }})
			_, err := runSMS(t, Options{}, twilioCred(s), smsParams, "k")
			ne := nodeError(t, err, CodeSMS, tc.retryable)
			if tc.retryAfter == "120" && ne.Details["retry_after_s"] != 120.0 {
				t.Errorf("details %v, want retry_after_s 120", ne.Details)
			}
		})
	}
	t.Run("url_token_not_shown", func(t *testing.T) {
		t.Parallel()
		s := startSMS(t, catcher.SMSConfig{Reply: func(int) (int, string) { return 500, "" }})
		for _, u := range []string{s.URL() + "/webhook?token=tok-in-url", "http://user:tok-in-url@127.0.0.1:9/webhook?token=tok-in-url"} {
			_, err := runSMS(t, Options{}, map[string]string{"type": "webhook", "url": u}, smsParams, "k")
			var ne *node.Error
			if !errors.As(err, &ne) || strings.Contains(ne.Message, "tok-in-url") || !strings.Contains(ne.Message, "/webhook") {
				t.Errorf("error %v: want the endpoint named without its token", err)
			}
		}
	})
	t.Run("connection", func(t *testing.T) {
		t.Parallel()
		cred := map[string]string{"type": "twilio", "base_url": "http://127.0.0.1:9", "account_sid": "AC1", "auth_token": "t"}
		_, err := runSMS(t, Options{}, cred, smsParams, "k")
		nodeError(t, err, CodeSMSConnection, true)
	})
}

func TestSMSInvalid(t *testing.T) {
	t.Parallel()
	s := startSMS(t, catcher.SMSConfig{})
	for _, to := range []string{"015112345678", "+0123", "+1 415 555", "{{ $trigger.name }}"} {
		_, err := runSMS(t, Options{}, twilioCred(s), map[string]any{"to": to, "body": "x"}, "k")
		ne := nodeError(t, err, CodeInvalidAddress, false)
		if !strings.Contains(ne.Message, "parameters.to") || !strings.Contains(ne.Message, "E.164") {
			t.Errorf("%q: %s", to, ne.Message)
		}
	}
	_, err := runSMS(t, Options{}, map[string]string{"type": "smtp"}, smsParams, "k")
	nodeError(t, err, CodeCredentials, false)
	_, err = runSMS(t, Options{}, map[string]string{"type": "twilio", "base_url": "ftp://x", "account_sid": "a", "auth_token": "b"}, smsParams, "k")
	nodeError(t, err, CodeCredentials, false)
	if s.Requests() != 0 {
		t.Fatal("a request was sent")
	}
	ps := checkNode(t, workflow.Node{ID: "s", Type: "sms", Parameters: map[string]any{"body": "{{ x"}})
	wantProblems(t, ps, map[string]string{
		"nodes[1].parameters.to": "required", "nodes[1].parameters.body": "unclosed", "nodes[1].credentials.ref": "required",
	})
}

// A repeated run with the same key returns the recorded result.
func TestSMSSendsOncePerKey(t *testing.T) {
	t.Parallel()
	s := startSMS(t, catcher.SMSConfig{})
	opts := Options{Effects: coordmem.NewEffects(0)}
	a, err := runSMS(t, opts, twilioCred(s), smsParams, "same")
	if err != nil {
		t.Fatal(err)
	}
	b, err := runSMS(t, opts, twilioCred(s), smsParams, "same")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(s.Messages()); n != 1 {
		t.Fatalf("%d messages, want 1", n)
	}
	if fmt.Sprint(a.Output.(map[string]any)["message_id"]) != fmt.Sprint(b.Output.(map[string]any)["message_id"]) {
		t.Errorf("outputs differ: %v, %v", a.Output, b.Output)
	}
}

func TestSMSSegments(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]int{
		strings.Repeat("a", 160): 1, strings.Repeat("a", 161): 2, strings.Repeat("a", 306): 2, strings.Repeat("a", 307): 3,
		strings.Repeat("€", 80): 1, strings.Repeat("€", 81): 2, // an escape each: 160 and 162 septets
		strings.Repeat("ж", 70): 1, strings.Repeat("ж", 71): 2, strings.Repeat("😀", 35): 1, strings.Repeat("😀", 36): 2,
	} {
		if got := smsSegments(body); got != want {
			t.Errorf("segments of %d× %q = %d, want %d", len([]rune(body)), []rune(body)[0], got, want)
		}
	}
}

// A webhook credential's body template shapes the JSON that is posted.
func TestSMSWebhookBodyTemplate(t *testing.T) {
	t.Parallel()
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- string(b)
		fmt.Fprint(w, `{"id": 42}`)
	}))
	defer srv.Close()
	cred := map[string]string{"type": "webhook", "url": srv.URL,
		"body": `{"recipient": {{ $to | json }}, "message": {"text": {{ $body | json }}}, "ref": "{{ $idempotency_key }}"}`}
	res, err := runSMS(t, Options{}, cred, map[string]any{"to": "+14155550100", "body": `say "hi"`}, "k-7")
	if err != nil {
		t.Fatal(err)
	}
	if b := <-got; b != `{"recipient": "+14155550100", "message": {"text": "say \"hi\""}, "ref": "k-7"}` {
		t.Errorf("posted %s", b)
	}
	if out := res.Output.(map[string]any); out["message_id"] != "42" {
		t.Errorf("output %v", out)
	}
	cred["body"] = `{"text": {{ $body }}}`
	_, err = runSMS(t, Options{}, cred, map[string]any{"to": "+14155550100", "body": "plain words"}, "k-8")
	ne := nodeError(t, err, CodeCredentials, false)
	if !strings.Contains(ne.Message, "not JSON") {
		t.Errorf("error %q", ne.Message)
	}
}
