package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rune-org/rune/internal/catcher"
	"github.com/rune-org/rune/message"
)

// testQuietHours (issue 36, item 5), through examples/digest_quiet_hours.json
// (its digest window made 1 s): the non-critical email to a subscriber
// whose quiet hours (in its timezone, America/New_York) cover now waits,
// status waiting with reason QUIET_HOURS and resume_at the end of the
// window, and the mail arrives after that end, not before; a critical one
// goes out at once. The window ends at the next minute boundary (HH:MM),
// so the test waits at most about 80 s.
func testQuietHours(t *testing.T, a *api, id string) {
	mail, err := catcher.StartSMTP(catcher.SMTPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer mail.Close()
	cred := "mail_" + id
	a.want(http.StatusCreated, "POST", "/v1/credentials", []byte(fmt.Sprintf(`{"name": %q, "type": "smtp", "value": {
		"type": "smtp", "host": "127.0.0.1", "port": "%d", "tls": "none", "from": "news@rune.test"}}`, cred, mail.Port())), nil)
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	// The window: from a few minutes ago to the next minute boundary, or
	// the one after when that is too close to see the run wait.
	end := time.Now().In(ny).Truncate(time.Minute).Add(time.Minute)
	if time.Until(end) < 20*time.Second {
		end = end.Add(time.Minute)
	}
	from := end.Add(-5 * time.Minute)
	sub := "u_quiet_" + id
	a.want(http.StatusCreated, "PUT", "/v1/subscribers/"+sub, []byte(`{"email": "quiet@example.com", "timezone": "America/New_York", "data": {"first_name": "Ann"}}`), nil)
	a.want(http.StatusOK, "PUT", "/v1/subscribers/"+sub+"/preferences",
		[]byte(fmt.Sprintf(`{"quiet_hours": {"from": %q, "to": %q}}`, from.Format("15:04"), end.Format("15:04"))), nil)
	// The example, its digest window made short; and a critical email.
	def := readExample(t, "digest_quiet_hours.json")
	def = strings.Replace(def, `"digest_quiet_hours"`, `"`+id+`"`, 1)
	def = strings.Replace(def, `"window": "10m"`, `"window": "1s"`, 1)
	def = strings.Replace(def, `"ref": "mail"`, `"ref": "`+cred+`"`, 1)
	a.pushWorkflow(def)
	a.pushWorkflow(wfDef(id+"_critical", fmt.Sprintf(`{"id": "alert", "type": "email", "credentials": {"ref": %q}, "parameters": {
		"subscriber": "{{ $trigger.subscriber }}", "critical": true, "subject": "critical", "text": "a new sign-in"}}`, cred),
		`{"id": "e1", "src": "start", "dst": "alert"}`))

	x := a.trigger(id, `{"subscriber": "`+sub+`", "who": "Grace", "what": "commented on rune#36"}`)
	w := a.waitFor(x.ID, "notify waiting for the quiet hours", func(x *execution) bool {
		for _, n := range x.Nodes {
			if n.NodeID == "notify" && n.Status == message.StatusWaiting {
				return true
			}
		}
		return false
	})
	var got struct {
		Nodes []struct {
			NodeID   string     `json:"node_id"`
			Status   string     `json:"status"`
			ResumeAt *time.Time `json:"resume_at"`
			Reason   string     `json:"reason"`
		} `json:"nodes"`
	}
	a.want(http.StatusOK, "GET", "/v1/executions/"+w.ID, nil, &got)
	for _, n := range got.Nodes {
		if n.NodeID == "notify" && (n.Status != message.StatusWaiting || n.Reason != message.ReasonQuietHours || n.ResumeAt == nil || !n.ResumeAt.Equal(end)) {
			t.Fatalf("notify %+v, want waiting, reason QUIET_HOURS, resume_at %s", n, end.UTC())
		}
	}
	// Critical: sent at once, while the other waits.
	if c := a.waitStatus(a.trigger(id+"_critical", `{"subscriber": "`+sub+`"}`).ID, "completed", "failed"); c.Status != "completed" {
		t.Fatalf("critical send: %s %s", c.Status, c.Completion)
	}
	if m := mail.Mails(); len(m) != 1 || m[0].Header.Get("Subject") != "critical" {
		t.Fatalf("mails before the end of the quiet hours: %d, want only the critical one", len(m))
	}
	// Nothing more until the end; then it goes out.
	for time.Now().Before(end) {
		if m := mail.Mails(); len(m) != 1 {
			t.Fatalf("%d mails at %v, before the end of the quiet hours (%v)", len(m), time.Now(), end)
		}
		time.Sleep(200 * time.Millisecond)
	}
	done := a.waitStatus(x.ID, "completed", "failed")
	if done.Status != "completed" {
		t.Fatalf("after the quiet hours: %s %s", done.Status, done.Completion)
	}
	ms := mail.Mails()
	if len(ms) != 2 || ms[1].Header.Get("Subject") != "Ann, 1 update on your projects" || ms[1].Received.Before(end) {
		t.Fatalf("mails %d (the second at %v), want the quiet one after %v", len(ms), ms[len(ms)-1].Received, end)
	}
}
