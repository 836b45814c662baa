package nodes

import (
	"strings"
	"testing"
	"time"

	"github.com/rune-org/rune/internal/catcher"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/store/storetest"
	"github.com/rune-org/rune/workflow"
)

var tplT0 = time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)

// templateStore is a real SQLite store holding a layout "base" and two
// versions of "welcome" (at tplT0+10s and +20s) and "reminder" (an SMS).
func templateStore(t *testing.T) store.Store {
	t.Helper()
	s := storetest.SQLite(t)
	for _, in := range []store.TemplateInput{
		{Name: "base", Subject: "[Acme] {{ content }}", HTML: "<html><body>{{ content }}<hr>{{ $trigger.plan }}</body></html>", At: tplT0},
		{Name: "welcome", Subject: "Hi {{ $trigger.name }}", Text: "v1 text for {{ $trigger.name }}",
			HTML: "<p>v1 {{ $trigger.name | upcase }}</p>", Layout: "base", At: tplT0.Add(10 * time.Second)},
		{Name: "welcome", Subject: "Hello {{ $trigger.name }}", Text: "v2 text", HTML: "<p>v2</p>", Layout: "base", At: tplT0.Add(20 * time.Second)},
		{Name: "reminder", Body: "Reminder for {{ $trigger.name }}", At: tplT0},
		{Name: "orphan", Text: "x", Layout: "missing", At: tplT0},
	} {
		if _, err := s.PutTemplate(t.Context(), in); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func runTemplateEmail(t *testing.T, opts Options, s *catcher.SMTP, params map[string]any, started time.Time) (node.Result, error) {
	t.Helper()
	r := compileNode(t, NewRegistry(opts), emailNode(params))
	return r.Run(t.Context(), &node.Input{Env: welcomeEnv, NodeID: "welcome", ExecutionID: "ex1", Attempt: 1,
		IdempotencyKey: "k-" + started.Format("150405"), StartedAt: started, Now: started.Add(time.Hour),
		Secrets: mapSecrets{"mail": smtpCred(s, "none", "from", "hello@rune.test")}})
}

// An email node with "template" renders the version current when the
// execution started, wrapped in its layout, and says which in its output.
func TestEmailTemplatePinnedAndWrapped(t *testing.T) {
	t.Parallel()
	st := templateStore(t)
	s := startSMTP(t, catcher.SMTPConfig{})
	opts := Options{Templates: st}
	params := map[string]any{"to": "{{ $trigger.email }}", "template": "welcome"}
	for i, c := range []struct {
		started        time.Time
		subject, text  string
		html, template string
		version        float64
	}{
		{tplT0.Add(15 * time.Second), "[Acme] Hi ada", "v1 text for ada", "<html><body><p>v1 ADA</p><hr>pro</body></html>", "welcome", 1},
		{tplT0.Add(20 * time.Second), "[Acme] Hello ada", "v2 text", "<html><body><p>v2</p><hr>pro</body></html>", "welcome", 2},
	} {
		res, err := runTemplateEmail(t, opts, s, params, c.started)
		if err != nil {
			t.Fatalf("started %s: %v", c.started, err)
		}
		m := s.Mails()[i]
		if got := m.Header.Get("Subject"); got != c.subject {
			t.Errorf("started %s: Subject %q, want %q", c.started, got, c.subject)
		}
		parts := multipartBodies(t, m)
		if parts["text/plain"] != c.text || parts["text/html"] != c.html {
			t.Errorf("started %s: parts %q, want text %q html %q", c.started, parts, c.text, c.html)
		}
		tpl, _ := res.Output.(map[string]any)["template"].(map[string]any)
		if tpl["name"] != c.template || tpl["version"] != int(c.version) {
			t.Errorf("started %s: output template %v, want %s version %v", c.started, tpl, c.template, c.version)
		}
	}
}

// The node's own subject wins over the template's; its own content
// replaces the template's.
func TestEmailTemplateOverrides(t *testing.T) {
	t.Parallel()
	s := startSMTP(t, catcher.SMTPConfig{})
	_, err := runTemplateEmail(t, Options{Templates: templateStore(t)}, s, map[string]any{"to": "a@example.com",
		"template": "welcome", "subject": "Own {{ $trigger.name }}", "body": "own body"}, tplT0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	m := s.Mails()[0]
	if got := m.Header.Get("Subject"); got != "Own ada" {
		t.Errorf("Subject %q, want the node's", got)
	}
	if !strings.Contains(string(m.Data), "own body") || strings.Contains(string(m.Data), "v2") {
		t.Errorf("the node's body should replace the template's:\n%s", m.Data)
	}
}

// A template (or a layout) that did not exist when the execution started
// fails the node with TEMPLATE_NOT_FOUND, not retryable; so does a process
// with no template store. Nothing is sent.
func TestTemplateNotFound(t *testing.T) {
	t.Parallel()
	st := templateStore(t)
	s := startSMTP(t, catcher.SMTPConfig{})
	for _, c := range []struct {
		name    string
		opts    Options
		tpl     string
		started time.Time
		want    string
	}{
		{"unknown", Options{Templates: st}, "nope", tplT0.Add(time.Minute), `template "nope": none current at`},
		{"before its first version", Options{Templates: st}, "welcome", tplT0.Add(5 * time.Second), `template "welcome": none current at 2026-11-27T09:00:05Z`},
		{"layout missing", Options{Templates: st}, "orphan", tplT0.Add(time.Minute), `layout "missing" of template "orphan"`},
		{"no store", Options{}, "welcome", tplT0.Add(time.Minute), "no template store"},
	} {
		_, err := runTemplateEmail(t, c.opts, s, map[string]any{"to": "a@example.com", "template": c.tpl}, c.started)
		ne := nodeError(t, err, CodeTemplateNotFound, false)
		if !strings.Contains(ne.Message, c.want) || ne.Details["parameter"] != "parameters.template" {
			t.Errorf("%s: %q %v, want it to contain %q", c.name, ne.Message, ne.Details, c.want)
		}
	}
	if n := len(s.Mails()); n != 0 {
		t.Fatalf("%d mails sent, want none", n)
	}
}

// An sms node takes its body from the template's body.
func TestSMSTemplate(t *testing.T) {
	t.Parallel()
	s := startSMS(t, catcher.SMSConfig{Accounts: map[string]string{"AC123": "tok-secret-9"}})
	n := workflow.Node{ID: "remind", Type: "sms", Parameters: map[string]any{"to": "+4915112345678", "template": "reminder"},
		Credentials: &workflow.CredentialRef{Ref: "texts"}}
	r := compileNode(t, NewRegistry(Options{Templates: templateStore(t)}), n)
	res, err := r.Run(t.Context(), &node.Input{Env: welcomeEnv, NodeID: "remind", ExecutionID: "ex1", Attempt: 1,
		IdempotencyKey: "k1", StartedAt: tplT0.Add(time.Minute), Secrets: mapSecrets{"texts": twilioCred(s)}})
	if err != nil {
		t.Fatal(err)
	}
	if msgs := s.Messages(); len(msgs) != 1 || msgs[0].Body != "Reminder for ada" {
		t.Fatalf("messages %+v, want one with the template's body", msgs)
	}
	if tpl := res.Output.(map[string]any)["template"]; tpl == nil {
		t.Errorf("output %v names no template", res.Output)
	}
}

// rune validate: "template" replaces the required subject and body; its
// value must be a template's name.
func TestTemplateCheck(t *testing.T) {
	t.Parallel()
	mail := func(p map[string]any) workflow.Node { return emailNode(p) }
	text := func(p map[string]any) workflow.Node {
		return workflow.Node{ID: "remind", Type: "sms", Parameters: p, Credentials: &workflow.CredentialRef{Ref: "texts"}}
	}
	wantProblems(t, checkNode(t, mail(map[string]any{"to": "a@example.com", "template": "welcome"})), nil)
	wantProblems(t, checkNode(t, text(map[string]any{"to": "+4915112345678", "template": "reminder"})), nil)
	wantProblems(t, checkNode(t, mail(map[string]any{"to": "a@example.com", "template": "no spaces"})),
		map[string]string{"nodes[1].parameters.template": "must be a template's name", "nodes[1].parameters.subject": "required", "nodes[1].parameters": "needs a body"})
	wantProblems(t, checkNode(t, text(map[string]any{"to": "+4915112345678", "template": 7.0})),
		map[string]string{"nodes[1].parameters.template": "must be a template's name", "nodes[1].parameters.body": "required"})
}

// A template rendered for a subscriber sees the subscriber's variables,
// as the node's own fields do, and goes to the subscriber's address.
func TestTemplateForSubscriber(t *testing.T) {
	t.Parallel()
	st := templateStore(t)
	if _, err := st.PutTemplate(t.Context(), store.TemplateInput{Name: "greet", Subject: "Hi {{ subscriber.data.first_name }}",
		Text: "for {{ subscriber.email }} on {{ $trigger.plan }}", At: tplT0}); err != nil {
		t.Fatal(err)
	}
	s := startSMTP(t, catcher.SMTPConfig{})
	opts := Options{Templates: st, Subscribers: newFakeSubscribers()}
	n := workflow.Node{ID: "send", Type: "email", Parameters: map[string]any{"subscriber": "ann", "template": "greet"},
		Credentials: &workflow.CredentialRef{Ref: "c"}}
	r := compileNode(t, NewRegistry(opts), n)
	if _, err := r.Run(t.Context(), &node.Input{Env: welcomeEnv, NodeID: "send", ExecutionID: "ex1", Attempt: 1, IdempotencyKey: "k-greet",
		StartedAt: tplT0.Add(time.Minute), Now: tplT0.Add(time.Minute), Secrets: mapSecrets{"c": smtpCred(s, "none", "from", "news@rune.test")}}); err != nil {
		t.Fatal(err)
	}
	mails := s.Inboxes()["ann@example.com"]
	if len(mails) != 1 || mails[0].Header.Get("Subject") != "Hi Ann" || !strings.Contains(string(mails[0].Data), "for ann@example.com on pro") {
		t.Fatalf("ann's mails %+v, want one with the subscriber's variables rendered", mails)
	}
}
