package nodes

import (
	"errors"
	"testing"
	"time"

	coordmem "github.com/rune-org/rune/coord/memory"
	"github.com/rune-org/rune/internal/catcher"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/workflow"
)

// quietUntil: a window within a day, one spanning midnight, and the DST
// days of America/New_York and Europe/Berlin (a To skipped by the
// spring-forward gap ends when the clock jumps; a To that occurs twice ends
// at its first occurrence after now).
func TestQuietUntil(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	utc := func(s string) time.Time {
		x, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	cases := []struct {
		name     string
		now      string
		from, to string
		loc      *time.Location
		want     string // "" = not quiet
	}{
		{"day window, inside", "2026-06-10T13:00:00Z", "12:00", "14:30", time.UTC, "2026-06-10T14:30:00Z"},
		{"day window, at from", "2026-06-10T12:00:00Z", "12:00", "14:30", time.UTC, "2026-06-10T14:30:00Z"},
		{"day window, at to", "2026-06-10T14:30:00Z", "12:00", "14:30", time.UTC, ""},
		{"day window, before", "2026-06-10T11:59:59Z", "12:00", "14:30", time.UTC, ""},
		{"midnight, evening", "2026-06-10T23:10:00Z", "22:00", "08:00", time.UTC, "2026-06-11T08:00:00Z"},
		{"midnight, morning", "2026-06-10T07:59:59Z", "22:00", "08:00", time.UTC, "2026-06-10T08:00:00Z"},
		{"midnight, day", "2026-06-10T12:00:00Z", "22:00", "08:00", time.UTC, ""},
		{"month end", "2026-01-31T23:00:00Z", "22:00", "08:00", time.UTC, "2026-02-01T08:00:00Z"},
		{"from equals to: none", "2026-06-10T12:00:00Z", "12:00", "12:00", time.UTC, ""},
		// New York: 22:00 EDT is 02:00Z; 08:00 EDT is 12:00Z.
		{"new york summer", "2026-06-11T02:30:00Z", "22:00", "08:00", ny, "2026-06-11T12:00:00Z"},
		{"new york winter", "2026-01-11T03:30:00Z", "22:00", "08:00", ny, "2026-01-11T13:00:00Z"},
		// Spring forward 2026-03-08: 22:00 EST the evening before, 08:00 EDT after.
		{"new york spring forward", "2026-03-08T03:30:00Z", "22:00", "08:00", ny, "2026-03-08T12:00:00Z"},
		// Fall back 2026-11-01: 22:00 EDT the evening before, 08:00 EST after.
		{"new york fall back", "2026-11-01T02:30:00Z", "22:00", "08:00", ny, "2026-11-01T13:00:00Z"},
		// To in the gap (02:00-03:00 does not exist on 2026-03-08): the end is 03:00 EDT.
		{"new york to in the gap", "2026-03-08T06:30:00Z", "01:00", "02:30", ny, "2026-03-08T07:00:00Z"},
		// 01:30 occurs twice on 2026-11-01 (05:30Z EDT, 06:30Z EST).
		{"new york to twice, first", "2026-11-01T05:10:00Z", "01:00", "01:30", ny, "2026-11-01T05:30:00Z"},
		{"new york to twice, second", "2026-11-01T06:10:00Z", "01:00", "01:30", ny, "2026-11-01T06:30:00Z"},
		// Berlin springs forward 2026-03-29 02:00 CET -> 03:00 CEST (01:00Z).
		{"berlin spring forward", "2026-03-28T22:00:00Z", "22:00", "08:00", berlin, "2026-03-29T06:00:00Z"},
		{"berlin to in the gap", "2026-03-29T00:45:00Z", "01:00", "02:15", berlin, "2026-03-29T01:00:00Z"},
		// Berlin falls back 2026-10-25 03:00 CEST -> 02:00 CET (01:00Z).
		{"berlin fall back", "2026-10-24T21:00:00Z", "22:00", "08:00", berlin, "2026-10-25T07:00:00Z"},
		{"berlin to twice, second", "2026-10-25T01:05:00Z", "02:00", "02:30", berlin, "2026-10-25T01:30:00Z"},
		{"berlin not quiet", "2026-10-25T12:00:00Z", "22:00", "08:00", berlin, ""},
	}
	for _, c := range cases {
		end, quiet, err := quietUntil(utc(c.now), QuietHours{From: c.from, To: c.to}, c.loc)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		switch {
		case c.want == "" && quiet:
			t.Errorf("%s: quiet until %s, want not quiet", c.name, end.UTC().Format(time.RFC3339))
		case c.want != "" && !quiet:
			t.Errorf("%s: not quiet, want quiet until %s", c.name, c.want)
		case c.want != "" && !end.Equal(utc(c.want)):
			t.Errorf("%s: quiet until %s, want %s", c.name, end.UTC().Format(time.RFC3339), c.want)
		}
	}
	if _, _, err := quietUntil(time.Now(), QuietHours{From: "7:00", To: "08:00"}, time.UTC); err == nil {
		t.Error("from 7:00 accepted, want an error")
	}
}

// A non-critical email or sms to a subscriber in its quiet hours returns
// node.Defer until they end, sending nothing; a critical one goes out; a
// send already recorded is reported, not deferred, when its redelivery
// falls in the quiet hours.
func TestQuietHoursNodes(t *testing.T) {
	t.Parallel()
	s := startSMTP(t, catcher.SMTPConfig{})
	texts := startSMS(t, catcher.SMSConfig{Accounts: map[string]string{"AC123": "tok-secret-9"}})
	subs := newFakeSubscribers()
	subs.subs["dee"] = &Subscriber{ID: "dee", Email: "dee@example.com", Phone: "+14155550103", Timezone: "America/New_York",
		QuietHours: &QuietHours{From: "22:00", To: "08:00"}}
	opts := Options{Subscribers: subs, Effects: coordmem.NewEffects(0)}
	night := time.Date(2026, 6, 11, 2, 30, 0, 0, time.UTC) // 22:30 in New York
	day := time.Date(2026, 6, 11, 16, 0, 0, 0, time.UTC)
	run := func(typ string, critical bool, key string, now time.Time) (node.Result, error) {
		params := map[string]any{"subscriber": "dee", "critical": critical}
		cred := smtpCred(s, "none", "from", "news@rune.test")
		if typ == "email" {
			params["subject"], params["text"] = "Hi", "x"
		} else {
			params["body"] = "x"
			cred = twilioCred(texts)
		}
		n := workflow.Node{ID: "send", Type: typ, Parameters: params, Credentials: &workflow.CredentialRef{Ref: "c"}}
		r := compileNode(t, NewRegistry(opts), n)
		return r.Run(t.Context(), &node.Input{Env: welcomeEnv, NodeID: "send", ExecutionID: "ex1", WorkflowID: "wf", Attempt: 1,
			IdempotencyKey: key, Now: now, Secrets: mapSecrets{"c": cred}})
	}
	wantEnd := time.Date(2026, 6, 11, 12, 0, 0, 0, time.UTC) // 08:00 EDT
	for _, typ := range []string{"email", "sms"} {
		_, err := run(typ, false, "k-"+typ, night)
		var d *node.Defer
		if !errors.As(err, &d) || !d.Until.Equal(wantEnd) || d.Reason != message.ReasonQuietHours {
			t.Fatalf("%s in quiet hours: %v, want a deferral to %s (QUIET_HOURS)", typ, err, wantEnd)
		}
		if res, err := run(typ, true, "k-critical-"+typ, night); err != nil || res.Output.(map[string]any)["sent"] != true {
			t.Fatalf("critical %s in quiet hours: %v %v, want sent", typ, res.Output, err)
		}
	}
	if got := len(s.Inboxes()["dee@example.com"]); got != 1 {
		t.Errorf("dee got %d mails, want the critical one", got)
	}
	if m := texts.Messages(); len(m) != 1 {
		t.Errorf("texts %+v, want the critical one", m)
	}
	// Sent by day, redelivered at night: the record is the answer.
	if _, err := run("email", false, "k-day", day); err != nil {
		t.Fatal(err)
	}
	res, err := run("email", false, "k-day", night)
	if err != nil || res.Output.(map[string]any)["message_id"] != "<k-day@rune.test>" {
		t.Fatalf("redelivery at night of a day's send: %v %v, want its recorded output", res.Output, err)
	}
	if got := len(s.Inboxes()["dee@example.com"]); got != 2 {
		t.Errorf("dee got %d mails, want 2", got)
	}
}
