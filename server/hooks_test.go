package server_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rune-org/rune/server"
	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/store/storetest"
)

// triggerTarget is a server on st with the in-process runtime, its API on
// an httptest server: the triggers' tests run it on both stores.
func triggerTarget(t *testing.T, st store.Store) *target {
	t.Helper()
	return runTarget(t, st, "triggers", func(c *server.Config) { c.Crons.Poll = 50 * time.Millisecond })
}

func eachStore(t *testing.T, fn func(t *testing.T, tg *target)) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			var st store.Store
			if kind == "sqlite" {
				st = storetest.SQLite(t)
			} else {
				st = storetest.Postgres(t)
			}
			fn(t, triggerTarget(t, st))
		})
	}
}

type hookView struct {
	ID            string `json:"id"`
	URL           string `json:"url"`
	Secret        string `json:"secret"`
	SigningSecret string `json:"signing_secret"`
	Signed        bool   `json:"signed"`
	Disabled      bool   `json:"disabled"`
}

type hookAnswer struct {
	ExecutionID string          `json:"execution_id"`
	Status      string          `json:"status"`
	Duplicate   bool            `json:"duplicate"`
	Result      json.RawMessage `json:"result"`
}

// sign returns the signature headers of body at ts.
func sign(secret string, ts time.Time, body string) []string {
	t := strconv.FormatInt(ts.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(t + "." + body))
	return []string{"X-Rune-Timestamp", t, "X-Rune-Signature", "sha256=" + hex.EncodeToString(mac.Sum(nil))}
}

// deliver posts body to a hook URL without a bearer token.
func (a *api) deliver(url, body string, header ...string) *response {
	a.t.Helper()
	h := map[string]string{"Authorization": "", "Content-Type": "application/json"}
	for i := 0; i+1 < len(header); i += 2 {
		h[header[i]] = header[i+1]
	}
	return a.do("POST", url, []byte(body), h)
}

func (a *api) executionsOf(workflowID string) []execution {
	a.t.Helper()
	var page struct {
		Items []execution `json:"items"`
	}
	a.want(http.StatusOK, "GET", "/v1/executions?limit=500&workflow_id="+workflowID, nil, &page)
	return page.Items
}

// TestWebhooks: a signed hook starts one execution per valid delivery; a
// replayed delivery id, a bad signature, a stale or future timestamp, an oversized
// body and a disabled hook start nothing (200 duplicate / 401 / 401 / 413
// / 404); a burst over the rate limit gets 429 with Retry-After; rotation
// retires the old URL; a reply hook answers the selected result.
func TestWebhooks(t *testing.T) {
	t.Parallel()
	eachStore(t, testWebhooks)
}

func testWebhooks(t *testing.T, tg *target) {
	a := newAPI(t, tg)
	wf := "hooked"
	a.pushWorkflow(wfDef(wf, `{"id":"s","type":"set","parameters":{"values":{"event":"{{ $trigger.body.event }}","agent":"{{ $trigger.headers['x-event'] }}"}}}`,
		`{"id":"e1","src":"start","dst":"s"}`))
	var hk hookView
	a.want(http.StatusCreated, "POST", "/v1/workflows/"+wf+"/hooks", []byte(`{"name":"github","signature":{},
		"headers":["X-Event"],"max_body":1024}`), &hk)
	if !strings.HasPrefix(hk.URL, "/v1/hooks/rh_") || !hk.Signed || len(hk.SigningSecret) < 20 {
		t.Fatalf("created hook %+v: want a URL and a generated signing secret", hk)
	}

	body := `{"event":"push"}`
	now := time.Now()
	r := a.deliver(hk.URL+"?ref=main", body, append(sign(hk.SigningSecret, now, body), "X-Request-Id", "d-1", "X-Event", "push-agent", "X-Secret-Header", "no")...)
	if r.status != http.StatusAccepted {
		t.Fatalf("valid delivery: %d %s, want 202", r.status, r.body)
	}
	var ans hookAnswer
	r.decode(t, &ans)
	done := a.waitStatus(ans.ExecutionID, "completed")
	if done.Trigger != "hook:"+hk.ID || !strings.Contains(string(done.Completion), `"event":"push"`) ||
		!strings.Contains(string(done.Completion), `"agent":"push-agent"`) {
		t.Fatalf("execution trigger %q, completion %s: want the hook, the body and the allowed header", done.Trigger, done.Completion)
	}
	var full struct {
		Input struct {
			HookID     string              `json:"hook_id"`
			DeliveryID string              `json:"delivery_id"`
			Headers    map[string]string   `json:"headers"`
			Query      map[string][]string `json:"query"`
		} `json:"input"`
	}
	a.want(http.StatusOK, "GET", "/v1/executions/"+ans.ExecutionID, nil, &full)
	if in := full.Input; in.HookID != hk.ID || in.DeliveryID != "d-1" || len(in.Headers) != 1 || in.Query["ref"][0] != "main" {
		t.Fatalf("trigger payload %+v: want hook, delivery, only the allowed header, the query", in)
	}

	// A sender's retry (same delivery id, signed again): no second execution.
	r = a.deliver(hk.URL, body, append(sign(hk.SigningSecret, time.Now(), body), "X-Request-Id", "d-1")...)
	var dup hookAnswer
	if r.decode(t, &dup); r.status != http.StatusOK || !dup.Duplicate || dup.ExecutionID != ans.ExecutionID {
		t.Fatalf("replayed delivery: %d %s, want 200 duplicate of %s", r.status, r.body, ans.ExecutionID)
	}
	bad := sign(hk.SigningSecret, time.Now(), body)
	bad[3] = "sha256=" + strings.Repeat("0", 64)
	for _, c := range []struct {
		name   string
		status int
		body   string
		header []string
	}{
		{"bad signature", 401, body, append(bad, "X-Request-Id", "d-2")},
		{"signed by another secret", 401, body, append(sign("whsec_not-the-secret", time.Now(), body), "X-Request-Id", "d-3")},
		{"stale timestamp", 401, body, append(sign(hk.SigningSecret, time.Now().Add(-10*time.Minute), body), "X-Request-Id", "d-4")},
		// Dated ahead: valid until then if only the past were bounded.
		{"timestamp in the future", 401, body, append(sign(hk.SigningSecret, time.Now().Add(10*time.Minute), body), "X-Request-Id", "d-7")},
		{"timestamp a year ahead", 401, body, append(sign(hk.SigningSecret, time.Now().AddDate(1, 0, 0), body), "X-Request-Id", "d-8")},
		{"no signature", 401, body, []string{"X-Request-Id", "d-5"}},
		{"oversized body", 413, `{"event":"` + strings.Repeat("x", 2000) + `"}`, nil},
		{"unknown hook", 404, body, nil},
	} {
		url := hk.URL
		if c.name == "unknown hook" {
			url = "/v1/hooks/rh_" + strings.Repeat("A", 43)
		}
		hdr := c.header
		if c.status == 413 {
			hdr = sign(hk.SigningSecret, time.Now(), c.body)
		}
		r := a.deliver(url, c.body, hdr...)
		var e errorBody
		if r.decode(t, &e); r.status != c.status || e.Error.Message == "" {
			t.Errorf("%s: %d %s, want %d with an error body", c.name, r.status, r.body, c.status)
		}
	}
	// Disabled: 404, like an unknown hook.
	a.want(http.StatusOK, "PUT", "/v1/workflows/"+wf+"/hooks/"+hk.ID, []byte(`{"name":"github","signature":{},"headers":["X-Event"],"max_body":1024,"disabled":true}`), nil)
	if r := a.deliver(hk.URL, body, append(sign(hk.SigningSecret, time.Now(), body), "X-Request-Id", "d-6")...); r.status != http.StatusNotFound {
		t.Fatalf("disabled hook: %d %s, want 404", r.status, r.body)
	}
	if xs := a.executionsOf(wf); len(xs) != 1 {
		t.Fatalf("%d executions, want 1: a refused delivery started one", len(xs))
	}

	// Rotation: the old URL is gone at once, the new one works (the
	// signing secret was kept).
	a.want(http.StatusOK, "PUT", "/v1/workflows/"+wf+"/hooks/"+hk.ID, []byte(`{"name":"github","signature":{},"headers":["X-Event"],"max_body":1024}`), nil)
	var rot hookView
	a.want(http.StatusOK, "POST", "/v1/workflows/"+wf+"/hooks/"+hk.ID+"/rotate", nil, &rot)
	if rot.URL == hk.URL || rot.SigningSecret != "" {
		t.Fatalf("rotated %+v: want a new URL, the same signing secret (not shown)", rot)
	}
	if r := a.deliver(hk.URL, body, sign(hk.SigningSecret, time.Now(), body)...); r.status != http.StatusNotFound {
		t.Fatalf("old URL after rotation: %d, want 404", r.status)
	}
	// Another body: the same one signed in the same second would be a
	// replay of the retry above (TestWebhookReplays).
	rotated := `{"event":"rotated"}`
	if r := a.deliver(rot.URL, rotated, sign(hk.SigningSecret, time.Now(), rotated)...); r.status != http.StatusAccepted {
		t.Fatalf("new URL after rotation: %d %s, want 202", r.status, r.body)
	}

	// A burst over the rate limit: the burst passes, the rest get 429.
	var limited hookView
	a.want(http.StatusCreated, "POST", "/v1/workflows/"+wf+"/hooks", []byte(`{"name":"limited","rate_limit":{"per_second":0.2,"burst":3}}`), &limited)
	codes := map[int]int{}
	for i := range 10 {
		r := a.deliver(limited.URL, fmt.Sprintf(`{"event":"burst-%d"}`, i))
		codes[r.status]++
		if r.status == http.StatusTooManyRequests {
			if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 || ra > 5 {
				t.Errorf("429 Retry-After %q, want 1–5 seconds", r.header.Get("Retry-After"))
			}
		}
	}
	if codes[http.StatusAccepted] != 3 || codes[http.StatusTooManyRequests] != 7 {
		t.Fatalf("burst of 10 at 0.2/s with burst 3: %v, want 3×202 and 7×429", codes)
	}

	// A reply hook waits for the end and answers the selected result.
	var reply hookView
	a.want(http.StatusCreated, "POST", "/v1/workflows/"+wf+"/hooks", []byte(`{"name":"sync","headers":["X-Event"],"reply":{"timeout":"20s","select":"$s.event"}}`), &reply)
	r = a.deliver(reply.URL, `{"event":"sync-call"}`, "X-Event", "e")
	var res hookAnswer
	if r.decode(t, &res); r.status != http.StatusOK || res.Status != "completed" || string(res.Result) != `"sync-call"` {
		t.Fatalf("reply hook: %d %s, want 200 with result \"sync-call\"", r.status, r.body)
	}
	var list struct{ Items []hookView }
	a.want(http.StatusOK, "GET", "/v1/workflows/"+wf+"/hooks", nil, &list)
	if len(list.Items) != 3 {
		t.Fatalf("%d hooks listed, want 3", len(list.Items))
	}
	// Secrets are shown once: never in a list, a get, a log line.
	for _, secret := range []string{hk.Secret, hk.SigningSecret, rot.Secret} {
		for _, h := range list.Items {
			if h.Secret != "" || h.SigningSecret != "" || h.URL != "" {
				t.Fatalf("listed hook shows a secret: %+v", h)
			}
		}
		if strings.Contains(tg.output(), secret) {
			t.Fatal("a hook secret appears in the server's logs")
		}
	}
	// A server-side failure on a delivery (a signing secret sealed with a
	// key the server no longer has) is logged without the URL's secret.
	stored, err := tg.store.GetHook(context.Background(), hk.ID)
	if err != nil {
		t.Fatal(err)
	}
	stored.SigningKeyID = "retired-key"
	if err := tg.store.UpdateHook(context.Background(), stored); err != nil {
		t.Fatal(err)
	}
	if r := a.deliver(rot.URL, body, sign(hk.SigningSecret, time.Now(), body)...); r.status != http.StatusInternalServerError {
		t.Fatalf("delivery with an unusable signing secret: %d %s, want 500", r.status, r.body)
	}
	if out := tg.output(); !strings.Contains(out, "/v1/hooks/{secret}") || strings.Contains(out, rot.Secret) {
		t.Fatalf("the failed delivery's log line must name the route, not the secret:\n%s", out)
	}
	a.want(http.StatusNoContent, "DELETE", "/v1/workflows/"+wf+"/hooks/"+limited.ID, nil, nil)
	if r := a.deliver(limited.URL, body); r.status != http.StatusNotFound {
		t.Fatalf("deleted hook: %d, want 404", r.status)
	}
}

// TestSchedulesAPI: a schedule's next fire times are shown, its slots
// start executions that record it as their trigger, pause stops them and
// resume starts them again; invalid settings are 400.
func TestSchedulesAPI(t *testing.T) {
	t.Parallel()
	eachStore(t, testSchedulesAPI)
}

type scheduleView struct {
	ID            string      `json:"id"`
	Cron          string      `json:"cron"`
	Timezone      string      `json:"timezone"`
	Policy        string      `json:"policy"`
	Paused        bool        `json:"paused"`
	NextAt        *time.Time  `json:"next_at"`
	NextFireTimes []time.Time `json:"next_fire_times"`
}

func testSchedulesAPI(t *testing.T, tg *target) {
	a := newAPI(t, tg)
	wf := "clocked"
	a.pushWorkflow(wfDef(wf, `{"id":"s","type":"set","parameters":{"values":{"slot":"{{ $trigger.slot }}","x":"{{ $trigger.input.x }}"}}}`, `{"id":"e1","src":"start","dst":"s"}`))
	var sc scheduleView
	a.want(http.StatusCreated, "POST", "/v1/workflows/"+wf+"/schedules", []byte(`{"name":"tick","cron":"@every 1s","input":{"x":7}}`), &sc)
	if sc.Timezone != "UTC" || sc.Policy != "skip" || len(sc.NextFireTimes) != 5 || sc.NextAt == nil ||
		!sc.NextFireTimes[0].Equal(*sc.NextAt) || sc.NextFireTimes[4].Sub(sc.NextFireTimes[0]) != 4*time.Second {
		t.Fatalf("created schedule %+v: want UTC, skip and 5 next fire times 1 s apart", sc)
	}
	var daily scheduleView
	a.want(http.StatusCreated, "POST", "/v1/workflows/"+wf+"/schedules", []byte(`{"cron":"0 9 * * 1-5","timezone":"Europe/Paris","paused":true}`), &daily)
	if !daily.Paused || len(daily.NextFireTimes) != 0 {
		t.Fatalf("paused schedule %+v: want no next fire times", daily)
	}
	a.want(http.StatusOK, "POST", "/v1/workflows/"+wf+"/schedules/"+daily.ID+"/resume", nil, &daily)
	if len(daily.NextFireTimes) != 5 || daily.NextFireTimes[0].In(mustZone(t, "Europe/Paris")).Hour() != 9 {
		t.Fatalf("resumed schedule %+v: want 5 fire times at 09:00 Paris", daily)
	}
	a.want(http.StatusNoContent, "DELETE", "/v1/workflows/"+wf+"/schedules/"+daily.ID, nil, nil)

	// Two slots run, each recorded as started by the schedule.
	deadline := time.Now().Add(60 * time.Second)
	var xs []execution
	for len(xs) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d executions after 60 s, want 2 slots", len(xs))
		}
		time.Sleep(100 * time.Millisecond)
		xs = a.executionsOf(wf)
	}
	for _, x := range xs[:2] {
		done := a.waitStatus(x.ID, "completed")
		if done.Trigger != "schedule:"+sc.ID || !strings.Contains(string(done.Completion), `"x":7`) {
			t.Fatalf("execution trigger %q completion %s: want the schedule and its input", done.Trigger, done.Completion)
		}
	}
	a.want(http.StatusOK, "POST", "/v1/workflows/"+wf+"/schedules/"+sc.ID+"/pause", nil, &sc)
	time.Sleep(300 * time.Millisecond) // a fire in flight when the pause committed
	n := len(a.executionsOf(wf))
	time.Sleep(2500 * time.Millisecond)
	if m := len(a.executionsOf(wf)); m != n {
		t.Fatalf("%d executions started while paused", m-n)
	}
	for _, bad := range []string{`{"cron":"* * *"}`, `{"cron":"@every 1m","timezone":"Nowhere/Land"}`,
		`{"cron":"@daily","policy":"sometimes"}`, `{"cron":"@daily","start_at":"2027-01-02T00:00:00Z","end_at":"2027-01-01T00:00:00Z"}`} {
		e := a.wantError(http.StatusBadRequest, "invalid_request", "POST", "/v1/workflows/"+wf+"/schedules", []byte(bad))
		if !strings.Contains(e.Error.Message, "field ") {
			t.Errorf("%s: error %q does not name the field", bad, e.Error.Message)
		}
	}
	a.wantError(http.StatusNotFound, "not_found", "GET", "/v1/workflows/nope/schedules", nil)
	a.wantError(http.StatusNotFound, "not_found", "GET", "/v1/workflows/"+wf+"/schedules/sch_nope", nil)
}

func mustZone(t *testing.T, name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// TestWebhookReplays (issue 31): a delivery whose signature was accepted is
// a duplicate whatever its delivery id, within the tolerance with a
// timestamp and for 24 h without one (GitHub's mode); tolerance is at most
// 1 h; a hook may not copy credential headers into its payload, and one
// stored before these rules copies none and accepts no older timestamps.
func TestWebhookReplays(t *testing.T) {
	t.Parallel()
	eachStore(t, testWebhookReplays)
}

func testWebhookReplays(t *testing.T, tg *target) {
	a := newAPI(t, tg)
	wf := "replayed"
	a.pushWorkflow(wfDef(wf, `{"id":"s","type":"set","parameters":{"values":{"event":"{{ $trigger.body.event }}"}}}`,
		`{"id":"e1","src":"start","dst":"s"}`))
	var hk hookView
	a.want(http.StatusCreated, "POST", "/v1/workflows/"+wf+"/hooks", []byte(`{"name":"stripe","signature":{}}`), &hk)
	body := `{"event":"paid"}`
	signed := sign(hk.SigningSecret, time.Now(), body)
	r := a.deliver(hk.URL, body, append(signed, "X-Request-Id", "evt-1")...)
	var first hookAnswer
	if r.decode(t, &first); r.status != http.StatusAccepted {
		t.Fatalf("first delivery: %d %s, want 202", r.status, r.body)
	}
	for _, id := range []string{"evt-2", ""} {
		r := a.deliver(hk.URL, body, append(signed, "X-Request-Id", id)...)
		var dup hookAnswer
		if r.decode(t, &dup); r.status != http.StatusOK || !dup.Duplicate || dup.ExecutionID != first.ExecutionID {
			t.Fatalf("the signature replayed with delivery id %q: %d %s, want 200 duplicate of %s", id, r.status, r.body, first.ExecutionID)
		}
	}
	// A sender's retry, signed again with the same delivery id: a duplicate
	// by its id; its signature, replayed, is a duplicate of the same one.
	time.Sleep(1100 * time.Millisecond) // a new timestamp, a new signature
	resigned := sign(hk.SigningSecret, time.Now(), body)
	for _, id := range []string{"evt-1", "evt-3"} {
		r := a.deliver(hk.URL, body, append(resigned, "X-Request-Id", id)...)
		var dup hookAnswer
		if r.decode(t, &dup); r.status != http.StatusOK || !dup.Duplicate || dup.ExecutionID != first.ExecutionID {
			t.Fatalf("re-signed retry, delivery id %s: %d %s, want 200 duplicate of %s", id, r.status, r.body, first.ExecutionID)
		}
	}

	// GitHub's mode: no timestamp, the signature over the body alone.
	var gh hookView
	a.want(http.StatusCreated, "POST", "/v1/workflows/"+wf+"/hooks", []byte(`{"name":"github","signature":{"header":"X-Hub-Signature-256","timestamp_header":"-"},"delivery_header":"X-GitHub-Delivery"}`), &gh)
	mac := hmac.New(sha256.New, []byte(gh.SigningSecret))
	mac.Write([]byte(body))
	sig := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	r = a.deliver(gh.URL, body, "X-Hub-Signature-256", sig, "X-GitHub-Delivery", "g-1")
	var ghFirst hookAnswer
	if r.decode(t, &ghFirst); r.status != http.StatusAccepted {
		t.Fatalf("github delivery: %d %s, want 202", r.status, r.body)
	}
	r = a.deliver(gh.URL, body, "X-Hub-Signature-256", sig, "X-GitHub-Delivery", "g-2")
	var ghDup hookAnswer
	if r.decode(t, &ghDup); r.status != http.StatusOK || !ghDup.Duplicate || ghDup.ExecutionID != ghFirst.ExecutionID {
		t.Fatalf("github replay with a new delivery id: %d %s, want 200 duplicate", r.status, r.body)
	}
	if xs := a.executionsOf(wf); len(xs) != 2 {
		t.Fatalf("%d executions, want 2: a replay started one", len(xs))
	}
	// Remembered 24 h: the store still holds it 23 h on, and not 25 h on
	// (then the claim is a new one's).
	raw, _ := hex.DecodeString(strings.TrimPrefix(sig, "sha256="))
	hash := sha256.Sum256(raw)
	ctx := context.Background()
	now := time.Now()
	if owner, err := tg.store.ClaimSignature(ctx, gh.ID, hash[:], "x_later", now.Add(48*time.Hour), now.Add(23*time.Hour)); err != nil || owner != ghFirst.ExecutionID {
		t.Fatalf("23 h on: owner %q (%v), want %s", owner, err, ghFirst.ExecutionID)
	}
	if owner, err := tg.store.ClaimSignature(ctx, gh.ID, hash[:], "x_later", now.Add(48*time.Hour), now.Add(25*time.Hour)); err != nil || owner != "x_later" {
		t.Fatalf("25 h on: owner %q (%v), want the expired signature claimed anew", owner, err)
	}

	// Settings: tolerance at most 1 h; no credential headers.
	for _, c := range []struct{ body, field string }{
		{`{"signature":{"tolerance":"876000h"}}`, "signature.tolerance"},
		{`{"signature":{"tolerance":"61m"}}`, "signature.tolerance"},
		{`{"headers":["X-Event","Authorization"]}`, "Authorization"},
		{`{"headers":["cookie"]}`, "cookie"},
		{`{"headers":["Proxy-Authorization"]}`, "Proxy-Authorization"},
		{`{"headers":["X-Api-Key"]}`, "X-Api-Key"},
		{`{"headers":["X-Auth-Token"]}`, "X-Auth-Token"},
	} {
		e := a.wantError(http.StatusUnprocessableEntity, server.CodeInvalidRequest, "POST", "/v1/workflows/"+wf+"/hooks", []byte(c.body))
		if !strings.Contains(e.Error.Message, c.field) {
			t.Errorf("%s: %q does not name %s", c.body, e.Error.Message, c.field)
		}
		e = a.wantError(http.StatusUnprocessableEntity, server.CodeInvalidRequest, "PUT", "/v1/workflows/"+wf+"/hooks/"+hk.ID, []byte(c.body))
		if !strings.Contains(e.Error.Message, c.field) {
			t.Errorf("update %s: %q does not name %s", c.body, e.Error.Message, c.field)
		}
	}
	a.want(http.StatusCreated, "POST", "/v1/workflows/"+wf+"/hooks", []byte(`{"signature":{"tolerance":"1h"},"headers":["X-GitHub-Event","Idempotency-Key"]}`), nil)

	// A hook stored before the rules: credential headers are not copied,
	// timestamps older than 1 h are refused.
	var legacy hookView
	a.want(http.StatusCreated, "POST", "/v1/workflows/"+wf+"/hooks", []byte(`{"name":"legacy","signature":{}}`), &legacy)
	stored, err := tg.store.GetHook(ctx, legacy.ID)
	if err != nil {
		t.Fatal(err)
	}
	stored.Settings = json.RawMessage(`{"signature":{"header":"X-Rune-Signature","timestamp_header":"X-Rune-Timestamp","tolerance":"876000h"},"headers":["Authorization","X-Event"],"delivery_header":"X-Request-Id"}`)
	if err := tg.store.UpdateHook(ctx, stored); err != nil {
		t.Fatal(err)
	}
	old := `{"event":"old"}`
	if r := a.deliver(legacy.URL, old, sign(legacy.SigningSecret, time.Now().Add(-2*time.Hour), old)...); r.status != http.StatusUnauthorized {
		t.Fatalf("legacy hook, a 2 h old timestamp: %d %s, want 401", r.status, r.body)
	}
	fresh := `{"event":"fresh"}`
	r = a.deliver(legacy.URL, fresh, append(sign(legacy.SigningSecret, time.Now(), fresh), "Authorization", "Bearer tok-SECRET-1", "X-Event", "e")...)
	var la hookAnswer
	if r.decode(t, &la); r.status != http.StatusAccepted {
		t.Fatalf("legacy hook: %d %s, want 202", r.status, r.body)
	}
	var full struct {
		Input struct {
			Headers map[string]string `json:"headers"`
		} `json:"input"`
	}
	a.want(http.StatusOK, "GET", "/v1/executions/"+la.ExecutionID, nil, &full)
	if h := full.Input.Headers; len(h) != 1 || h["x-event"] != "e" {
		t.Fatalf("legacy hook copied %v, want only x-event", h)
	}
}
