package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rune-org/rune/server"
	"github.com/rune-org/rune/store"
)

// who is a test principal: a token with a role and maybe a scope.
type who struct {
	name, role string
	scope      []string
}

var (
	viewer   = who{"t-viewer", store.RoleViewer, nil}
	operator = who{"t-operator", store.RoleOperator, nil}
	scoped   = who{"t-scoped", store.RoleOperator, []string{"billing-*"}}
	editor   = who{"t-editor", store.RoleEditor, nil}
	admin    = who{"t-admin", store.RoleAdmin, nil}
)

// accessRow says who may use a route. allowed lists the unscoped roles that
// may; scoped says what the token scoped to billing-* gets on a workflow
// outside its scope: "404" (it cannot see it), "403" (the route concerns no
// single workflow) or "filter" (the route answers, showing only what it may
// see); on a workflow inside its scope it is an operator.
type accessRow struct {
	allowed []string
	scoped  string
}

var (
	all      = []string{"admin", "editor", "operator", "viewer"}
	operate  = []string{"admin", "editor", "operator"}
	edit     = []string{"admin", "editor"}
	adminOny = []string{"admin"}
)

// accessTable is the expected access of every authenticated route. It is
// written out here, apart from the route table, so a route whose rule
// changes (or a new route) fails until its row says the same.
var accessTable = map[string]accessRow{
	"GET /metrics": {all, "403"},

	"POST /v1/workflows":                          {edit, "filter"},
	"GET /v1/workflows":                           {all, "filter"},
	"GET /v1/workflows/{id}":                      {all, "404"},
	"PUT /v1/workflows/{id}":                      {edit, "404"},
	"DELETE /v1/workflows/{id}":                   {edit, "404"},
	"GET /v1/workflows/{id}/versions":             {all, "404"},
	"GET /v1/workflows/{id}/versions/{version}":   {all, "404"},
	"POST /v1/workflows/{id}/executions":          {operate, "404"},
	"GET /v1/executions":                          {all, "filter"},
	"GET /v1/executions/{id}":                     {all, "404"},
	"POST /v1/executions/{id}/cancel":             {operate, "404"},
	"POST /v1/executions/{id}/rerun":              {operate, "404"},
	"GET /v1/executions/{id}/events":              {all, "404"},
	"GET /v1/events":                              {all, "filter"},
	"POST /v1/workflows/{id}/hooks":               {edit, "404"},
	"GET /v1/workflows/{id}/hooks":                {all, "404"},
	"GET /v1/workflows/{id}/hooks/{hook}":         {all, "404"},
	"PUT /v1/workflows/{id}/hooks/{hook}":         {edit, "404"},
	"DELETE /v1/workflows/{id}/hooks/{hook}":      {edit, "404"},
	"POST /v1/workflows/{id}/hooks/{hook}/rotate": {edit, "404"},
	// issue 38
	"GET /v1/workflows/{id}/hooks/{hook}/deliveries": {all, "404"},

	"POST /v1/workflows/{id}/schedules":                   {edit, "404"},
	"GET /v1/workflows/{id}/schedules":                    {all, "404"},
	"GET /v1/workflows/{id}/schedules/{schedule}":         {all, "404"},
	"PUT /v1/workflows/{id}/schedules/{schedule}":         {edit, "404"},
	"DELETE /v1/workflows/{id}/schedules/{schedule}":      {edit, "404"},
	"POST /v1/workflows/{id}/schedules/{schedule}/pause":  {edit, "404"},
	"POST /v1/workflows/{id}/schedules/{schedule}/resume": {edit, "404"},

	"POST /v1/credentials":          {edit, "403"},
	"GET /v1/credentials":           {edit, "403"},
	"DELETE /v1/credentials/{name}": {edit, "403"},
	"POST /v1/tokens":               {adminOny, "403"},
	"GET /v1/tokens":                {adminOny, "403"},
	"DELETE /v1/tokens/{name}":      {adminOny, "403"},
	"GET /v1/audit":                 {adminOny, "403"},

	"GET /v1/executions/{id}/sends": {all, "404"}, // issue 36
	// issue 36: subscribers and preferences concern no workflow
	"PUT /v1/subscribers/{id}":             {edit, "403"},
	"GET /v1/subscribers/{id}":             {all, "403"},
	"DELETE /v1/subscribers/{id}":          {edit, "403"},
	"POST /v1/subscribers/import":          {edit, "403"},
	"GET /v1/subscribers/{id}/preferences": {all, "403"},
	"PUT /v1/subscribers/{id}/preferences": {edit, "403"},

	// issue 34: child executions
	"GET /v1/executions/{id}/children": {all, "404"},
	// issue 34: pause and resume, events and approvals
	"GET /v1/workflows/{id}/pause":              {all, "404"},
	"POST /v1/workflows/{id}/pause":             {operate, "404"},
	"POST /v1/workflows/{id}/resume":            {operate, "404"},
	"POST /v1/executions/{id}/pause":            {operate, "404"},
	"POST /v1/executions/{id}/resume":           {operate, "404"},
	"POST /v1/events":                           {operate, "403"},
	"GET /v1/approvals":                         {all, "filter"},
	"POST /v1/executions/{id}/approvals/{node}": {operate, "404"},
	"GET /v1/schedules/preview":                 {all, "filter"}, // issue 38
	// issue 36: message templates concern no single workflow
	"GET /v1/templates":                           {all, "403"},
	"GET /v1/templates/{name}":                    {all, "403"},
	"PUT /v1/templates/{name}":                    {edit, "403"},
	"DELETE /v1/templates/{name}":                 {edit, "403"},
	"GET /v1/templates/{name}/versions":           {all, "403"},
	"GET /v1/templates/{name}/versions/{version}": {all, "403"},
	"POST /v1/templates/{name}/preview":           {all, "403"},
}

// TestAccessTableCoversRoutes: every authenticated route has its row, and
// every row is a route.
func TestAccessTableCoversRoutes(t *testing.T) {
	seen := map[string]bool{}
	for _, rt := range server.Endpoints() {
		key := rt.Method + " " + rt.Path
		if rt.Open {
			if _, ok := accessTable[key]; ok {
				t.Errorf("%s is open (no token) but has an access row", key)
			}
			continue
		}
		seen[key] = true
		if _, ok := accessTable[key]; !ok {
			t.Errorf("route %s has no row in accessTable: say which roles may use it", key)
		}
	}
	for key := range accessTable {
		if !seen[key] {
			t.Errorf("accessTable row %s names no authenticated route", key)
		}
	}
}

// objects are what the access test acts on: for each of two workflows
// (billing-a inside the scoped token's scope, other-b outside), an
// execution, a hook and a schedule.
type objects struct{ exec, hook, schedule map[string]string }

func makeObjects(t *testing.T, a *api) objects {
	o := objects{exec: map[string]string{}, hook: map[string]string{}, schedule: map[string]string{}}
	for _, wf := range []string{"billing-a", "other-b"} {
		a.pushWorkflow(wfDef(wf, `{"id":"w","type":"wait","parameters":{"amount":1,"unit":"hours"}}`, `{"id":"e1","src":"start","dst":"w"}`))
		o.exec[wf] = a.trigger(wf, `{}`).ID
		var hk struct{ ID string }
		a.want(http.StatusCreated, "POST", "/v1/workflows/"+wf+"/hooks", []byte(`{"name":"h"}`), &hk)
		o.hook[wf] = hk.ID
		var sc struct{ ID string }
		a.want(http.StatusCreated, "POST", "/v1/workflows/"+wf+"/schedules", []byte(`{"name":"s","cron":"@every 1h","paused":true}`), &sc)
		o.schedule[wf] = sc.ID
	}
	return o
}

// path fills a route's pattern for workflow wf.
func (o objects) path(pattern, wf string) string {
	p := pattern
	if strings.HasPrefix(p, "/v1/executions/{id}") {
		p = strings.Replace(p, "{id}", o.exec[wf], 1)
	}
	r := strings.NewReplacer("{id}", wf, "{version}", "1", "{hook}", o.hook[wf], "{schedule}", o.schedule[wf], "{name}", "nobody")
	return r.Replace(p)
}

// TestAccessByRole walks every authenticated route as each role and as a
// scoped token: allowed (anything but 401/403 — the handler may still
// refuse an empty body), 403 forbidden, or 404 for what a scoped token
// cannot see. Streams are read for their status only.
func TestAccessByRole(t *testing.T) {
	tg := embeddedTarget(t)
	a := newAPI(t, tg)
	o := makeObjects(t, a)
	tokens := map[string]string{}
	for _, w := range []who{viewer, operator, scoped, editor, admin} {
		tok, rec, err := server.NewScopedToken(w.name, w.role, w.scope, 0, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := tg.store.CreateToken(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
		tokens[w.name] = tok
	}
	// Routes in table order, destructive ones last, so that an allowed
	// DELETE does not take away what a later request reads.
	routes := server.Endpoints()
	slices.SortStableFunc(routes, func(x, y server.Route) int {
		return boolInt(x.Method == "DELETE") - boolInt(y.Method == "DELETE")
	})
	call := func(w who, method, path string) (int, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, method, tg.url+path, strings.NewReader(""))
		req.Header.Set("Authorization", "Bearer "+tokens[w.name])
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s as %s: %v", method, path, w.name, err)
		}
		defer res.Body.Close()
		var e struct{ Code string }
		if res.Header.Get("Content-Type") == "application/problem+json" {
			_ = json.NewDecoder(res.Body).Decode(&e)
		}
		return res.StatusCode, e.Code
	}
	for _, w := range []who{viewer, operator, scoped, editor, admin} {
		for _, rt := range routes {
			if rt.Open {
				continue
			}
			key := rt.Method + " " + rt.Path
			row := accessTable[key]
			// Inside the scope (or unscoped): the role decides.
			path := o.path(rt.Path, "billing-a")
			status, code := call(w, rt.Method, path)
			mayByRole := slices.Contains(row.allowed, w.role)
			switch {
			case w.scope != nil && row.scoped == "403":
				if status != http.StatusForbidden || code != server.CodeForbidden {
					t.Errorf("%s %s as scoped token: %d %s, want 403 forbidden (concerns no single workflow)", rt.Method, path, status, code)
				}
			case mayByRole:
				if status == http.StatusForbidden || status == http.StatusUnauthorized || (w.scope != nil && status == http.StatusNotFound) {
					t.Errorf("%s %s as %s: %d %s, want it allowed", rt.Method, path, w.name, status, code)
				}
			default:
				if status != http.StatusForbidden || code != server.CodeForbidden {
					t.Errorf("%s %s as %s: %d %s, want 403 forbidden", rt.Method, path, w.name, status, code)
				}
			}
			if w.scope == nil || row.scoped != "404" {
				continue
			}
			// Outside the scope: not found, whatever the role would allow.
			path = o.path(rt.Path, "other-b")
			if status, code := call(w, rt.Method, path); status != http.StatusNotFound || code != server.CodeNotFound {
				t.Errorf("%s %s as scoped token: %d %s, want 404 not_found (outside its scope)", rt.Method, path, status, code)
			}
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestScopedTokenSeesItsWorkflows: a token scoped to billing-* lists only
// billing workflows and executions, and its event stream carries only their
// events; an expired token is refused; tokens made through the API carry
// their role and are shown once.
func TestScopedTokenSeesItsWorkflows(t *testing.T) {
	tg := embeddedTarget(t)
	a := newAPI(t, tg)
	o := makeObjects(t, a)
	var made struct {
		Token     string   `json:"token"`
		Role      string   `json:"role"`
		Workflows []string `json:"workflows"`
	}
	a.want(http.StatusCreated, "POST", "/v1/tokens", []byte(`{"name":"billing","role":"viewer","workflows":["billing-*"]}`), &made)
	if made.Role != "viewer" || !slices.Equal(made.Workflows, []string{"billing-*"}) || !strings.HasPrefix(made.Token, server.TokenPrefix) {
		t.Fatalf("POST /v1/tokens = %+v", made)
	}
	a.wantError(http.StatusBadRequest, "invalid_request", "POST", "/v1/tokens", []byte(`{"name":"x","role":"root"}`))
	a.wantError(http.StatusBadRequest, "invalid_request", "POST", "/v1/tokens", []byte(`{"name":"x","workflows":["a/b"]}`))
	var list struct {
		Items []map[string]any `json:"items"`
	}
	a.want(http.StatusOK, "GET", "/v1/tokens", nil, &list)
	for _, it := range list.Items {
		if _, ok := it["token"]; ok {
			t.Fatalf("GET /v1/tokens shows a token: %v", it)
		}
	}

	b := newAPI(t, &target{url: tg.url, token: made.Token})
	var wfs struct {
		Items []struct{ ID string } `json:"items"`
	}
	b.want(http.StatusOK, "GET", "/v1/workflows", nil, &wfs)
	if len(wfs.Items) != 1 || wfs.Items[0].ID != "billing-a" {
		t.Errorf("scoped GET /v1/workflows = %+v, want billing-a alone", wfs.Items)
	}
	var xs struct {
		Items []struct {
			ID         string `json:"id"`
			WorkflowID string `json:"workflow_id"`
		} `json:"items"`
	}
	b.want(http.StatusOK, "GET", "/v1/executions?limit=1", nil, &xs)
	if len(xs.Items) != 1 || xs.Items[0].ID != o.exec["billing-a"] {
		t.Errorf("scoped GET /v1/executions = %+v, want %s alone", xs.Items, o.exec["billing-a"])
	}
	ch, _, cancel := b.stream("/v1/events?from=beginning", "")
	defer cancel()
	for _, ev := range b.collect(ch, 1) {
		if !strings.Contains(ev.Data, `"billing-a"`) || strings.Contains(ev.Data, "other-b") {
			t.Errorf("scoped stream event %s: %s, want billing-a's only", ev.Event, ev.Data)
		}
	}

	// Expiry: a token past its ExpiresAt is refused with a reason.
	past := time.Now().Add(-time.Minute)
	tok, rec, err := server.NewScopedToken("old", store.RoleAdmin, nil, 0, time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	rec.ExpiresAt = &past
	if err := tg.store.CreateToken(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	e := newAPI(t, &target{url: tg.url, token: tok}).wantError(http.StatusUnauthorized, "unauthorized", "GET", "/v1/workflows", nil)
	if !strings.Contains(e.Error.Message, "expired") {
		t.Errorf("expired token: %q, want it to say expired", e.Error.Message)
	}
	// Revocation through the API takes effect at once on this server.
	a.want(http.StatusNoContent, "DELETE", "/v1/tokens/billing", nil, nil)
	b.wantError(http.StatusUnauthorized, "unauthorized", "GET", "/v1/workflows", nil)
}

// TestAudit: state-changing requests are recorded with who, what and the
// outcome, refused ones too; reads are not; no secret or body is kept;
// only admins read the log.
func TestAudit(t *testing.T) {
	tg := embeddedTarget(t)
	a := newAPI(t, tg)
	tokens := map[string]string{}
	for _, w := range []who{viewer, editor} {
		tok, rec, err := server.NewScopedToken(w.name, w.role, nil, 0, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := tg.store.CreateToken(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
		tokens[w.name] = tok
	}
	ed := newAPI(t, &target{url: tg.url, token: tokens[editor.name]})
	vw := newAPI(t, &target{url: tg.url, token: tokens[viewer.name]})
	const secret = "s3cr3t-audit-value-9f2c"
	ed.want(http.StatusCreated, "POST", "/v1/credentials", []byte(`{"name":"api","type":"bearer","value":{"token":"`+secret+`"}}`), nil)
	ed.pushWorkflow(wfDef("audited", `{"id":"l","type":"log","parameters":{"message":"hi"}}`, `{"id":"e1","src":"start","dst":"l"}`))
	vw.wantError(http.StatusForbidden, "forbidden", "DELETE", "/v1/workflows/audited", nil)
	vw.want(http.StatusOK, "GET", "/v1/workflows/audited", nil, nil)
	vw.wantError(http.StatusForbidden, "forbidden", "GET", "/v1/audit", nil)

	var log struct {
		Items []struct {
			Actor, Role, Method, Route string
			Objects                    map[string]string
			Status                     int
		} `json:"items"`
	}
	r := a.want(http.StatusOK, "GET", "/v1/audit", nil, &log)
	if strings.Contains(string(r.body), secret) {
		t.Fatalf("the audit log holds a credential's value: %s", r.body)
	}
	type entry struct {
		actor, method, route string
		status               int
	}
	var got []entry
	for _, it := range log.Items {
		got = append(got, entry{it.Actor, it.Method, it.Route, it.Status})
	}
	want := []entry{ // newest first
		{viewer.name, "DELETE", "/v1/workflows/{id}", 403},
		{editor.name, "POST", "/v1/workflows", 201},
		{editor.name, "POST", "/v1/credentials", 201},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("audit log = %+v, want %+v", got, want)
	}
	if log.Items[0].Objects["id"] != "audited" || log.Items[0].Role != store.RoleViewer {
		t.Errorf("audit entry of the refused delete: %+v", log.Items[0])
	}
}

// TestBoundedLists: version lists are paginated and carry no definitions
// (one version's by its own route); a list page ends early once its items
// pass the byte bound, with a cursor that continues exactly after it.
func TestBoundedLists(t *testing.T) {
	tg := embeddedTarget(t)
	a := newAPI(t, tg)
	def := func(v int) string {
		return wfDef("big", fmt.Sprintf(`{"id":"l","type":"log","parameters":{"message":"v%d"}}`, v), `{"id":"e1","src":"start","dst":"l"}`)
	}
	a.pushWorkflow(def(1))
	for v := 2; v <= 3; v++ {
		a.want(http.StatusOK, "PUT", "/v1/workflows/big", []byte(def(v)), nil)
	}
	var vs struct {
		Items      []map[string]any `json:"items"`
		NextCursor string           `json:"next_cursor"`
	}
	a.want(http.StatusOK, "GET", "/v1/workflows/big/versions?limit=2", nil, &vs)
	if len(vs.Items) != 2 || vs.Items[0]["version"] != 3.0 || vs.NextCursor == "" {
		t.Fatalf("versions page 1 = %+v", vs)
	}
	for _, it := range vs.Items {
		if _, ok := it["definition"]; ok {
			t.Fatalf("a version list carries a definition: %v", it)
		}
	}
	a.want(http.StatusOK, "GET", "/v1/workflows/big/versions?limit=2&cursor="+vs.NextCursor, nil, &vs)
	if len(vs.Items) != 1 || vs.Items[0]["version"] != 1.0 || vs.NextCursor != "" {
		t.Fatalf("versions page 2 = %+v", vs)
	}
	var one struct{ Definition json.RawMessage }
	a.want(http.StatusOK, "GET", "/v1/workflows/big/versions/2", nil, &one)
	if !strings.Contains(string(one.Definition), `"v2"`) {
		t.Fatalf("version 2's definition: %s", one.Definition)
	}
	a.wantError(http.StatusNotFound, "not_found", "GET", "/v1/workflows/big/versions/9", nil)

	// Six executions with inputs of 900 kB: more than the 4 MiB a page holds.
	pad := strings.Repeat("x", 900_000)
	want := map[string]bool{}
	for range 6 {
		want[a.trigger("big", `{"pad":"`+pad+`"}`).ID] = true
	}
	got := map[string]bool{}
	pages := 0
	for cursor := ""; ; pages++ {
		var page struct {
			Items      []struct{ ID string } `json:"items"`
			NextCursor string                `json:"next_cursor"`
		}
		r := a.want(http.StatusOK, "GET", "/v1/executions?workflow_id=big&cursor="+cursor, nil, &page)
		if len(r.body) > 5<<20 {
			t.Fatalf("a list page of %d bytes", len(r.body))
		}
		for _, x := range page.Items {
			if got[x.ID] {
				t.Fatalf("execution %s on two pages", x.ID)
			}
			got[x.ID] = true
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	if len(got) != len(want) || pages < 1 {
		t.Fatalf("listed %d executions in %d pages, want all %d over more than one page", len(got), pages+1, len(want))
	}
}
