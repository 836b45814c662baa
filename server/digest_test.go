package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/rune-org/rune/internal/catcher"
	"github.com/rune-org/rune/message"
)

// testDigestExample (issue 36, the digest node): examples/comment_digest.json
// with its window made 3 s. Three comments for one user and two for
// another, each posted once the one before has reached the digest: each
// user gets one email listing their comments in order, through the
// catcher's SMTP server; the first execution of each user completes with
// the digest, the others with digested_into it and no email of their own.
func testDigestExample(t *testing.T, a *api, id string) {
	mail, err := catcher.StartSMTP(catcher.SMTPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer mail.Close()
	cred := "mail_" + id
	a.want(http.StatusCreated, "POST", "/v1/credentials", []byte(fmt.Sprintf(`{"name": %q, "type": "smtp", "value": {
		"type": "smtp", "host": "127.0.0.1", "port": "%d", "tls": "none"}}`, cred, mail.Port())), nil)
	def := readExample(t, "comment_digest.json")
	def = strings.Replace(def, `"comment_digest"`, `"`+id+`"`, 1)
	def = strings.Replace(def, `"window": "10m"`, `"window": "3s"`, 1)
	def = strings.Replace(def, `"ref": "mail"`, `"ref": "`+cred+`"`, 1)
	a.pushWorkflow(def)
	comments := []struct{ user, author, text string }{
		{"ada", "Grace", "Nice post!"}, {"alan", "Edsger", "Go to considered"}, {"ada", "Barbara", "Agreed."},
		{"alan", "Tony", "Null, sorry"}, {"ada", "Grace", "One more thing"},
	}
	var xs []string
	for _, c := range comments {
		in, _ := json.Marshal(map[string]any{"user": map[string]any{"id": c.user, "email": c.user + "@example.com"}, "author": c.author, "text": c.text})
		x := a.trigger(id, string(in))
		// Joined (completed) or opened (waiting): the next comes after it.
		a.waitFor(x.ID, "at its digest", func(x *execution) bool {
			for _, n := range x.Nodes {
				if n.NodeID == "collect" && (n.Status == message.StatusWaiting || n.Status == message.StatusSuccess) {
					return true
				}
			}
			return false
		})
		xs = append(xs, x.ID)
	}
	for i, xid := range xs {
		x := a.waitStatus(xid, "completed", "failed", "halted", "cancelled")
		var comp message.Completion
		if err := json.Unmarshal(x.Completion, &comp); err != nil || x.Status != "completed" {
			t.Fatalf("comment %d: %s %s", i, x.Status, x.Completion)
		}
		dg, _ := comp.FinalContext["$collect"].(map[string]any)
		opener := map[string]string{"ada": xs[0], "alan": xs[1]}[comments[i].user]
		if xid == opener {
			if _, ok := dg["items"]; !ok {
				t.Errorf("comment %d (the first of %s): $collect %v, want the digest", i, comments[i].user, dg)
			}
		} else if dg["digested_into"] != opener {
			t.Errorf("comment %d: $collect %v, want digested_into %s", i, dg, opener)
		}
	}
	mails := mail.Mails()
	if len(mails) != 2 {
		t.Fatalf("%d mails, want 2 (one per user)", len(mails))
	}
	got := map[string]string{}
	for _, m := range mails {
		body := strings.ReplaceAll(string(m.Data), "\r\n", "\n")
		got[strings.Join(m.To, ",")] = m.Header.Get("Subject") + " | " + body[strings.Index(body, "\n\n")+2:]
	}
	want := map[string]string{
		"ada@example.com":  "3 new comments on your post | Grace: Nice post!\nBarbara: Agreed.\nGrace: One more thing\n",
		"alan@example.com": "2 new comments on your post | Edsger: Go to considered\nTony: Null, sorry\n",
	}
	for _, k := range []string{"ada@example.com", "alan@example.com"} {
		if !strings.HasPrefix(got[k], want[k]) {
			t.Errorf("mail to %s: %q, want %q", k, got[k], want[k])
		}
	}
}
