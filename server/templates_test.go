package server_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/rune-org/rune/apiv1"
	"github.com/rune-org/rune/internal/catcher"
	"github.com/rune-org/rune/server"
)

// tplName is a template name of the test's own (the suite shares one
// server between its cases).
func tplName(id, what string) string {
	h := sha256.Sum256([]byte(id))
	return what + "-" + hex.EncodeToString(h[:6])
}

// testTemplates (issue 36): each PUT stores the next version; GET shows
// the latest or a given version; the list and the versions carry no
// contents; Liquid that does not compile is 422 naming the field, line
// and column; a preview renders with sample data and the layout; DELETE
// hides it.
func testTemplates(t *testing.T, a *api, id string) {
	base, name := tplName(id, "base"), tplName(id, "welcome")
	path := "/v1/templates/" + name
	var tpl apiv1.Template
	a.want(http.StatusOK, "PUT", "/v1/templates/"+base, []byte(`{"html": "<main>{{ content }}</main>", "subject": "[Acme] {{ content }}"}`), &tpl)
	if tpl.Version != 1 || tpl.Name != base {
		t.Fatalf("PUT base: %+v, want version 1", tpl)
	}
	a.want(http.StatusOK, "PUT", path, []byte(`{"subject": "Hi {{ $trigger.name }}", "text": "v1", "html": "<p>v1 {{ $trigger.name }}</p>", "layout": "`+base+`"}`), &tpl)
	a.want(http.StatusOK, "PUT", path, []byte(`{"subject": "Hello {{ $trigger.name | upcase }}", "html": "<p>v2 {{ $trigger.name }}</p>", "body": "sms {{ $trigger.name }}", "layout": "`+base+`"}`), &tpl)
	if tpl.Version != 2 || tpl.Layout != base || tpl.CreatedAt.IsZero() {
		t.Fatalf("second PUT: %+v, want version 2", tpl)
	}
	tpl = apiv1.Template{}
	a.want(http.StatusOK, "GET", path, nil, &tpl)
	if tpl.Version != 2 || tpl.Body != "sms {{ $trigger.name }}" || tpl.Text != "" {
		t.Fatalf("GET latest: %+v", tpl)
	}
	tpl = apiv1.Template{}
	a.want(http.StatusOK, "GET", path+"/versions/1", nil, &tpl)
	if tpl.Version != 1 || tpl.Text != "v1" {
		t.Fatalf("GET version 1: %+v", tpl)
	}
	var page apiv1.Page[apiv1.Template]
	a.want(http.StatusOK, "GET", path+"/versions", nil, &page)
	if len(page.Items) != 2 || page.Items[0].Version != 2 || page.Items[1].Version != 1 || page.Items[0].HTML != "" {
		t.Fatalf("versions: %+v, want 2 then 1 without contents", page.Items)
	}
	a.want(http.StatusOK, "GET", "/v1/templates", nil, &page)
	if i := slices.IndexFunc(page.Items, func(t apiv1.Template) bool { return t.Name == name }); i < 0 || page.Items[i].Version != 2 {
		t.Fatalf("list: %+v, want %s at version 2", page.Items, name)
	}

	var pv apiv1.TemplatePreview
	a.want(http.StatusOK, "POST", path+"/preview", []byte(`{"data": {"$trigger": {"name": "ada"}}}`), &pv)
	if pv.Version != 2 || pv.Subject != "[Acme] Hello ADA" || pv.HTML != "<main><p>v2 ada</p></main>" || pv.Body != "sms ada" ||
		pv.Text != "" || len(pv.Layouts) != 1 || pv.Layouts[0] != base+"@1" {
		t.Fatalf("preview: %+v", pv)
	}
	pv = apiv1.TemplatePreview{}
	a.want(http.StatusOK, "POST", path+"/preview", []byte(`{"data": {"$trigger": {"name": "bo"}}, "version": 1}`), &pv)
	if pv.Version != 1 || pv.Text != "v1" || pv.HTML != "<main><p>v1 bo</p></main>" {
		t.Fatalf("preview of version 1: %+v", pv)
	}

	// Errors at the door.
	e := a.wantError(http.StatusUnprocessableEntity, server.CodeInvalidTemplate, "PUT", path, []byte(`{"html": "<p>\n  {{ $trigger.name | }}</p>"}`))
	if len(e.Error.Problems) != 1 || e.Error.Problems[0].Path != "html" || !strings.Contains(e.Error.Problems[0].Message, "line 2, column 3") {
		t.Fatalf("bad Liquid: %+v, want a problem at html, line 2, column 3", e.Error)
	}
	e = a.wantError(http.StatusUnprocessableEntity, server.CodeInvalidTemplate, "PUT", path, []byte(`{"text": "x", "layout": "nothing-`+name+`"}`))
	if len(e.Error.Problems) != 1 || e.Error.Problems[0].Path != "layout" {
		t.Fatalf("unknown layout: %+v", e.Error)
	}
	a.wantError(http.StatusUnprocessableEntity, server.CodeInvalidTemplate, "PUT", path, []byte(`{}`))
	a.wantError(http.StatusUnprocessableEntity, server.CodeInvalidTemplate, "PUT", path, []byte(`{"text": "`+strings.Repeat("x", 300<<10)+`"}`))
	a.wantError(http.StatusBadRequest, server.CodeInvalidJSON, "PUT", path, []byte(`{"text": "x", "nope": 1}`))
	a.wantError(http.StatusBadRequest, server.CodeInvalidRequest, "PUT", "/v1/templates/has%20space", []byte(`{"text": "x"}`))
	a.wantError(http.StatusRequestEntityTooLarge, server.CodeTooLarge, "PUT", path, []byte(`{"text": "`+strings.Repeat("x", 3<<20)+`"}`))
	e = a.wantError(http.StatusUnprocessableEntity, server.CodeInvalidTemplate, "POST", path+"/preview", []byte(`{"data": {}}`))
	if len(e.Error.Problems) != 1 || !strings.Contains(e.Error.Problems[0].Message, "$trigger") {
		t.Fatalf("preview without $trigger: %+v, want the missing name", e.Error)
	}
	a.wantError(http.StatusBadRequest, server.CodeInvalidRequest, "POST", path+"/preview", []byte(`{"data": {"trigger": {}}}`))
	a.wantError(http.StatusNotFound, server.CodeNotFound, "POST", path+"/preview", []byte(`{"version": 9}`))
	a.wantError(http.StatusNotFound, server.CodeNotFound, "GET", path+"/versions/9", nil)
	a.want(http.StatusOK, "GET", path, nil, &tpl)
	if tpl.Version != 2 {
		t.Fatalf("after refused PUTs: version %d, want still 2", tpl.Version)
	}

	a.want(http.StatusNoContent, "DELETE", path, nil, nil)
	a.wantError(http.StatusNotFound, server.CodeNotFound, "GET", path, nil)
	a.wantError(http.StatusNotFound, server.CodeNotFound, "DELETE", path, nil)
	a.want(http.StatusOK, "GET", path+"/versions/2", nil, &tpl)
	if tpl.DeletedAt == nil {
		t.Fatalf("a deleted template's version: %+v, want deleted_at", tpl)
	}
	a.want(http.StatusOK, "PUT", path, []byte(`{"text": "back"}`), &tpl)
	if tpl.Version != 3 {
		t.Fatalf("PUT after DELETE: version %d, want 3", tpl.Version)
	}
}

// testTemplatePinning (issue 36): an execution renders the template
// version current when it started. One waits for an event while a new
// version is PUT; the mail it then sends has the old version; an
// execution started after the PUT sends the new one. A node naming a
// template that does not exist fails with TEMPLATE_NOT_FOUND.
func testTemplatePinning(t *testing.T, a *api, id string) {
	mail, err := catcher.StartSMTP(catcher.SMTPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer mail.Close()
	cred, name := "mail_"+id, tplName(id, "pinned")
	a.want(http.StatusCreated, "POST", "/v1/credentials", []byte(fmt.Sprintf(`{"name": %q, "type": "smtp", "value": {
		"type": "smtp", "host": "127.0.0.1", "port": "%d", "tls": "none", "from": "news@rune.test"}}`, cred, mail.Port())), nil)
	a.want(http.StatusOK, "PUT", "/v1/templates/"+name, []byte(`{"subject": "v1 for {{ $trigger.who }}", "text": "version one, {{ $trigger.who }}"}`), nil)
	a.pushWorkflow(wfDef(id, `{"id":"go","type":"wait_for_event","parameters":{"event":"send.now","key":"{{ $trigger.who }}","timeout":"1h"}},
		{"id":"mail","type":"email","credentials":{"ref":"`+cred+`"},"parameters":{"to":"{{ $trigger.who }}@example.com","template":"`+name+`"}}`,
		`{"id":"e1","src":"start","dst":"go"},{"id":"e2","src":"go","dst":"mail"}`))
	early := a.trigger(id, `{"who": "early-`+id+`"}`)
	a.waitFor(early.ID, "waiting for its event", func(x *execution) bool { return slices.Contains(x.Cursor, "go") })

	a.want(http.StatusOK, "PUT", "/v1/templates/"+name, []byte(`{"subject": "v2 for {{ $trigger.who }}", "text": "version two"}`), nil)
	late := a.trigger(id, `{"who": "late-`+id+`"}`)
	a.waitFor(late.ID, "waiting for its event", func(x *execution) bool { return slices.Contains(x.Cursor, "go") })
	for _, who := range []string{"early-" + id, "late-" + id} {
		a.want(http.StatusAccepted, "POST", "/v1/events", []byte(`{"event":"send.now","key":"`+who+`"}`), nil)
	}
	for _, x := range []execution{early, late} {
		a.waitStatus(x.ID, "completed")
	}
	got := map[string]string{}
	for _, m := range mail.Mails() {
		got[m.To[0]] = m.Header.Get("Subject") + " | " + string(m.Data)
	}
	for _, c := range []struct{ who, subject, text string }{
		{"early-" + id, "v1 for early-" + id, "version one, early-" + id},
		{"late-" + id, "v2 for late-" + id, "version two"},
	} {
		m := got[c.who+"@example.com"]
		if !strings.HasPrefix(m, c.subject+" | ") || !strings.Contains(m, c.text) {
			t.Errorf("%s received %q, want subject %q and text %q (the version current when its execution started)", c.who, m, c.subject, c.text)
		}
	}
	var x execution
	a.want(http.StatusOK, "GET", "/v1/executions/"+early.ID, nil, &x)
	var sent struct {
		Template struct {
			Name    string `json:"name"`
			Version int    `json:"version"`
		} `json:"template"`
	}
	if err := json.Unmarshal(x.Vars["email_mail"], &sent); err != nil || sent.Template.Name != name || sent.Template.Version != 1 {
		t.Errorf("$vars.email_mail %s: want template %s version 1 (%v)", x.Vars["email_mail"], name, err)
	}

	// A template that does not exist: the node fails, not retried.
	missing := id + "-missing"
	a.pushWorkflow(wfDef(missing, `{"id":"mail","type":"email","credentials":{"ref":"`+cred+`"},"retry":{"max_attempts":3},"parameters":{"to":"x@example.com","template":"nothing-`+name+`"}}`,
		`{"id":"e1","src":"start","dst":"mail"}`))
	failed := a.trigger(missing, `{}`)
	done := a.waitStatus(failed.ID, "failed")
	if !strings.Contains(string(done.Completion), "TEMPLATE_NOT_FOUND") {
		t.Fatalf("completion %s, want TEMPLATE_NOT_FOUND", done.Completion)
	}
}
