package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/rune-org/rune/internal/catcher"
	"github.com/rune-org/rune/server"
)

// subscriberView is GET /v1/subscribers/{id}.
type subscriberView struct {
	ID          string         `json:"id"`
	Email       string         `json:"email"`
	Phone       string         `json:"phone"`
	Timezone    string         `json:"timezone"`
	Locale      string         `json:"locale"`
	Data        map[string]any `json:"data"`
	Preferences struct {
		Channels   map[string]bool `json:"channels"`
		Categories map[string]bool `json:"categories"`
		Workflows  map[string]bool `json:"workflows"`
		QuietHours *struct {
			From string `json:"from"`
			To   string `json:"to"`
		} `json:"quiet_hours"`
	} `json:"preferences"`
}

// testSubscribers (issue 36, item 1): subscribers are created, replaced,
// read and deleted; bad fields are refused naming them; an import reports
// each bad row by index and writes the others; preferences are replaced
// and read. An email node naming a subscriber sends to its address with
// its variables, is not made when the preferences forbid it (the node
// succeeds with sent false, reason OPTED_OUT, in its output and $vars)
// unless critical, and fails with SUBSCRIBER_NOT_FOUND for an unknown id.
// An altered unsubscribe token is 404 and records nothing.
func testSubscribers(t *testing.T, a *api, id string) {
	u := func(n string) string { return "u_" + n + "_" + id }
	path := func(n string) string { return "/v1/subscribers/" + u(n) }
	var v subscriberView
	a.want(http.StatusCreated, "PUT", path("ann"), []byte(`{"email": "ann@example.com", "phone": "+14155550100", "timezone": "Europe/Paris",
		"locale": "fr-FR", "data": {"first_name": "Ann", "plan": "pro"}}`), &v)
	if v.ID != u("ann") || v.Email != "ann@example.com" || v.Data["first_name"] != "Ann" || v.Preferences.Channels == nil {
		t.Fatalf("created %+v", v)
	}
	a.want(http.StatusCreated, "PUT", path("bob"), []byte(`{"email": "bob@example.com"}`), nil)
	a.want(http.StatusOK, "PUT", path("bob"), []byte(`{"email": "bob@example.com", "data": {"first_name": "Bob"}}`), nil)
	a.want(http.StatusOK, "GET", path("bob"), nil, &v)
	if v.Data["first_name"] != "Bob" {
		t.Fatalf("replaced %+v", v)
	}
	for _, c := range []struct{ body, field string }{
		{`{"timezone": "Mars/Olympus"}`, "timezone"},
		{`{"email": "not an address"}`, "email"},
		{`{"phone": "call me"}`, "phone"},
		{`{"data": {"big": "` + strings.Repeat("x", 17<<10) + `"}}`, "data"},
	} {
		e := a.wantError(http.StatusBadRequest, server.CodeInvalidRequest, "PUT", path("bad"), []byte(c.body))
		if !strings.HasPrefix(e.Error.Message, c.field+":") {
			t.Errorf("PUT %s: %q, want it to name %s", c.body, e.Error.Message, c.field)
		}
	}
	a.wantError(http.StatusBadRequest, server.CodeInvalidJSON, "PUT", path("bad"), []byte(`{"emial": "x@example.com"}`))
	a.wantError(http.StatusNotFound, server.CodeNotFound, "GET", path("bad"), nil)

	// Import: NDJSON, one bad row (index 1) and one unparsable (index 3).
	ndjson := fmt.Sprintf("{\"id\": %q, \"email\": \"cy@example.com\"}\n{\"id\": %q, \"phone\": \"nope\"}\n\n{\"id\": %q, \"email\": \"ann@example.com\", \"locale\": \"fr-FR\", \"data\": {\"first_name\": \"Ann\"}}\n{\"id\": 7}\n",
		u("cy"), u("dee"), u("ann"))
	var imp struct {
		Created, Replaced int
		Errors            []struct {
			Index          int
			ID, Field, Msg string
		}
	}
	a.want(http.StatusOK, "POST", "/v1/subscribers/import", []byte(ndjson), &imp, "Content-Type", "application/x-ndjson")
	if imp.Created != 1 || imp.Replaced != 1 || len(imp.Errors) != 2 || imp.Errors[0].Index != 1 || imp.Errors[0].Field != "phone" ||
		imp.Errors[0].ID != u("dee") || imp.Errors[1].Index != 3 {
		t.Fatalf("import %+v", imp)
	}
	a.want(http.StatusOK, "GET", path("cy"), nil, nil)
	a.wantError(http.StatusNotFound, server.CodeNotFound, "GET", path("dee"), nil)
	a.want(http.StatusOK, "POST", "/v1/subscribers/import", []byte(`[{"id": "`+u("eve")+`", "email": "eve@example.com"}, {"id": "", "email": "x@example.com"}]`), &imp)
	if imp.Created != 1 || len(imp.Errors) != 1 || imp.Errors[0].Index != 1 || imp.Errors[0].Field != "id" {
		t.Fatalf("JSON import %+v", imp)
	}
	a.wantError(http.StatusBadRequest, server.CodeInvalidRequest, "POST", "/v1/subscribers/import", []byte(`{"id": "x"}`))

	// Preferences.
	a.wantError(http.StatusNotFound, server.CodeNotFound, "PUT", path("nobody")+"/preferences", []byte(`{}`))
	e := a.wantError(http.StatusBadRequest, server.CodeInvalidRequest, "PUT", path("bob")+"/preferences", []byte(`{"quiet_hours": {"from": "22:00", "to": "8am"}}`))
	if !strings.HasPrefix(e.Error.Message, "quiet_hours.to:") {
		t.Errorf("bad quiet hours: %q", e.Error.Message)
	}
	a.wantError(http.StatusBadRequest, server.CodeInvalidRequest, "PUT", path("bob")+"/preferences", []byte(`{"channels": {"pigeon": false}}`))
	a.want(http.StatusOK, "PUT", path("bob")+"/preferences", []byte(`{"categories": {"news": false}, "quiet_hours": {"from": "22:00", "to": "08:00"}}`), nil)
	a.want(http.StatusOK, "PUT", path("cy")+"/preferences", []byte(`{"channels": {"email": false}}`), nil)
	a.want(http.StatusOK, "PUT", path("eve")+"/preferences", []byte(`{"workflows": {"`+id+`": false}}`), nil)
	var p struct {
		Categories map[string]bool           `json:"categories"`
		QuietHours struct{ From, To string } `json:"quiet_hours"`
	}
	a.want(http.StatusOK, "GET", path("bob")+"/preferences", nil, &p)
	if v, ok := p.Categories["news"]; !ok || v || p.QuietHours.From != "22:00" {
		t.Fatalf("preferences %+v", p)
	}

	// The email node.
	mail, err := catcher.StartSMTP(catcher.SMTPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer mail.Close()
	cred := "mail_" + id
	a.want(http.StatusCreated, "POST", "/v1/credentials", []byte(fmt.Sprintf(`{"name": %q, "type": "smtp", "value": {
		"type": "smtp", "host": "127.0.0.1", "port": "%d", "tls": "none", "from": "news@rune.test"}}`, cred, mail.Port())), nil)
	node := func(critical bool) string {
		return fmt.Sprintf(`{"id": "news", "type": "email", "credentials": {"ref": %q}, "parameters": {
		"subscriber": "{{ $trigger.user }}", "category": "news", "critical": %v,
		"subject": "Hi {{ subscriber.data.first_name | default: 'there' }}", "text": "For {{ subscriber.email }} ({{ subscriber.locale }})"}},
		{"id": "branch", "type": "conditional", "parameters": {"expression": "$vars.email_news.sent == true", "true_edge_id": "e_yes", "false_edge_id": "e_no"}},
		{"id": "yes", "type": "log", "parameters": {"message": "sent"}}, {"id": "no", "type": "log", "parameters": {"message": "opted out"}}`, cred, critical)
	}
	const edges = `{"id": "e1", "src": "start", "dst": "news"}, {"id": "e2", "src": "news", "dst": "branch"},
		 {"id": "e_yes", "src": "branch", "dst": "yes"}, {"id": "e_no", "src": "branch", "dst": "no"}`
	a.pushWorkflow(wfDef(id, node(false), edges))
	a.pushWorkflow(wfDef(id+"_critical", node(true), edges))
	run := func(wf, user string) *execution {
		return a.waitStatus(a.trigger(wf, `{"user": "`+user+`"}`).ID, "completed", "failed")
	}
	ran := func(x *execution, nodeID string) bool {
		for _, n := range x.Nodes {
			if n.NodeID == nodeID && n.Status == "success" {
				return true
			}
		}
		return false
	}
	// Ann allows it: sent to her address, with her variables.
	x := run(id, u("ann"))
	var out map[string]any
	if err := json.Unmarshal(x.Vars["email_news"], &out); err != nil || x.Status != "completed" || out["sent"] != true || out["subscriber"] != u("ann") || !ran(x, "yes") {
		t.Fatalf("ann: %s, vars %s (%v), nodes %+v", x.Status, x.Vars["email_news"], err, x.Nodes)
	}
	inbox := mail.Inboxes()["ann@example.com"]
	if len(inbox) != 1 || inbox[0].Header.Get("Subject") != "Hi Ann" || !strings.Contains(string(inbox[0].Data), "For ann@example.com (fr-FR)") {
		t.Fatalf("ann's inbox %+v", inbox)
	}
	// The embedded target's runtime knows the server's URL; the
	// distributed target's workers are given no --public-url: no header.
	lu, post := inbox[0].Header.Get("List-Unsubscribe"), inbox[0].Header.Get("List-Unsubscribe-Post")
	if a.tg.spy == nil && (!strings.HasPrefix(lu, "<"+a.tg.url+"/v1/unsubscribe/") || post != "List-Unsubscribe=One-Click") {
		t.Errorf("List-Unsubscribe %q, -Post %q: want a one-click link to %s", lu, post, a.tg.url)
	}
	if a.tg.spy != nil && (lu != "" || post != "") {
		t.Errorf("List-Unsubscribe %q, -Post %q without a public URL: want none", lu, post)
	}
	// Bob (category off), Cy (email off), Eve (this workflow off): not
	// sent, the node succeeds with sent false; the workflow branches on it.
	for _, who := range []string{"bob", "cy", "eve"} {
		x := run(id, u(who))
		var out map[string]any
		_ = json.Unmarshal(x.Vars["email_news"], &out)
		if x.Status != "completed" || len(out) != 2 || out["sent"] != false || out["reason"] != "OPTED_OUT" || !ran(x, "no") || ran(x, "yes") {
			t.Fatalf("%s: %s, vars %s, nodes %+v", who, x.Status, x.Vars["email_news"], x.Nodes)
		}
		for _, n := range x.Nodes {
			if n.NodeID == "news" && !strings.Contains(string(n.Output), `"OPTED_OUT"`) {
				t.Fatalf("%s: output %s", who, n.Output)
			}
		}
	}
	// Critical: Bob gets it all the same.
	if x := run(id+"_critical", u("bob")); x.Status != "completed" || !ran(x, "yes") {
		t.Fatalf("critical to bob: %s %+v", x.Status, x.Nodes)
	}
	if got := len(mail.Inboxes()["bob@example.com"]); got != 1 {
		t.Fatalf("bob received %d mails, want 1 (the critical one)", got)
	}
	if n := len(mail.Inboxes()["cy@example.com"]) + len(mail.Inboxes()["eve@example.com"]); n != 0 {
		t.Fatalf("opted-out subscribers received %d mails", n)
	}
	// An unknown subscriber fails the node, not retried.
	if x := run(id, u("nobody")); x.Status != "failed" || !strings.Contains(string(x.Completion), "SUBSCRIBER_NOT_FOUND") {
		t.Fatalf("unknown subscriber: %s %s", x.Status, x.Completion)
	}

	// An altered token: 404, and nothing recorded.
	a.wantError(http.StatusNotFound, server.CodeNotFound, "POST", "/v1/unsubscribe/00.AAAA.BBBB", []byte("List-Unsubscribe=One-Click"),
		"Authorization", "", "Content-Type", "application/x-www-form-urlencoded")
	a.wantError(http.StatusNotFound, server.CodeNotFound, "GET", "/v1/unsubscribe/garbage", nil, "Authorization", "")

	a.want(http.StatusNoContent, "DELETE", path("eve"), nil, nil)
	a.wantError(http.StatusNotFound, server.CodeNotFound, "DELETE", path("eve"), nil)
	a.wantError(http.StatusNotFound, server.CodeNotFound, "GET", path("eve")+"/preferences", nil)
}
