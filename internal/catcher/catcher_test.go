package catcher

import (
	"net/http"
	"net/smtp"
	"net/url"
	"strings"
	"testing"
)

// The SMTP stand-in keeps what a plain client sends, with the envelope, the
// parsed header and the authenticated user; it refuses a wrong password.
func TestSMTPKeepsMailAndChecksAuth(t *testing.T) {
	t.Parallel()
	s, err := StartSMTP(SMTPConfig{Users: map[string]string{"ada": "secret"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	msg := "From: a@rune.test\r\nTo: b@rune.test\r\nSubject: hi\r\n\r\nbody\r\n"
	// net/smtp sends PLAIN to loopback servers without TLS.
	if err := smtp.SendMail(s.Addr(), smtp.PlainAuth("", "ada", "wrong", "127.0.0.1"), "a@rune.test", []string{"b@rune.test"}, []byte(msg)); err == nil {
		t.Fatal("a wrong password was accepted")
	}
	if err := smtp.SendMail(s.Addr(), smtp.PlainAuth("", "ada", "secret", "127.0.0.1"), "a@rune.test", []string{"b@rune.test", "c@rune.test"}, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	mails := s.Mails()
	if len(mails) != 1 {
		t.Fatalf("%d mails kept, want 1", len(mails))
	}
	m := mails[0]
	if m.From != "a@rune.test" || strings.Join(m.To, ",") != "b@rune.test,c@rune.test" || m.User != "ada" || m.Header.Get("Subject") != "hi" || m.TLS {
		t.Fatalf("kept %+v", m)
	}
}

// A recipient's inbox holds a mail sent again with the same Message-ID
// once; mails with another Message-ID or none are all there, and each
// envelope recipient has an inbox of their own.
func TestSMTPInboxesSuppressDuplicateMessageIDs(t *testing.T) {
	t.Parallel()
	s, err := StartSMTP(SMTPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	send := func(id string, to ...string) {
		t.Helper()
		msg := "From: a@rune.test\r\nSubject: " + id + "\r\n"
		if id != "" {
			msg += "Message-ID: <" + id + "@rune.test>\r\n"
		}
		if err := smtp.SendMail(s.Addr(), nil, "a@rune.test", to, []byte(msg+"\r\nbody\r\n")); err != nil {
			t.Fatal(err)
		}
	}
	send("k1", "b@rune.test", "c@rune.test")
	send("k1", "b@rune.test") // sent again
	send("k2", "b@rune.test")
	send("", "b@rune.test")
	send("", "b@rune.test")
	if n := len(s.Mails()); n != 5 {
		t.Fatalf("%d mails accepted, want 5", n)
	}
	subjects := func(rcpt string) string {
		var out []string
		for _, m := range s.Inboxes()[rcpt] {
			out = append(out, m.Header.Get("Subject"))
		}
		return strings.Join(out, ",")
	}
	if got := subjects("b@rune.test"); got != "k1,k2,," {
		t.Errorf("b's inbox holds %q, want k1,k2 and the two mails without a Message-ID", got)
	}
	if got := subjects("c@rune.test"); got != "k1" {
		t.Errorf("c's inbox holds %q, want k1", got)
	}
}

// The SMS stand-in answers the Twilio form with a sid, checks basic auth,
// and with Dedupe keeps one message per Idempotency-Key.
func TestSMSTwilioFormAuthAndDedupe(t *testing.T) {
	t.Parallel()
	s, err := StartSMS(SMSConfig{Accounts: map[string]string{"AC1": "tok"}, Dedupe: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	post := func(user, pass, key string) int {
		t.Helper()
		form := url.Values{"To": {"+14155550100"}, "From": {"+15550001111"}, "Body": {"hi"}}
		req, err := http.NewRequest("POST", s.URL()+"/2010-04-01/Accounts/AC1/Messages.json", strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Idempotency-Key", key)
		req.SetBasicAuth(user, pass)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("AC1", "wrong", "k1"); code != http.StatusUnauthorized {
		t.Fatalf("wrong token: status %d, want 401", code)
	}
	for _, key := range []string{"k1", "k1", "k2"} {
		if code := post("AC1", "tok", key); code != http.StatusCreated {
			t.Fatalf("status %d, want 201", code)
		}
	}
	msgs := s.Messages()
	if len(msgs) != 2 || s.Requests() != 4 {
		t.Fatalf("%d messages kept of %d requests, want 2 of 4", len(msgs), s.Requests())
	}
	if m := msgs[0]; m.To != "+14155550100" || m.Body != "hi" || m.IdempotencyKey != "k1" || m.Provider != "twilio" {
		t.Fatalf("kept %+v", m)
	}
}
