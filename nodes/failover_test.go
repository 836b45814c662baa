package nodes

import (
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	coordmem "github.com/rune-org/rune/coord/memory"
	"github.com/rune-org/rune/internal/catcher"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/workflow"
)

// runChain runs a node of kind (email or sms) whose credentials are refs,
// resolved from secrets.
func runChain(t *testing.T, opts Options, kind string, refs []string, secrets mapSecrets, params map[string]any, key string) (node.Result, error) {
	t.Helper()
	n := workflow.Node{ID: "n", Type: kind, Parameters: params, Credentials: &workflow.CredentialRef{Ref: refs[0], Failover: refs[1:]}}
	r := compileNode(t, NewRegistry(opts), n)
	return r.Run(t.Context(), &node.Input{Env: welcomeEnv, NodeID: "n", ExecutionID: "ex1", Attempt: 1, IdempotencyKey: key, Secrets: secrets})
}

// deadPort is a loopback port nothing listens on.
func deadPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	return port
}

// A primary SMS provider that answers 5xx, cannot be reached or does not
// answer in time: the same attempt sends through the backup, with the same
// idempotency key, and the output names the credential that sent and the
// one that failed. A 4xx does not fail over.
func TestSMSFailover(t *testing.T) {
	t.Parallel()
	backup := startSMS(t, catcher.SMSConfig{Accounts: map[string]string{"AC123": "tok-secret-9"}})
	t.Run("5xx", func(t *testing.T) {
		t.Parallel()
		primary := startSMS(t, catcher.SMSConfig{Reply: func(int) (int, string) { return 503, "" }})
		res, err := runChain(t, Options{}, "sms", []string{"sms-primary", "sms-backup"}, mapSecrets{
			"sms-primary": {"type": "webhook", "url": primary.URL() + "/webhook"},
			"sms-backup":  twilioCred(backup),
		}, smsParams, "key-5xx")
		if err != nil {
			t.Fatal(err)
		}
		out := res.Output.(map[string]any)
		var sent *catcher.SMS
		for _, m := range backup.Messages() {
			if m.IdempotencyKey == "key-5xx" {
				sent = &m
			}
		}
		if sent == nil || primary.Requests() != 1 || len(primary.Messages()) != 0 {
			t.Fatalf("backup kept %v, primary had %d requests: want the primary tried once, the backup to send", sent, primary.Requests())
		}
		fo, _ := out["failover"].([]any)
		if out["credential"] != "sms-backup" || out["provider"] != "twilio" || out["message_id"] != sent.ID || len(fo) != 1 ||
			fo[0].(map[string]any)["credential"] != "sms-primary" || !strings.Contains(fo[0].(map[string]any)["error"].(string), "503") {
			t.Fatalf("output %v", out)
		}
	})
	t.Run("connection_refused", func(t *testing.T) {
		t.Parallel()
		res, err := runChain(t, Options{}, "sms", []string{"sms-primary", "sms-backup"}, mapSecrets{
			"sms-primary": {"type": "webhook", "url": "http://127.0.0.1:" + deadPort(t) + "/webhook"},
			"sms-backup":  twilioCred(backup),
		}, smsParams, "key-conn")
		if err != nil {
			t.Fatal(err)
		}
		if out := res.Output.(map[string]any); out["credential"] != "sms-backup" {
			t.Fatalf("output %v", out)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		var release atomic.Bool
		primary := startSMS(t, catcher.SMSConfig{Delay: func(int) time.Duration {
			if release.Load() {
				return 0
			}
			return 3 * time.Second
		}})
		defer release.Store(true)
		start := time.Now()
		res, err := runChain(t, Options{ProviderTimeout: 200 * time.Millisecond}, "sms", []string{"sms-primary", "sms-backup"}, mapSecrets{
			"sms-primary": {"type": "webhook", "url": primary.URL() + "/webhook"},
			"sms-backup":  twilioCred(backup),
		}, smsParams, "key-slow")
		if err != nil {
			t.Fatal(err)
		}
		out := res.Output.(map[string]any)
		fo, _ := out["failover"].([]any)
		if out["credential"] != "sms-backup" || len(fo) != 1 || !strings.Contains(fo[0].(map[string]any)["error"].(string), CodeProviderTimeout) {
			t.Fatalf("output %v", out)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("took %s: the primary's timeout was not applied", d)
		}
	})
	t.Run("4xx_stays", func(t *testing.T) {
		t.Parallel()
		primary := startSMS(t, catcher.SMSConfig{Reply: func(int) (int, string) { return 400, "" }})
		before := len(backup.Messages())
		_, err := runChain(t, Options{}, "sms", []string{"sms-primary", "sms-backup"}, mapSecrets{
			"sms-primary": {"type": "webhook", "url": primary.URL() + "/webhook"},
			"sms-backup":  twilioCred(backup),
		}, smsParams, "key-4xx")
		nodeError(t, err, CodeSMS, false)
		for _, m := range backup.Messages()[before:] {
			if m.IdempotencyKey == "key-4xx" {
				t.Fatal("a 4xx failed over to the backup")
			}
		}
	})
	t.Run("all_fail", func(t *testing.T) {
		t.Parallel()
		p1 := startSMS(t, catcher.SMSConfig{Reply: func(int) (int, string) { return 500, "" }})
		p2 := startSMS(t, catcher.SMSConfig{Reply: func(int) (int, string) { return 502, "" }})
		_, err := runChain(t, Options{}, "sms", []string{"a", "b"}, mapSecrets{
			"a": {"type": "webhook", "url": p1.URL() + "/webhook"},
			"b": {"type": "webhook", "url": p2.URL() + "/webhook"},
		}, smsParams, "key-all")
		ne := nodeError(t, err, CodeSMS, true)
		fo, _ := ne.Details["failover"].([]any)
		if len(fo) != 1 || ne.Details["status"] != 502 || !strings.Contains(ne.Message, `after "a" failed`) {
			t.Fatalf("error %v %v", ne.Message, ne.Details)
		}
	})
}

// An email whose primary SMTP server cannot be reached, or refuses every
// sender with a 5xx, goes out through the backup with the same
// Message-ID; a recipient refused with a 5xx does not fail over (the
// backup would refuse it too).
func TestEmailFailover(t *testing.T) {
	t.Parallel()
	backup := startSMTP(t, catcher.SMTPConfig{})
	params := map[string]any{"from": "news@rune.test", "to": "{{ $trigger.email }}", "subject": "hi", "text": "x"}
	sentWith := func(key string) []catcher.Mail {
		var out []catcher.Mail
		for _, m := range backup.Mails() {
			if strings.HasPrefix(m.Header.Get("Message-Id"), "<"+key+"@") {
				out = append(out, m)
			}
		}
		return out
	}
	t.Run("connection_refused", func(t *testing.T) {
		t.Parallel()
		res, err := runChain(t, Options{}, "email", []string{"mail-primary", "mail-backup"}, mapSecrets{
			"mail-primary": {"type": "smtp", "host": "127.0.0.1", "port": deadPort(t), "tls": "none"},
			"mail-backup":  smtpCred(backup, "none"),
		}, params, "ekey-conn")
		if err != nil {
			t.Fatal(err)
		}
		out := res.Output.(map[string]any)
		if got := sentWith("ekey-conn"); len(got) != 1 || out["credential"] != "mail-backup" || out["message_id"] != got[0].Header.Get("Message-Id") {
			t.Fatalf("output %v, %d mails", out, len(got))
		}
	})
	t.Run("554_at_mail", func(t *testing.T) {
		t.Parallel()
		primary := startSMTP(t, catcher.SMTPConfig{Reply: catcher.RefuseMail(554)})
		res, err := runChain(t, Options{}, "email", []string{"mail-primary", "mail-backup"}, mapSecrets{
			"mail-primary": smtpCred(primary, "none"),
			"mail-backup":  smtpCred(backup, "none"),
		}, params, "ekey-554")
		if err != nil {
			t.Fatal(err)
		}
		out := res.Output.(map[string]any)
		fo, _ := out["failover"].([]any)
		if len(sentWith("ekey-554")) != 1 || out["credential"] != "mail-backup" || len(fo) != 1 {
			t.Fatalf("output %v", out)
		}
	})
	t.Run("rcpt_refused_stays", func(t *testing.T) {
		t.Parallel()
		primary := startSMTP(t, catcher.SMTPConfig{Reply: func(stage, _ string) error {
			if stage == "RCPT" {
				return &smtp.SMTPError{Code: 550, Message: "no such user"}
			}
			return nil
		}})
		_, err := runChain(t, Options{}, "email", []string{"mail-primary", "mail-backup"}, mapSecrets{
			"mail-primary": smtpCred(primary, "none"),
			"mail-backup":  smtpCred(backup, "none"),
		}, params, "ekey-rcpt")
		nodeError(t, err, CodeSMTP, false)
		if got := sentWith("ekey-rcpt"); len(got) != 0 {
			t.Fatal("a refused recipient failed over to the backup")
		}
	})
	// Data refused after the "." was written: the send was handed over
	// once, so no other server is tried.
	t.Run("data_refused_stays", func(t *testing.T) {
		t.Parallel()
		primary := startSMTP(t, catcher.SMTPConfig{Reply: catcher.RefuseData(554, 0)})
		_, err := runChain(t, Options{Effects: coordmem.NewEffects(0)}, "email", []string{"mail-primary", "mail-backup"}, mapSecrets{
			"mail-primary": smtpCred(primary, "none"),
			"mail-backup":  smtpCred(backup, "none"),
		}, params, "ekey-data")
		nodeError(t, err, CodeSMTP, false)
		if len(sentWith("ekey-data")) != 0 || len(primary.Refused()) != 1 {
			t.Fatal("a mail refused after its data failed over")
		}
	})
}

// A failover list is checked: not on http, not too long, no repeats.
func TestCredentialListCheck(t *testing.T) {
	t.Parallel()
	n := workflow.Node{ID: "n", Type: "http", Parameters: map[string]any{"url": "https://example.com"},
		Credentials: &workflow.CredentialRef{Ref: "a", Failover: []string{"b"}}}
	wantProblems(t, checkNode(t, n), map[string]string{"nodes[1].credentials.ref": "for email and sms nodes"})
}
