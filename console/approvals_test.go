package console_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestApprovals: a wait_for_event node with an approval is listed on the
// Approvals page with its title and buttons; Approve through the console's
// /ui/api (with the CSRF header) resumes the execution with the decision
// and the token's name, and the page no longer lists it.
func TestApprovals(t *testing.T) {
	t.Parallel()
	tg := embeddedTarget(t)
	s := tg.login(t)
	tg.mustAPI(t, 201, "POST", "/v1/workflows", `{"id":"needs_ok","nodes":[{"id":"start","type":"trigger","trigger":true},
		{"id":"ok","type":"wait_for_event","parameters":{"event":"send.ok","key":"{{ $trigger.id }}","timeout":"1h","approval":{"title":"Send the <b>bulk</b> mail?"}}}],
		"edges":[{"id":"e1","src":"start","dst":"ok"}]}`)
	out := tg.mustAPI(t, 201, "POST", "/v1/workflows/needs_ok/executions", `{"id":"c-1"}`)
	xid := between(out, `"id":"`, `"`)
	var page string
	waitFor(t, "the approval listed", func() bool {
		var code int
		code, page = s.get("/approvals")
		if !strings.Contains(page, xid) {
			t.Logf("approvals page %d: %s; API: %s", code, limit(page, 300), tg.mustAPI(t, 200, "GET", "/v1/executions/"+xid, ""))
		}
		return strings.Contains(page, xid)
	})
	if !strings.Contains(page, "Send the &lt;b&gt;bulk&lt;/b&gt; mail?") || !strings.Contains(page, `class="approve"`) {
		t.Fatalf("approvals page lacks the escaped title or the buttons:\n%s", limit(page, 2000))
	}
	_, home := s.get("/")
	csrf := between(home, `<meta name="csrf" content="`, `"`)
	code, body := s.do("POST", "/ui/api/v1/executions/"+xid+"/approvals/ok", `{"approved":true,"comment":"fine"}`,
		"X-Rune-CSRF", csrf, "Origin", tg.url, "Content-Type", "application/json")
	if code != http.StatusAccepted || !strings.Contains(body, `"matched":1`) {
		t.Fatalf("approve: %d %s, want 202 matched 1", code, body)
	}
	waitFor(t, "the execution completed", func() bool {
		return strings.Contains(tg.mustAPI(t, 200, "GET", "/v1/executions/"+xid, ""), `"status":"completed"`)
	})
	x := tg.mustAPI(t, 200, "GET", "/v1/executions/"+xid, "")
	if !strings.Contains(x, `"approved":true`) || !strings.Contains(x, `"comment":"fine"`) {
		t.Fatalf("execution %s: want the decision in $ok.data", limit(x, 2000))
	}
	if _, page = s.get("/approvals"); strings.Contains(page, xid) {
		t.Fatalf("a decided approval is still listed")
	}
}
