package server_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rune-org/rune/server"
)

type hookDelivery struct {
	ReceivedAt  time.Time `json:"received_at"`
	Status      int       `json:"status"`
	Accepted    bool      `json:"accepted"`
	Code        string    `json:"code"`
	ExecutionID string    `json:"execution_id"`
	EventID     string    `json:"event_id"`
	Size        int64     `json:"size"`
}

// testHookDeliveries (issue 38): a hook delivered once with a good
// signature and once with a bad one lists both, newest first, with their
// statuses, the refusal's code and the accepted one's execution; the
// answer holds no secret, signature or body. An event hook's delivery
// names its event; one over max_body is listed as 413 too_large.
func testHookDeliveries(t *testing.T, a *api, id string) {
	a.pushWorkflow(wfDef(id, `{"id":"s","type":"set","parameters":{"values":{"ok":true}}}`, `{"id":"e1","src":"start","dst":"s"}`))
	var hk hookView
	a.want(http.StatusCreated, "POST", "/v1/workflows/"+id+"/hooks", []byte(`{"name":"signed","signature":{}}`), &hk)
	path := "/v1/workflows/" + id + "/hooks/" + hk.ID + "/deliveries"
	var page struct {
		Items []hookDelivery `json:"items"`
	}
	a.want(http.StatusOK, "GET", path, nil, &page)
	if len(page.Items) != 0 {
		t.Fatalf("deliveries before any: %+v, want none", page.Items)
	}

	body := `{"event":"push","token":"body-value-` + id + `"}`
	good := sign(hk.SigningSecret, time.Now(), body)
	r := a.deliver(hk.URL, body, good...)
	if r.status != http.StatusAccepted {
		t.Fatalf("signed delivery: %d %s, want 202", r.status, r.body)
	}
	var ans hookAnswer
	r.decode(t, &ans)
	bad := sign("whsec_not-the-secret-of-this-hook", time.Now(), body)
	if r := a.deliver(hk.URL, body, bad...); r.status != http.StatusUnauthorized {
		t.Fatalf("badly signed delivery: %d %s, want 401", r.status, r.body)
	}

	res := a.want(http.StatusOK, "GET", path, nil, &page)
	if len(page.Items) != 2 {
		t.Fatalf("deliveries: %s, want 2", res.body)
	}
	refused, accepted := page.Items[0], page.Items[1]
	if refused.Status != http.StatusUnauthorized || refused.Accepted || refused.Code != server.CodeUnauthorized ||
		refused.ExecutionID != "" || refused.Size != int64(len(body)) {
		t.Errorf("newest delivery %+v: want the 401 unauthorized one, of %d bytes", refused, len(body))
	}
	if accepted.Status != http.StatusAccepted || !accepted.Accepted || accepted.Code != "" ||
		accepted.ExecutionID != ans.ExecutionID || accepted.Size != int64(len(body)) {
		t.Errorf("older delivery %+v: want the 202 one that started %s", accepted, ans.ExecutionID)
	}
	if accepted.ReceivedAt.IsZero() || refused.ReceivedAt.Before(accepted.ReceivedAt) {
		t.Errorf("received at %v then %v: want newest first", accepted.ReceivedAt, refused.ReceivedAt)
	}
	secretOf := strings.TrimPrefix(hk.URL, "/v1/hooks/")
	for _, leak := range []string{secretOf, hk.SigningSecret, good[3], bad[3], "body-value-" + id} {
		if strings.Contains(string(res.body), leak) {
			t.Fatalf("deliveries answer %s holds %q", res.body, leak)
		}
	}

	page.Items = nil
	a.want(http.StatusOK, "GET", path+"?limit=1", nil, &page)
	if len(page.Items) != 1 || page.Items[0].Status != http.StatusUnauthorized {
		t.Errorf("?limit=1: %+v, want the newest only", page.Items)
	}
	a.wantError(http.StatusBadRequest, server.CodeInvalidRequest, "GET", path+"?limit=51", nil)
	a.wantError(http.StatusNotFound, server.CodeNotFound, "GET", "/v1/workflows/"+id+"/hooks/hk_none/deliveries", nil)

	// An event hook's delivery names its event; a body over max_body is
	// listed as 413 too_large.
	var ev hookView
	a.want(http.StatusCreated, "POST", "/v1/workflows/"+id+"/hooks", []byte(`{"name":"events","max_body":64,"event":{"name":"order.paid","key":"body.order"}}`), &ev)
	r = a.deliver(ev.URL, `{"order":"o-1"}`)
	if r.status != http.StatusAccepted {
		t.Fatalf("event delivery: %d %s, want 202", r.status, r.body)
	}
	var sent struct {
		EventID string `json:"event_id"`
	}
	r.decode(t, &sent)
	large := `{"order":"` + strings.Repeat("x", 100) + `"}`
	if r := a.deliver(ev.URL, large); r.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body over max_body: %d %s, want 413", r.status, r.body)
	}
	page.Items = nil // a reused element would keep the fields an answer omits
	a.want(http.StatusOK, "GET", "/v1/workflows/"+id+"/hooks/"+ev.ID+"/deliveries", nil, &page)
	if len(page.Items) != 2 || page.Items[0].Status != http.StatusRequestEntityTooLarge || page.Items[0].Code != server.CodeTooLarge ||
		page.Items[0].Size < 64 || page.Items[1].EventID == "" || page.Items[1].EventID != sent.EventID || page.Items[1].ExecutionID != "" {
		t.Errorf("event hook's deliveries %+v: want 413 too_large, then 202 with event %s", page.Items, sent.EventID)
	}
}
