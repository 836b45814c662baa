package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rune-org/rune/server"
	"github.com/rune-org/rune/store"
)

// TestRoleAndScope: a viewer scoped to billing-* sees only billing
// workflows and executions in the console (and on the dashboard), no
// button it may not use, no dead letters; what it may not do is refused through the console as well.
func TestRoleAndScope(t *testing.T) {
	t.Parallel()
	tg := embeddedTarget(t)
	for _, id := range []string{"billing-a", "other-b"} {
		tg.mustAPI(t, 201, "POST", "/v1/workflows", `{"id":"`+id+`","nodes":[{"id":"start","type":"trigger","trigger":true}],"edges":[]}`)
	}
	other := between(tg.mustAPI(t, 201, "POST", "/v1/workflows/other-b/executions", `{}`), `"id":"`, `"`)
	tok, rec, err := server.NewScopedToken("billing-viewer", store.RoleViewer, []string{"billing-*"}, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := tg.store.CreateToken(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	admin := tg.login(t)
	if _, page := admin.get("/workflows/billing-a"); !strings.Contains(page, `id="trigger"`) || !strings.Contains(page, `id="save"`) {
		t.Fatalf("an admin's workflow page lacks its Trigger and Save buttons")
	}
	v := (&target{url: tg.url, token: tok, store: tg.store}).login(t)
	_, page := v.get("/workflows")
	if !strings.Contains(page, "billing-a") || strings.Contains(page, "other-b") {
		t.Errorf("scoped workflows page: want billing-a and not other-b")
	}
	if strings.Contains(page, `href="/dlq"`) {
		t.Errorf("scoped token's pages link the dead-letter queue")
	}
	_, page = v.get("/workflows/billing-a")
	if strings.Contains(page, `id="trigger"`) || strings.Contains(page, `id="save"`) {
		t.Errorf("a viewer's workflow page shows Trigger or Save")
	}
	for _, p := range []string{"/workflows/other-b", "/executions/" + other, "/dlq"} {
		if code, _ := v.get(p); code != http.StatusNotFound {
			t.Errorf("scoped viewer GET %s: %d, want 404", p, code)
		}
	}
	// The dashboard counts only what the token sees: other-b's execution
	// is on the admin's, not on the viewer's.
	if _, dash := admin.get("/dashboard"); !strings.Contains(dash, `data-workflow="other-b"`) {
		t.Errorf("the admin's dashboard lacks other-b")
	}
	if _, dash := v.get("/dashboard"); strings.Contains(dash, "other-b") || !strings.Contains(dash, `id="dashboard"`) {
		t.Errorf("the scoped viewer's dashboard shows other-b, or no dashboard")
	}
	if _, page := v.get("/executions?q=" + other); strings.Contains(page, `href="/executions/`+other) {
		t.Errorf("scoped viewer finds %s (other-b's) by id", other)
	}
	csrf := between(page, `<meta name="csrf" content="`, `"`)
	code, _ := v.do("POST", "/ui/api/v1/workflows/billing-a/executions", `{}`, "X-Rune-CSRF", csrf, "Content-Type", "application/json")
	if code != http.StatusForbidden {
		t.Errorf("viewer triggering through the console: %d, want 403", code)
	}
}
