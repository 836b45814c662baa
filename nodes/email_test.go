package nodes

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	netmail "net/mail"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/rune-org/rune/coord"
	coordmem "github.com/rune-org/rune/coord/memory"
	"github.com/rune-org/rune/internal/catcher"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/workflow"
)

// mapSecrets resolves references from a map.
type mapSecrets map[string]map[string]string

func (m mapSecrets) Resolve(_ context.Context, ref string) (map[string]string, error) {
	f, ok := m[ref]
	if !ok {
		return nil, fmt.Errorf("credential %q: not found", ref)
	}
	return f, nil
}

func startSMTP(t *testing.T, cfg catcher.SMTPConfig) *catcher.SMTP {
	t.Helper()
	s, err := catcher.StartSMTP(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func smtpCred(s *catcher.SMTP, mode string, extra ...string) map[string]string {
	f := map[string]string{"type": "smtp", "host": "127.0.0.1", "port": strconv.Itoa(s.Port()), "tls": mode}
	for i := 0; i+1 < len(extra); i += 2 {
		f[extra[i]] = extra[i+1]
	}
	return f
}

func emailNode(params map[string]any) workflow.Node {
	return workflow.Node{ID: "welcome", Type: "email", Parameters: params, Credentials: &workflow.CredentialRef{Ref: "mail"}}
}

// runEmail compiles an email node with opts and runs it once with key.
func runEmail(t *testing.T, opts Options, cred map[string]string, params map[string]any, env map[string]any, key string) (node.Result, error) {
	t.Helper()
	return runEmailCtx(t.Context(), t, opts, cred, params, env, key)
}

func runEmailCtx(ctx context.Context, t *testing.T, opts Options, cred map[string]string, params map[string]any, env map[string]any, key string) (node.Result, error) {
	t.Helper()
	r := compileNode(t, NewRegistry(opts), emailNode(params))
	return r.Run(ctx, &node.Input{Env: env, NodeID: "welcome", ExecutionID: "ex1", Attempt: 1,
		IdempotencyKey: key, Secrets: mapSecrets{"mail": cred}})
}

var welcomeEnv = map[string]any{"$trigger": map[string]any{
	"name": "ada", "email": "ada@example.com", "vip": true, "plan": "pro",
	"friends": []any{"bob@example.com", "Cy <cy@example.com>"},
}}

// An email's fields are Liquid over the context; to, cc and bcc take lists
// and comma-separated strings; text and html make a multipart/alternative
// message; user headers are kept; bcc is on the envelope only.
func TestEmailRendersAndSends(t *testing.T) {
	t.Parallel()
	s := startSMTP(t, catcher.SMTPConfig{})
	res, err := runEmail(t, Options{}, smtpCred(s, "none"), map[string]any{
		"from":     "Rune <hello@rune.test>",
		"to":       "{{ $trigger.email }}, Ops <ops@example.com>",
		"cc":       []any{"{{ $trigger.friends[0] }}"},
		"bcc":      "{{ $trigger.friends | last }}",
		"reply_to": "support@rune.test",
		"subject":  "Welcome, {{ $trigger.name | capitalize }}{% if $trigger.vip %} (VIP){% endif %}",
		"text":     "Hi {{ $trigger.name }}, your plan: {{ $trigger.plan | upcase }}",
		"html":     "<p>Hi <b>{{ $trigger.name | escape }}</b></p>",
		"headers":  map[string]any{"List-Unsubscribe": "<https://rune.test/u/{{ $trigger.name }}>"},
	}, welcomeEnv, "key123")
	if err != nil {
		t.Fatal(err)
	}
	mails := s.Mails()
	if len(mails) != 1 {
		t.Fatalf("%d mails, want 1", len(mails))
	}
	m := mails[0]
	wantRcpt := []string{"ada@example.com", "ops@example.com", "bob@example.com", "cy@example.com"}
	if strings.Join(m.To, " ") != strings.Join(wantRcpt, " ") || m.From != "hello@rune.test" {
		t.Errorf("envelope from %s to %v, want hello@rune.test to %v", m.From, m.To, wantRcpt)
	}
	h := m.Header
	if got := h.Get("Subject"); got != "Welcome, Ada (VIP)" {
		t.Errorf("Subject %q", got)
	}
	if got := h.Get("Message-Id"); got != "<key123@rune.test>" {
		t.Errorf("Message-ID %q, want it derived from the idempotency key", got)
	}
	if got := h.Get("List-Unsubscribe"); got != "<https://rune.test/u/ada>" {
		t.Errorf("List-Unsubscribe %q", got)
	}
	if h.Get("Bcc") != "" || strings.Contains(string(m.Data), "cy@example.com") {
		t.Errorf("the bcc recipient shows in the message:\n%s", m.Data)
	}
	if got := h.Get("Cc"); !strings.Contains(got, "bob@example.com") {
		t.Errorf("Cc %q", got)
	}
	if got := h.Get("Reply-To"); !strings.Contains(got, "support@rune.test") {
		t.Errorf("Reply-To %q", got)
	}
	parts := multipartBodies(t, m)
	if parts["text/plain"] != "Hi ada, your plan: PRO" || parts["text/html"] != "<p>Hi <b>ada</b></p>" {
		t.Errorf("parts %q", parts)
	}
	out := res.Output.(map[string]any)
	if out["message_id"] != "<key123@rune.test>" || fmt.Sprint(out["accepted"]) != fmt.Sprint([]any{"ada@example.com", "ops@example.com", "bob@example.com", "cy@example.com"}) ||
		len(out["rejected"].([]any)) != 0 {
		t.Errorf("output %v", out)
	}
}

// multipartBodies returns the decoded parts of a multipart/alternative mail
// by content type.
func multipartBodies(t *testing.T, m catcher.Mail) map[string]string {
	t.Helper()
	msg, err := netmail.ReadMessage(strings.NewReader(string(m.Data)))
	if err != nil {
		t.Fatal(err)
	}
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/alternative" {
		t.Fatalf("Content-Type %q (%v), want multipart/alternative", msg.Header.Get("Content-Type"), err)
	}
	out := map[string]string{}
	r := multipart.NewReader(msg.Body, params["boundary"])
	for {
		p, err := r.NextPart()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(p) // quoted-printable parts are decoded by NextPart
		ct, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type"))
		out[ct] = string(body)
	}
}

// Every TLS mode, with AUTH PLAIN and LOGIN, against a server whose
// certificate the test made.
func TestEmailTLSModesAndAuth(t *testing.T) {
	t.Parallel()
	serverTLS, roots, err := catcher.Certificate()
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"none", "starttls", "tls"} {
		for _, auth := range []string{"plain", "login"} {
			t.Run(mode+"_"+auth, func(t *testing.T) {
				t.Parallel()
				s := startSMTP(t, catcher.SMTPConfig{TLS: mode, TLSConfig: serverTLS, Users: map[string]string{"app": "s3cr3t-pw"}})
				cred := smtpCred(s, mode, "username", "app", "password", "s3cr3t-pw", "auth", auth, "from", "noreply@rune.test")
				opts := Options{TLSConfig: &tls.Config{RootCAs: roots}}
				_, err := runEmail(t, opts, cred, map[string]any{"to": "ada@example.com", "subject": "hi", "text": "hello"}, welcomeEnv, "k-"+mode+auth)
				if err != nil {
					t.Fatal(err)
				}
				mails := s.Mails()
				if len(mails) != 1 || mails[0].User != "app" || mails[0].TLS != (mode != "none") || mails[0].From != "noreply@rune.test" {
					t.Fatalf("mails %+v, want one from noreply@rune.test as app, TLS %v", mails, mode != "none")
				}
				// A wrong password fails without retry and without the password.
				cred["password"] = "wrong-pw-zzz"
				_, err = runEmail(t, opts, cred, map[string]any{"to": "ada@example.com", "subject": "hi", "text": "hello"}, welcomeEnv, "k2-"+mode+auth)
				ne := nodeError(t, err, CodeSMTP, false)
				if strings.Contains(ne.Message, "wrong-pw-zzz") || strings.Contains(fmt.Sprint(ne.Details), "wrong-pw-zzz") {
					t.Fatalf("the error shows the password: %s", ne.Message)
				}
			})
		}
	}
	// A certificate the client does not trust fails the connection.
	s := startSMTP(t, catcher.SMTPConfig{TLS: "tls", TLSConfig: serverTLS})
	_, err = runEmail(t, Options{}, smtpCred(s, "tls"), map[string]any{"from": "a@rune.test", "to": "ada@example.com", "subject": "x", "text": "y"}, welcomeEnv, "k3")
	nodeError(t, err, CodeSMTPConnection, true)
}

// 4xx replies are retried, 5xx are not; a refused recipient is named with
// its parameter.
func TestEmailReplies(t *testing.T) {
	t.Parallel()
	cases := []struct {
		stage, arg string
		code       int
		wantCode   string
		retryable  bool
		want       string
	}{
		{"RCPT", "", 550, CodeSMTP, false, `parameters.to: ada@example.com refused by 127.0.0.1:`},
		{"RCPT", "bob@example.com", 451, CodeSMTP, true, `parameters.cc: bob@example.com refused`},
		{"MAIL", "", 553, CodeSMTP, false, `parameters.from: a@rune.test refused`},
		// The bounds of a permanent refusal, exactly: 500 and 599.
		{"MAIL", "", 500, CodeSMTP, false, `parameters.from: a@rune.test refused`},
		{"RCPT", "", 500, CodeSMTP, false, `parameters.to: ada@example.com refused by 127.0.0.1:`},
		{"RCPT", "", 599, CodeSMTP, false, `parameters.to: ada@example.com refused by 127.0.0.1:`},
		{"MAIL", "", 421, CodeSMTP, true, "421"},
		{"DATA", "", 554, CodeSMTP, false, "554"},
		{"DATA", "", 452, CodeSMTP, true, "452"},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s_%d", tc.stage, tc.code), func(t *testing.T) {
			t.Parallel()
			s := startSMTP(t, catcher.SMTPConfig{Reply: func(stage, arg string) error {
				if stage == tc.stage && (tc.arg == "" || arg == tc.arg) {
					return &smtp.SMTPError{Code: tc.code, Message: "test reply"}
				}
				return nil
			}})
			_, err := runEmail(t, Options{}, smtpCred(s, "none", "from", "a@rune.test"),
				map[string]any{"to": "ada@example.com", "cc": "bob@example.com", "subject": "x", "text": "y"}, welcomeEnv, "k")
			ne := nodeError(t, err, tc.wantCode, tc.retryable)
			if !strings.Contains(ne.Message, tc.want) {
				t.Errorf("message %q, want it to contain %q", ne.Message, tc.want)
			}
			if len(s.Mails()) != 0 {
				t.Errorf("a mail was kept")
			}
		})
	}
	// One recipient refused with a 5xx (500 to 599, the bounds included):
	// the others get the mail, and the output lists it as rejected.
	for _, code := range []int{500, 550, 599} {
		s := startSMTP(t, catcher.SMTPConfig{Reply: func(stage, arg string) error {
			if stage == "RCPT" && arg == "bob@example.com" {
				return &smtp.SMTPError{Code: code, Message: "no such user"}
			}
			return nil
		}})
		res, err := runEmail(t, Options{}, smtpCred(s, "none", "from", "a@rune.test"),
			map[string]any{"to": "ada@example.com", "cc": "bob@example.com", "bcc": "cy@example.com", "subject": "x", "text": "y"}, welcomeEnv, "k")
		if err != nil {
			t.Fatalf("bob refused with %d: %v", code, err)
		}
		out := res.Output.(map[string]any)
		if fmt.Sprint(out["accepted"]) != "[ada@example.com cy@example.com]" || fmt.Sprint(out["rejected"]) != "[bob@example.com]" {
			t.Errorf("bob refused with %d: output %v, want bob rejected, ada and cy accepted", code, out)
		}
		if mails := s.Mails(); len(mails) != 1 || fmt.Sprint(mails[0].To) != "[ada@example.com cy@example.com]" {
			t.Errorf("bob refused with %d: mails %+v, want one to ada and cy", code, mails)
		}
	}
	// Nothing listening: a connection error, retryable.
	cred := map[string]string{"type": "smtp", "host": "127.0.0.1", "port": "9", "tls": "none", "from": "a@rune.test"}
	_, err := runEmail(t, Options{}, cred, map[string]any{"to": "ada@example.com", "subject": "x", "text": "y"}, welcomeEnv, "k")
	nodeError(t, err, CodeSMTPConnection, true)
}

// Malformed addresses fail at once, naming the parameter and the address.
func TestEmailInvalidAddresses(t *testing.T) {
	t.Parallel()
	s := startSMTP(t, catcher.SMTPConfig{})
	for _, c := range []struct {
		field string
		v     any
		bad   string // the part named: the first that is no address
	}{
		{"to", "ada@example.com, not an address", "not an address"},
		{"cc", []any{"ok@example.com", "{{ $trigger.name }}"}, "ada"},
		{"bcc", "x@@y", "x@@y"},
		{"reply_to", "ok@example.com, first@, , second@", "first@"},
	} {
		params := map[string]any{"from": "a@rune.test", "to": "z@example.com", "subject": "x", "text": "y"}
		params[c.field] = c.v
		_, err := runEmail(t, Options{}, smtpCred(s, "none"), params, welcomeEnv, "k")
		ne := nodeError(t, err, CodeInvalidAddress, false)
		if !strings.Contains(ne.Message, "parameters."+c.field) {
			t.Errorf("%s: %q does not name the parameter", c.field, ne.Message)
		}
		if ne.Details["address"] != c.bad {
			t.Errorf("%s: the error names %q (%s), want %q", c.field, ne.Details["address"], ne.Message, c.bad)
		}
	}
	if len(s.Mails()) != 0 {
		t.Fatal("a mail was sent")
	}
}

// With an effects store, a second run with the same key (a retry, a
// redelivery) returns the recorded result and sends nothing.
func TestEmailSendsOncePerKey(t *testing.T) {
	t.Parallel()
	s := startSMTP(t, catcher.SMTPConfig{})
	var faults []string
	opts := Options{Effects: coordmem.NewEffects(0), Fault: func(p, _ string) { faults = append(faults, p) }}
	params := map[string]any{"from": "a@rune.test", "to": "ada@example.com", "subject": "x", "text": "y"}
	first, err := runEmail(t, opts, smtpCred(s, "none"), params, welcomeEnv, "same")
	if err != nil {
		t.Fatal(err)
	}
	again, err := runEmail(t, opts, smtpCred(s, "none"), params, welcomeEnv, "same")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(first.Output) != fmt.Sprint(again.Output) {
		t.Errorf("outputs differ: %v, then %v", first.Output, again.Output)
	}
	if _, err := runEmail(t, opts, smtpCred(s, "none"), params, welcomeEnv, "other"); err != nil {
		t.Fatal(err)
	}
	if n := len(s.Mails()); n != 2 {
		t.Fatalf("%d mails, want 2 (one per key)", n)
	}
	if strings.Join(faults, ",") != "sent,recorded,sent,recorded" {
		t.Errorf("fault points %v", faults)
	}
}

// An email is recorded once its data is written, before the server's
// reply: a reply that then refuses it withdraws the record, so the retry of
// a 4xx sends the mail, and a 5xx leaves nothing recorded either.
func TestEmailRefusedAfterDataIsWithdrawn(t *testing.T) {
	t.Parallel()
	for _, code := range []int{451, 554} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			t.Parallel()
			s := startSMTP(t, catcher.SMTPConfig{Reply: catcher.RefuseData(code, 1)})
			var faults []string
			ef := coordmem.NewEffects(0)
			opts := Options{Effects: ef, Fault: func(p, _ string) { faults = append(faults, p) }}
			params := map[string]any{"from": "a@rune.test", "to": "ada@example.com", "subject": "x", "text": "y"}
			_, err := runEmail(t, opts, smtpCred(s, "none"), params, welcomeEnv, "k")
			nodeError(t, err, CodeSMTP, code < 500)
			if strings.Join(faults, ",") != "sent,recorded" || len(s.Refused()) != 1 {
				t.Fatalf("fault points %v, %d refused: want the mail recorded, then refused", faults, len(s.Refused()))
			}
			if got, err := ef.Begin(t.Context(), "k"); err != nil || got.Done {
				t.Fatalf("after the refusal the key is done %v with %s (%v), want no record", got.Done, got.Result, err)
			}
			if _, err := runEmail(t, opts, smtpCred(s, "none"), params, welcomeEnv, "k"); err != nil {
				t.Fatal(err)
			}
			if len(s.Mails()) != 1 {
				t.Fatalf("%d mails after the retry, want 1", len(s.Mails()))
			}
		})
	}
}

// failingWithdraw is an effects store that cannot withdraw.
type failingWithdraw struct{ coord.Effects }

func (failingWithdraw) Withdraw(context.Context, string, []byte) error {
	return errors.New("store unavailable")
}

// A refused mail whose record cannot be withdrawn fails the node for good:
// a retry would find the record and not send.
func TestEmailRefusedRecordStays(t *testing.T) {
	t.Parallel()
	s := startSMTP(t, catcher.SMTPConfig{Reply: catcher.RefuseData(451, 0)})
	opts := Options{Effects: failingWithdraw{coordmem.NewEffects(0)}}
	_, err := runEmail(t, opts, smtpCred(s, "none"), map[string]any{"from": "a@rune.test", "to": "ada@example.com", "subject": "x", "text": "y"}, welcomeEnv, "k")
	ne := nodeError(t, err, CodeEffects, false)
	if !strings.Contains(ne.Message, "could not be withdrawn") || !strings.Contains(ne.Message, "store unavailable") {
		t.Errorf("message %q, want it to say the record stays and why", ne.Message)
	}
}

// recordStore wraps an effects store as a network store behaves: Record
// fails on a done context, takes delay, and with lost set is made but
// reports an error (its reply lost).
type recordStore struct {
	coord.Effects
	delay time.Duration
	lost  bool
}

func (e recordStore) Record(ctx context.Context, key string, result []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	time.Sleep(e.delay)
	if err := e.Effects.Record(ctx, key, result); err != nil || !e.lost {
		return err
	}
	return errors.New("i/o timeout")
}

// A worker that starts shutting down (its handler's context cancelled)
// just after a mail's final "." still records it: the server has the mail,
// and the redelivery must not send it again.
func TestEmailRecordedWhileStopping(t *testing.T) {
	t.Parallel()
	s := startSMTP(t, catcher.SMTPConfig{})
	ef := coordmem.NewEffects(0)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	opts := Options{Effects: recordStore{Effects: ef}, Fault: func(p, _ string) {
		if p == FaultSent {
			cancel()
		}
	}}
	_, _ = runEmailCtx(ctx, t, opts, smtpCred(s, "none"), map[string]any{"from": "a@rune.test", "to": "ada@example.com", "subject": "x", "text": "y"}, welcomeEnv, "k")
	if got, err := ef.Begin(t.Context(), "k"); err != nil || !got.Done {
		t.Fatalf("after a cancel at the final dot the key is done %v (%v), want the send recorded", got.Done, err)
	}
}

// A record whose reply was lost may have been made: a refusal of the mail
// then withdraws it all the same, and the retry sends.
func TestEmailRefusedAfterALostRecordIsWithdrawn(t *testing.T) {
	t.Parallel()
	s := startSMTP(t, catcher.SMTPConfig{Reply: catcher.RefuseData(451, 1)})
	ef := coordmem.NewEffects(0)
	params := map[string]any{"from": "a@rune.test", "to": "ada@example.com", "subject": "x", "text": "y"}
	_, err := runEmail(t, Options{Effects: recordStore{Effects: ef, lost: true}}, smtpCred(s, "none"), params, welcomeEnv, "k")
	nodeError(t, err, CodeSMTP, true)
	if got, err := ef.Begin(t.Context(), "k"); err != nil || got.Done {
		t.Fatalf("after the refusal the key is done %v (%v), want the record withdrawn", got.Done, err)
	}
	if _, err := runEmail(t, Options{Effects: ef}, smtpCred(s, "none"), params, welcomeEnv, "k"); err != nil || len(s.Mails()) != 1 {
		t.Fatalf("retry: %v, %d mails; want the mail sent", err, len(s.Mails()))
	}
}

// Two attempts of one send at once (a message redelivered while its first
// worker still waits for the server's reply): the second is accepted and
// recorded, the first is then refused and withdraws its record. The second
// attempt's record stays, and a later retry sends nothing: their outputs
// are alike, but each record names its attempt.
func TestEmailWithdrawKeepsAnotherAttemptsRecord(t *testing.T) {
	t.Parallel()
	refusing := startSMTP(t, catcher.SMTPConfig{Reply: catcher.RefuseData(451, 0)})
	accepting := startSMTP(t, catcher.SMTPConfig{})
	ef := coordmem.NewEffects(0)
	params := map[string]any{"from": "a@rune.test", "to": "ada@example.com", "subject": "x", "text": "y"}
	var second atomic.Bool
	var secondErr error
	opts := Options{Effects: ef}
	opts.Fault = func(p, _ string) {
		if p == FaultSent {
			// The first attempt has written its data and not yet
			// recorded it: the second one sends now.
			if second.CompareAndSwap(false, true) {
				_, secondErr = runEmail(t, opts, smtpCred(accepting, "none"), params, welcomeEnv, "k")
			}
		}
	}
	_, err := runEmail(t, opts, smtpCred(refusing, "none"), params, welcomeEnv, "k")
	nodeError(t, err, CodeSMTP, true)
	if secondErr != nil || len(accepting.Mails()) != 1 {
		t.Fatalf("second attempt: %v, %d mails; want it sent", secondErr, len(accepting.Mails()))
	}
	if _, err := runEmail(t, Options{Effects: ef}, smtpCred(accepting, "none"), params, welcomeEnv, "k"); err != nil {
		t.Fatal(err)
	}
	if n := len(accepting.Mails()); n != 1 {
		t.Fatalf("%d mails after the retry, want 1: the first attempt withdrew the second one's record", n)
	}
}

// The time a record takes does not come out of the wait for the server's
// reply to the data: a record slower than SMTPTimeout still reads the 250.
func TestEmailSlowRecordKeepsTheReply(t *testing.T) {
	t.Parallel()
	s := startSMTP(t, catcher.SMTPConfig{})
	opts := Options{Effects: recordStore{Effects: coordmem.NewEffects(0), delay: 1500 * time.Millisecond}, SMTPTimeout: time.Second}
	if _, err := runEmail(t, opts, smtpCred(s, "none"), map[string]any{"from": "a@rune.test", "to": "ada@example.com", "subject": "x", "text": "y"}, welcomeEnv, "k"); err != nil {
		t.Fatalf("a record of 1.5 s with SMTPTimeout 1 s: %v", err)
	}
	if len(s.Mails()) != 1 {
		t.Fatalf("%d mails, want 1", len(s.Mails()))
	}
}

func TestEmailCheck(t *testing.T) {
	t.Parallel()
	ps := checkNode(t, workflow.Node{ID: "e", Type: "email", Parameters: map[string]any{
		"to": []any{3}, "subject": "{% if %}", "headers": map[string]any{"Subject": "x", "Bad Name": "y"}, "colour": "red",
	}})
	wantProblems(t, ps, map[string]string{
		"nodes[1].parameters.to[0]":               "must be a string",
		"nodes[1].parameters.subject":             "",
		"nodes[1].parameters":                     "needs a body",
		"nodes[1].parameters.headers.Subject":     "set by the email node",
		`nodes[1].parameters.headers["Bad Name"]`: "not a valid header name",
		"nodes[1].parameters.colour":              "unknown parameter",
		"nodes[1].credentials.ref":                "required",
	})
}

// Seed 003 names an email's content body (issue 30, item 7): it is sent as
// text/plain, or as text/html when it holds an HTML tag; with text or html
// beside it validation refuses the node.
func TestEmailBody(t *testing.T) {
	t.Parallel()
	s := startSMTP(t, catcher.SMTPConfig{})
	for i, tc := range []struct{ body, wantType, want string }{
		{"Hi {{ $trigger.name }}, 3 < 4 & 5 > 2", "text/plain", "Hi ada, 3 < 4 & 5 > 2"},
		{"<p>Hi <b>{{ $trigger.name }}</b></p>", "text/html", "<p>Hi <b>ada</b></p>"},
		{"Hello<br>{{ $trigger.name }}", "text/html", "Hello<br>ada"},
		{"a <b@example.com> wrote", "text/plain", "a <b@example.com> wrote"},
	} {
		key := "body" + strconv.Itoa(i)
		if _, err := runEmail(t, Options{}, smtpCred(s, "none"), map[string]any{
			"from": "hello@rune.test", "to": "{{ $trigger.email }}", "subject": "Hi", "body": tc.body,
		}, welcomeEnv, key); err != nil {
			t.Fatalf("body %q: %v", tc.body, err)
		}
		var m *catcher.Mail
		for _, got := range s.Mails() {
			if strings.Contains(got.Header.Get("Message-Id"), key+"@") {
				m = &got
			}
		}
		if m == nil {
			t.Fatalf("body %q: no mail", tc.body)
		}
		ct, _, _ := mime.ParseMediaType(m.Header.Get("Content-Type"))
		if ct != tc.wantType {
			t.Errorf("body %q sent as %s, want %s", tc.body, ct, tc.wantType)
		}
		if got := decodedBody(t, *m); got != tc.want {
			t.Errorf("body %q sent as %q, want %q", tc.body, got, tc.want)
		}
	}
	for _, tc := range []struct {
		params map[string]any
		want   map[string]string
	}{
		{map[string]any{"to": "a@b.c", "subject": "s", "body": "x", "text": "y"}, map[string]string{"nodes[1].parameters.body": "set either body or text/html, not both"}},
		{map[string]any{"to": "a@b.c", "subject": "s", "body": "x", "html": "<p>y</p>"}, map[string]string{"nodes[1].parameters.body": "not both"}},
		{map[string]any{"to": "a@b.c", "subject": "s"}, map[string]string{"nodes[1].parameters": "an email needs a body: set body, or text, html or both"}},
		{map[string]any{"to": "a@b.c", "subject": "s", "body": "{{ $x"}, map[string]string{"nodes[1].parameters.body": ""}},
	} {
		wantProblems(t, checkNode(t, emailNode(tc.params)), tc.want)
	}
}

// decodedBody is the decoded body of a single-part mail.
func decodedBody(t *testing.T, m catcher.Mail) string {
	t.Helper()
	msg, err := netmail.ReadMessage(bytes.NewReader(m.Data))
	if err != nil {
		t.Fatal(err)
	}
	var r io.Reader = msg.Body
	switch strings.ToLower(msg.Header.Get("Content-Transfer-Encoding")) {
	case "quoted-printable":
		r = quotedprintable.NewReader(r)
	case "base64":
		r = base64.NewDecoder(base64.StdEncoding, r)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimRight(string(b), "\r\n")
}

// The SMTP port is checked at the door, 1 to 65535 inclusive.
func TestSMTPPortRange(t *testing.T) {
	t.Parallel()
	for port, ok := range map[string]bool{"0": false, "1": true, "65535": true, "65536": false, "-5": false, "x": false} {
		c, err := parseSMTP("mail", map[string]string{"type": "smtp", "host": "127.0.0.1", "port": port})
		if ok != (err == nil) || (ok && strconv.Itoa(c.port) != port) {
			t.Errorf("port %q: %+v, %v; want accepted %v", port, c.port, err, ok)
		}
		if !ok && (err == nil || !strings.Contains(err.Error(), `field "port"`)) {
			t.Errorf("port %q: error %v does not name the field", port, err)
		}
	}
}

// A Message-ID takes its domain from the sender, or rune.invalid when the
// sender gives none; its local part is the send's idempotency key.
func TestMessageIDDomain(t *testing.T) {
	in := &node.Input{IdempotencyKey: "k1", ExecutionID: "e", NodeID: "n", Attempt: 2}
	for from, want := range map[string]string{"a@rune.test": "k1@rune.test", "a@": "k1@rune.invalid", "nobody": "k1@rune.invalid"} {
		if got := messageID(in, from); got != want {
			t.Errorf("messageID(from %q) = %q, want %q", from, got, want)
		}
	}
	if got := messageID(&node.Input{ExecutionID: "e", NodeID: "n", Attempt: 2}, "a@rune.test"); got != "e.n.2@rune.test" {
		t.Errorf("messageID without a key = %q, want e.n.2@rune.test", got)
	}
}
