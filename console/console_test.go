package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rune-org/rune/console"
)

// TestLogin: pages need a session; a wrong token is refused; the cookie
// is HttpOnly and SameSite=Strict; a post-login redirect stays on the server.
func TestLogin(t *testing.T) {
	t.Parallel()
	tg := embeddedTarget(t)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := noRedirect.Get(tg.url + "/executions?status=failed")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if loc := res.Header.Get("Location"); res.StatusCode != http.StatusSeeOther || loc != "/login?next="+url.QueryEscape("/executions?status=failed") {
		t.Fatalf("anonymous page: %d to %q, want 303 to the login form", res.StatusCode, loc)
	}
	res, err = noRedirect.PostForm(tg.url+"/login", url.Values{"token": {"rune_wrong"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized || len(res.Cookies()) != 0 {
		t.Fatalf("wrong token: %d with cookies %v, want 401 and none", res.StatusCode, res.Cookies())
	}
	res, err = noRedirect.PostForm(tg.url+"/login", url.Values{"token": {tg.token}, "next": {"//evil.example/"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if loc := res.Header.Get("Location"); loc != "/" {
		t.Errorf("login with next=//evil.example/ redirects to %q, want /", loc)
	}
	cs := res.Cookies()
	if len(cs) != 1 || !cs[0].HttpOnly || cs[0].SameSite != http.SameSiteStrictMode || cs[0].Secure {
		t.Fatalf("session cookie %+v, want one HttpOnly SameSite=Strict cookie, not Secure over plain HTTP", cs)
	}
	if strings.Contains(cs[0].Value, tg.token) || len(cs[0].Value) < 40 {
		t.Fatalf("the session cookie holds the API token, or too short an id")
	}
	// The data endpoints answer 401 (not a redirect) without a session.
	res, err = noRedirect.Get(tg.url + "/ui/api/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("anonymous /ui/api: %d, want 401", res.StatusCode)
	}
	// The API stays as it was: bearer tokens, JSON errors; /healthz open.
	if code, body := tg.api(t, "GET", "/v1/nothing", ""); code != 404 || !strings.Contains(body, `"detail"`) {
		t.Errorf("unknown API path: %d %s, want the API's 404", code, body)
	}
	if res, err := http.Get(tg.url + "/healthz"); err != nil || res.StatusCode != 200 {
		t.Errorf("/healthz: %v %v", res, err)
	}
}

// TestCSRF: a console write needs the page's CSRF value and, when the
// browser names one, this server as Origin; with both it reaches the API.
func TestCSRF(t *testing.T) {
	t.Parallel()
	tg := embeddedTarget(t)
	s := tg.login(t)
	_, page := s.get("/")
	csrf := between(page, `<meta name="csrf" content="`, `"`)
	if len(csrf) < 16 {
		t.Fatalf("no CSRF value in the page")
	}
	tg.mustAPI(t, 201, "POST", "/v1/workflows", cancelDef)
	for _, c := range []struct {
		name   string
		header []string
		want   int
	}{
		{"no token", nil, http.StatusForbidden},
		{"wrong token", []string{"X-Rune-CSRF", strings.Repeat("0", len(csrf))}, http.StatusForbidden},
		{"other origin", []string{"X-Rune-CSRF", csrf, "Origin", "http://evil.example"}, http.StatusForbidden},
		{"right token", []string{"X-Rune-CSRF", csrf, "Origin", tg.url}, http.StatusCreated},
	} {
		code, body := s.do("POST", "/ui/api/v1/workflows/sleeper/executions", `{}`, c.header...)
		if code != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, code, limit(body, 200), c.want)
		}
	}
	// Only the right one created an execution.
	if out := tg.mustAPI(t, 200, "GET", "/v1/executions?workflow_id=sleeper", ""); strings.Count(out, `"id":"exec_`) != 1 {
		t.Errorf("executions after the CSRF attempts: %s, want exactly one", limit(out, 400))
	}
	// The proxy reaches /v1 only.
	if code, _ := s.do("GET", "/ui/api/healthz", ""); code != http.StatusNotFound {
		t.Errorf("/ui/api/healthz: %d, want 404", code)
	}
}

// TestEscaping: every user value renders as text: a workflow name, node
// name, edge label, idempotency key and input of `<script>`.
func TestEscaping(t *testing.T) {
	t.Parallel()
	tg := embeddedTarget(t)
	const evil = `<script>alert(1)</script>`
	def := `{"id":"esc","name":"` + evil + `","nodes":[{"id":"start","type":"trigger","trigger":true},
	 {"id":"say","name":"` + evil + `","type":"log","parameters":{"message":"{{ $trigger.x }}"}}],
	 "edges":[{"id":"e1","src":"start","dst":"say","label":"` + evil + `"}]}`
	tg.mustAPI(t, 201, "POST", "/v1/workflows", def)
	x := tg.mustAPI(t, 201, "POST", "/v1/workflows/esc/executions", `{"x":"`+evil+`"}`, "Idempotency-Key", evil)
	id := between(x, `"id":"`, `"`)
	s := tg.login(t)
	waitFor(t, "the execution to finish", func() bool {
		_, b := tg.api(t, "GET", "/v1/executions/"+id, "")
		return strings.Contains(b, `"status":"completed"`)
	})
	for _, path := range []string{"/", "/executions?q=" + url.QueryEscape(evil), "/executions/" + id, "/workflows", "/workflows/esc",
		"/ui/executions/" + id + "/nodes/say", "/ui/executions/" + id + "/state", "/ui/rows", "/login?next=" + url.QueryEscape(evil)} {
		code, body := s.get(path)
		if code != http.StatusOK {
			t.Errorf("%s: status %d", path, code)
			continue
		}
		if strings.Contains(body, "<script>alert") {
			t.Errorf("%s renders %s unescaped", path, evil)
		}
	}
	// And the text is there, escaped, where the value is shown.
	for path, want := range map[string]string{"/workflows": "&lt;script&gt;alert(1)&lt;/script&gt;",
		"/executions/" + id: "&lt;script&gt;alert(1)&lt;/script&gt;", "/workflows/esc": "&lt;script&gt;alert(1)&lt;/script&gt;"} {
		if _, body := s.get(path); !strings.Contains(body, want) {
			t.Errorf("%s does not show the escaped value %q", path, want)
		}
	}
}

// TestWorkflowCheck: an edited definition's problems are shown on its graph.
func TestWorkflowCheck(t *testing.T) {
	t.Parallel()
	tg := embeddedTarget(t)
	tg.mustAPI(t, 201, "POST", "/v1/workflows", cancelDef)
	s := tg.login(t)
	_, page := s.get("/workflows/sleeper")
	csrf := between(page, `name="csrf" value="`, `"`)
	bad := strings.Replace(cancelDef, `"amount":10`, `"amount":-1`, 1)
	code, body := s.do("POST", "/workflows/sleeper/check", url.Values{"csrf": {csrf}, "definition": {bad}}.Encode(),
		"Content-Type", "application/x-www-form-urlencoded")
	if code != http.StatusOK {
		t.Fatalf("check: %d", code)
	}
	if !strings.Contains(body, `class="node st-invalid" data-node="nap"`) || !strings.Contains(body, "<code>nap</code>: nodes[1].parameters.amount") {
		t.Errorf("the problem is not on node nap:\n%s", limit(between(body, `id="problems"`, `</section>`), 800))
	}
	code, body = s.do("POST", "/workflows/sleeper/check", url.Values{"csrf": {csrf}, "definition": {cancelDef}}.Encode(),
		"Content-Type", "application/x-www-form-urlencoded")
	if code != http.StatusOK || !strings.Contains(body, "No problems") {
		t.Errorf("a valid definition: %d, want No problems", code)
	}
}

// fakeDLQ is a dead-letter queue in memory.
type fakeDLQ struct{ items []console.DeadLetter }

func (f *fakeDLQ) List(context.Context, int) ([]console.DeadLetter, int, error) {
	return f.items, len(f.items), nil
}
func (f *fakeDLQ) Replay(_ context.Context, ids []string) ([]string, error) {
	var keep []console.DeadLetter
	for _, d := range f.items {
		if !slices.Contains(ids, d.ID) {
			keep = append(keep, d)
		}
	}
	f.items = keep
	return ids, nil
}
func (f *fakeDLQ) Purge(context.Context) (int, error) {
	n := len(f.items)
	f.items = nil
	return n, nil
}

// TestDeadLetters: a server without a queue says so and links no "Dead
// letters" from its pages (nothing is shown that it cannot do); with one,
// the nav links it and the page lists messages with their reason and
// replays the selected.
func TestDeadLetters(t *testing.T) {
	t.Parallel()
	tg := embeddedTarget(t)
	s := tg.login(t)
	if _, body := s.get("/dlq"); !strings.Contains(body, `id="dlq-none"`) {
		t.Errorf("the embedded server's dead-letter page does not say it has no queue")
	}
	if _, body := s.get("/executions"); strings.Contains(body, `href="/dlq"`) {
		t.Errorf("a server without a dead-letter queue links its page")
	}
	dlq := &fakeDLQ{items: []console.DeadLetter{
		{ID: "m1", ExecutionID: "exec_1", Topic: "workflow.execution", Reason: "node type <b>nope</b> unknown", At: time.Now()},
		{ID: "m2", ExecutionID: "exec_2", Topic: "workflow.execution", Reason: "expired", At: time.Now()}}}
	tg2 := embeddedTarget(t, func(c *console.Config) { c.DeadLetters = dlq })
	s2 := tg2.login(t)
	if _, body := s2.get("/executions"); !strings.Contains(body, `href="/dlq">Dead letters`) {
		t.Errorf("a server with a dead-letter queue does not link its page")
	}
	_, body := s2.get("/dlq")
	if !strings.Contains(body, "node type &lt;b&gt;nope&lt;/b&gt; unknown") || !strings.Contains(body, "2 messages") {
		t.Fatalf("the dead-letter page lacks the messages and reasons:\n%s", limit(between(body, "<main>", "</main>"), 1200))
	}
	csrf := between(body, `name="csrf" value="`, `"`)
	code, _ := s2.do("POST", "/dlq", url.Values{"csrf": {csrf}, "action": {"replay"}, "id": {"m1"}}.Encode(),
		"Content-Type", "application/x-www-form-urlencoded")
	if code != http.StatusSeeOther || len(dlq.items) != 1 || dlq.items[0].ID != "m2" {
		t.Errorf("replay m1: %d, queue now %+v", code, dlq.items)
	}
	code, _ = s2.do("POST", "/dlq", url.Values{"csrf": {csrf}, "action": {"purge"}}.Encode(), "Content-Type", "application/x-www-form-urlencoded")
	if code != http.StatusSeeOther || len(dlq.items) != 1 {
		t.Errorf("purge without the confirmation: %d, queue %+v, want it kept", code, dlq.items)
	}
	s2.do("POST", "/dlq", url.Values{"csrf": {csrf}, "action": {"purge"}, "confirm": {"yes"}}.Encode(), "Content-Type", "application/x-www-form-urlencoded")
	if len(dlq.items) != 0 {
		t.Errorf("purge left %+v", dlq.items)
	}
}

// TestFailureBanner: a node failing under the halt strategy ends its
// execution failed; the list filters on it and the execution's page (and
// its live summary) says which node failed, with the code and message.
func TestFailureBanner(t *testing.T) {
	t.Parallel()
	tg := embeddedTarget(t)
	tg.mustAPI(t, 201, "POST", "/v1/workflows", `{"id":"breaks","nodes":[{"id":"start","type":"trigger","trigger":true},
	 {"id":"price","type":"set","parameters":{"values":{"v":"{{ $trigger.order.total }}"}}}],
	 "edges":[{"id":"e1","src":"start","dst":"price"}]}`)
	x := tg.mustAPI(t, 201, "POST", "/v1/workflows/breaks/executions", `{"order":{}}`)
	id := between(x, `"id":"`, `"`)
	waitFor(t, "the execution to fail", func() bool {
		// The execution's own status: its failed node run says "failed"
		// before the completion is recorded.
		_, b := tg.api(t, "GET", "/v1/executions/"+id, "")
		var x struct{ Status string }
		return json.Unmarshal([]byte(b), &x) == nil && x.Status == "failed"
	})
	s := tg.login(t)
	_, page := s.get("/executions/" + id)
	banner := between(page, `<div class="failure" id="failure"`, `</div>`)
	for _, want := range []string{`data-node-link="price"`, "<code>price</code></a> failed", "EXPRESSION", "total"} {
		if !strings.Contains(banner, want) {
			t.Errorf("the failure banner %q lacks %q", banner, want)
		}
	}
	if _, state := s.get("/ui/executions/" + id + "/state"); !strings.Contains(state, `id=\"failure\"`) {
		t.Errorf("the live summary lacks the failure banner: %s", state)
	}
	// The live state carries the timeline, and not again to a page that
	// has the same one.
	_, state := s.get("/ui/executions/" + id + "/state")
	key := between(state, `"timeline_key":"`, `"`)
	if key == "" || !strings.Contains(state, `"timeline":"`) || !strings.Contains(state, "price") {
		t.Errorf("the live state lacks the timeline or its key: %s", limit(state, 400))
	}
	if _, again := s.get("/ui/executions/" + id + "/state?timeline=" + url.QueryEscape(key)); strings.Contains(again, `"timeline":`) || !strings.Contains(again, `"summary":`) {
		t.Errorf("the live state resends an unchanged timeline: %s", limit(again, 400))
	}
	if _, list := s.get("/executions?status=failed"); !strings.Contains(list, `data-id="`+id+`"`) {
		t.Errorf("the list filtered on failed lacks %s", id)
	}
}
