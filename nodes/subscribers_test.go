package nodes

import (
	"context"
	"errors"
	"fmt"
	"testing"

	coordmem "github.com/rune-org/rune/coord/memory"
	"github.com/rune-org/rune/internal/catcher"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/workflow"
)

// fakeSubscribers is a Subscribers of a map; a subscriber's opt-outs are
// "channel:x", "category:x" and "workflow:x" entries.
type fakeSubscribers struct {
	subs map[string]*Subscriber
	off  map[string]map[string]bool
	err  error
}

func (f *fakeSubscribers) Subscriber(_ context.Context, id string) (*Subscriber, error) {
	if f.err != nil {
		return nil, f.err
	}
	s, ok := f.subs[id]
	if !ok {
		return nil, fmt.Errorf("subscriber %q: %w", id, ErrNoSubscriber)
	}
	off := f.off[id]
	c := *s
	c.Allows = func(channel, category, wf string) bool {
		return !off["channel:"+channel] && !off["category:"+category] && !off["workflow:"+wf]
	}
	return &c, nil
}

func (f *fakeSubscribers) UnsubscribeURL(id, category string) string {
	return "https://rune.example.com/v1/unsubscribe/" + id + "-" + category
}

func newFakeSubscribers() *fakeSubscribers {
	return &fakeSubscribers{
		subs: map[string]*Subscriber{
			"ann": {ID: "ann", Email: "ann@example.com", Phone: "+1 (415) 555-0100", Locale: "en", Data: map[string]any{"first_name": "Ann"}},
			"bob": {ID: "bob", Email: "bob@example.com", Phone: "+14155550101"},
			"cy":  {ID: "cy", Phone: "+14155550102"},
		},
		off: map[string]map[string]bool{"bob": {"category:promo": true, "channel:sms": true, "workflow:wf_quiet": true}},
	}
}

// runSubscriberNode runs an email or sms node naming a subscriber.
func runSubscriberNode(t *testing.T, opts Options, typ string, cred map[string]string, params map[string]any, wf string) (node.Result, error) {
	t.Helper()
	n := workflow.Node{ID: "send", Type: typ, Parameters: params, Credentials: &workflow.CredentialRef{Ref: "c"}}
	r := compileNode(t, NewRegistry(opts), n)
	return r.Run(t.Context(), &node.Input{Env: welcomeEnv, NodeID: "send", ExecutionID: "ex1", WorkflowID: wf, Attempt: 1,
		IdempotencyKey: fmt.Sprintf("k-%s-%v-%v-%v-%s", typ, params["subscriber"], params["category"], params["critical"], wf), Secrets: mapSecrets{"c": cred}})
}

// An email to a subscriber goes to its address, renders its variables and
// carries the one-click headers for its category; the mailto comes from
// the credential.
func TestEmailSubscriber(t *testing.T) {
	t.Parallel()
	s := startSMTP(t, catcher.SMTPConfig{})
	opts := Options{Subscribers: newFakeSubscribers(), Effects: coordmem.NewEffects(0)}
	params := map[string]any{"subscriber": "{{ $trigger.name | replace: 'ada', 'ann' }}", "category": "promo",
		"subject": "Hi {{ subscriber.data.first_name }}", "text": "{{ subscriber.email }} {{ subscriber.locale }} {{ $trigger.plan }}"}
	res, err := runSubscriberNode(t, opts, "email", smtpCred(s, "none", "from", "news@rune.test", "unsubscribe_mailto", "leave@rune.test"), params, "wf")
	if err != nil {
		t.Fatal(err)
	}
	out := res.Output.(map[string]any)
	if out["sent"] != true || out["subscriber"] != "ann" {
		t.Errorf("output %v", out)
	}
	mails := s.Inboxes()["ann@example.com"]
	if len(mails) != 1 {
		t.Fatalf("ann got %d mails", len(mails))
	}
	h := mails[0].Header
	if h.Get("Subject") != "Hi Ann" || h.Get("List-Unsubscribe") != "<https://rune.example.com/v1/unsubscribe/ann-promo>, <mailto:leave@rune.test?subject=unsubscribe%20promo>" ||
		h.Get("List-Unsubscribe-Post") != "List-Unsubscribe=One-Click" {
		t.Errorf("headers %v", h)
	}
	// No category: no List-Unsubscribe.
	delete(params, "category")
	params["subscriber"] = "cy"
	params["to"] = "cy@example.com"
	if _, err := runSubscriberNode(t, opts, "email", smtpCred(s, "none", "from", "news@rune.test"), params, "wf"); err != nil {
		t.Fatal(err)
	}
	if m := s.Inboxes()["cy@example.com"]; len(m) != 1 || m[0].Header.Get("List-Unsubscribe") != "" {
		t.Fatalf("cy's mails %+v", m)
	}
}

// A send the preferences forbid is not made: the node succeeds with sent
// false and reason OPTED_OUT, for a category, a channel and a workflow;
// critical sends all the same.
func TestSubscriberOptedOut(t *testing.T) {
	t.Parallel()
	s := startSMTP(t, catcher.SMTPConfig{})
	texts := startSMS(t, catcher.SMSConfig{Accounts: map[string]string{"AC123": "tok-secret-9"}})
	opts := Options{Subscribers: newFakeSubscribers()}
	mail := smtpCred(s, "none", "from", "news@rune.test")
	for _, c := range []struct {
		typ, category, wf string
		critical          bool
		sent              bool
	}{
		{"email", "promo", "wf", false, false},
		{"email", "news", "wf", false, true},
		{"email", "news", "wf_quiet", false, false},
		{"email", "promo", "wf", true, true},
		{"sms", "news", "wf", false, false},
		{"sms", "news", "wf", true, true},
	} {
		params := map[string]any{"subscriber": "bob", "category": c.category, "critical": c.critical}
		cred := mail
		if c.typ == "email" {
			params["subject"], params["text"] = "Hi", "x"
		} else {
			params["body"] = "x"
			cred = twilioCred(texts)
		}
		res, err := runSubscriberNode(t, opts, c.typ, cred, params, c.wf)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		out := res.Output.(map[string]any)
		if c.sent && out["sent"] != true || !c.sent && (len(out) != 2 || out["sent"] != false || out["reason"] != OptedOut) {
			t.Errorf("%+v: output %v", c, out)
		}
	}
	if got := len(s.Inboxes()["bob@example.com"]); got != 2 {
		t.Errorf("bob got %d mails, want 2 (news, and the critical promo)", got)
	}
	if m := texts.Messages(); len(m) != 1 || m[0].To != "+14155550101" {
		t.Errorf("texts %+v, want the critical one", m)
	}
}

// The sms node's to defaults to the subscriber's phone, normalised.
func TestSMSSubscriber(t *testing.T) {
	t.Parallel()
	texts := startSMS(t, catcher.SMSConfig{Accounts: map[string]string{"AC123": "tok-secret-9"}})
	res, err := runSubscriberNode(t, Options{Subscribers: newFakeSubscribers()}, "sms", twilioCred(texts),
		map[string]any{"subscriber": "ann", "body": "Hi {{ subscriber.data.first_name }}"}, "wf")
	if err != nil {
		t.Fatal(err)
	}
	if m := texts.Messages(); len(m) != 1 || m[0].To != "+14155550100" || m[0].Body != "Hi Ann" || res.Output.(map[string]any)["subscriber"] != "ann" {
		t.Fatalf("texts %+v, output %v", m, res.Output)
	}
}

// Failures: an unknown subscriber (SUBSCRIBER_NOT_FOUND, not retried), no
// subscribers in the runtime (rune run), a store that fails (retried), a
// subscriber without the channel's address.
func TestSubscriberErrors(t *testing.T) {
	t.Parallel()
	s := startSMTP(t, catcher.SMTPConfig{})
	mail := smtpCred(s, "none", "from", "news@rune.test")
	params := map[string]any{"subscriber": "{{ $trigger.who }}", "subject": "Hi", "text": "x"}
	env := func(who string) map[string]any { return map[string]any{"$trigger": map[string]any{"who": who}} }
	runWith := func(opts Options, who string) error {
		n := workflow.Node{ID: "send", Type: "email", Parameters: params, Credentials: &workflow.CredentialRef{Ref: "c"}}
		_, err := compileNode(t, NewRegistry(opts), n).Run(t.Context(), &node.Input{Env: env(who), NodeID: "send", ExecutionID: "ex1", Attempt: 1,
			Secrets: mapSecrets{"c": mail}})
		return err
	}
	nodeError(t, runWith(Options{Subscribers: newFakeSubscribers()}, "nobody"), CodeSubscriberNotFound, false)
	nodeError(t, runWith(Options{}, "ann"), CodeSubscribers, false)
	nodeError(t, runWith(Options{Subscribers: &fakeSubscribers{err: errors.New("connection refused")}}, "ann"), CodeSubscribers, true)
	nodeError(t, runWith(Options{Subscribers: newFakeSubscribers()}, "cy"), CodeInvalidAddress, false)
	nodeError(t, runWith(Options{Subscribers: newFakeSubscribers()}, ""), CodeInvalidParameter, false)
	if n := len(s.Mails()); n != 0 {
		t.Fatalf("%d mails sent", n)
	}
}

// Check: with a subscriber, to is optional; category and critical are
// checked.
func TestSubscriberCheck(t *testing.T) {
	t.Parallel()
	ok := workflow.Node{ID: "n", Type: "email", Credentials: &workflow.CredentialRef{Ref: "c"},
		Parameters: map[string]any{"subscriber": "{{ $trigger.id }}", "subject": "s", "text": "t", "category": "news", "critical": true}}
	wantProblems(t, checkNode(t, ok), nil)
	bad := workflow.Node{ID: "n", Type: "sms", Credentials: &workflow.CredentialRef{Ref: "c"},
		Parameters: map[string]any{"subscriber": "u1", "body": "b", "category": "has space", "critical": "yes"}}
	wantProblems(t, checkNode(t, bad), map[string]string{"nodes[1].parameters.category": "not a category", "nodes[1].parameters.critical": "must be a boolean"})
	none := workflow.Node{ID: "n", Type: "sms", Credentials: &workflow.CredentialRef{Ref: "c"}, Parameters: map[string]any{"body": "b"}}
	wantProblems(t, checkNode(t, none), map[string]string{"nodes[1].parameters.to": "required"})
}
