package server_test

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rune-org/rune/internal/catcher"
)

// TestUnsubscribeCampaignEmbedded runs unsubscribeCampaign on the durable
// embedded server (SQLite, the in-process runtime).
func TestUnsubscribeCampaignEmbedded(t *testing.T) {
	t.Parallel()
	unsubscribeCampaign(t, newAPI(t, embeddedTarget(t)))
}

// TestUnsubscribeCampaignDistributed runs unsubscribeCampaign on the
// distributed runtime: a rune server process on PostgreSQL, two rune
// worker processes reading the same store's subscribers, told the
// server's URL with --public-url, and a scheduler.
func TestUnsubscribeCampaignDistributed(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	d.env = allowLoopback
	srv := d.server()
	d.waitHealthy(srv)
	for range 2 {
		d.start(false, append([]string{"worker", "--postgres", d.pgURL, "--concurrency", "64", "--public-url", "http://" + srv.addr}, d.flags()...)...)
	}
	d.scheduler()
	st := d.store()
	unsubscribeCampaign(t, newAPI(t, &target{url: "http://" + srv.addr, token: newToken(t, st, "campaign"), store: st, output: d.logs.String}))
}

// unsubscribeCampaign (issue 36, items 1 and 2): a split sends a "promo"
// email to each of 1,000 imported subscribers; those whose preferences
// forbid it (the category, or the email channel, off) receive nothing and
// every other exactly one mail, counted by the catcher. The
// List-Unsubscribe link of a received mail, followed with a POST and no
// login, stops the next send to that subscriber; its GET shows a page and
// changes nothing; an altered token is refused and changes nothing.
func unsubscribeCampaign(t *testing.T, a *api) {
	const n = 1000
	id := func(i int) string { return fmt.Sprintf("c%04d", i) }
	addr := func(i int) string { return id(i) + "@example.com" }
	var rows strings.Builder
	for i := range n {
		fmt.Fprintf(&rows, "{\"id\": %q, \"email\": %q, \"data\": {\"first_name\": \"N%d\"}}\n", id(i), addr(i), i)
	}
	var imp struct{ Created, Replaced int }
	a.want(http.StatusOK, "POST", "/v1/subscribers/import", []byte(rows.String()), &imp, "Content-Type", "application/x-ndjson")
	if imp.Created != n {
		t.Fatalf("import created %d, want %d", imp.Created, n)
	}
	optedOut := map[int]bool{}
	for i := 3; i < n; i += 7 {
		a.want(http.StatusOK, "PUT", "/v1/subscribers/"+id(i)+"/preferences", []byte(`{"categories": {"promo": false}}`), nil)
		optedOut[i] = true
	}
	for i := 5; i < n; i += 11 {
		a.want(http.StatusOK, "PUT", "/v1/subscribers/"+id(i)+"/preferences", []byte(`{"channels": {"email": false}, "categories": {"other": false}}`), nil)
		optedOut[i] = true
	}

	mail, err := catcher.StartSMTP(catcher.SMTPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer mail.Close()
	a.want(http.StatusCreated, "POST", "/v1/credentials", []byte(fmt.Sprintf(`{"name": "promo-mail", "type": "smtp", "value": {
		"type": "smtp", "host": "127.0.0.1", "port": "%d", "tls": "none", "from": "promo@rune.test", "unsubscribe_mailto": "unsubscribe@rune.test"}}`, mail.Port())), nil)
	a.pushWorkflow(wfDef("campaign", `{"id": "each", "type": "split", "parameters": {"input_array": "{{ $trigger.users }}"}},
		{"id": "promo", "type": "email", "credentials": {"ref": "promo-mail"}, "retry": {"max_attempts": 5, "initial_delay": "100ms"},
		 "parameters": {"subscriber": "{{ $item }}", "category": "promo", "subject": "Sale, {{ subscriber.data.first_name }}", "text": "50% off"}}`,
		`{"id": "e1", "src": "start", "dst": "each"}, {"id": "e2", "src": "each", "dst": "promo"}`))
	campaign := func(users []string) {
		t.Helper()
		x := a.trigger("campaign", `{"users": ["`+strings.Join(users, `", "`)+`"]}`)
		deadline := time.Now().Add(5 * time.Minute) // 1,000 SMTP sessions on a loaded machine
		for {
			var got execution
			a.want(http.StatusOK, "GET", "/v1/executions/"+x.ID, nil, &got)
			if got.Status == "completed" {
				return
			}
			if got.Status == "failed" || time.Now().After(deadline) {
				t.Fatalf("campaign %s: %s %s", x.ID, got.Status, got.Completion)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	all := make([]string, n)
	for i := range n {
		all[i] = id(i)
	}
	campaign(all)
	inboxes := mail.Inboxes()
	want := n - len(optedOut)
	if got := len(mail.Mails()); got != want {
		t.Fatalf("the catcher received %d mails, want %d (%d subscribers opted out)", got, want, len(optedOut))
	}
	for i := range n {
		got := len(inboxes[addr(i)])
		if optedOut[i] && got != 0 || !optedOut[i] && got != 1 {
			t.Fatalf("%s (opted out: %v) received %d mails", id(i), optedOut[i], got)
		}
	}

	// The link of a mail c0001 received.
	m := inboxes[addr(1)][0]
	if s := m.Header.Get("Subject"); s != "Sale, N1" {
		t.Fatalf("subject %q", s)
	}
	lu := m.Header.Get("List-Unsubscribe")
	link := regexp.MustCompile(`<(http://[^>]+/v1/unsubscribe/[^>]+)>`).FindStringSubmatch(lu)
	if link == nil || !strings.Contains(lu, "<mailto:unsubscribe@rune.test?subject=unsubscribe%20promo>") ||
		m.Header.Get("List-Unsubscribe-Post") != "List-Unsubscribe=One-Click" {
		t.Fatalf("List-Unsubscribe %q, List-Unsubscribe-Post %q", lu, m.Header.Get("List-Unsubscribe-Post"))
	}
	post := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Post(url, "application/x-www-form-urlencoded", strings.NewReader("List-Unsubscribe=One-Click"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// GET shows a page with a button, and records nothing.
	resp, err := http.Get(link[1])
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(string(page), `<form method="post"`) {
		t.Fatalf("GET %s: %d %s", link[1], resp.StatusCode, page)
	}
	// An altered token (another subscriber's id in it): 404, nothing recorded.
	parts := strings.Split(link[1], ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[len(parts)-2])
	if err != nil || string(payload) != id(1)+"\x00promo" {
		t.Fatalf("token payload %q: %v", payload, err)
	}
	parts[len(parts)-2] = base64.RawURLEncoding.EncodeToString([]byte(id(2) + "\x00promo"))
	forged := strings.Join(parts, ".")
	if code, body := post(forged); code != http.StatusNotFound {
		t.Fatalf("POST of an altered token: %d %s", code, body)
	}
	if code, body := post(link[1]); code != http.StatusOK || !strings.Contains(body, `"unsubscribed":true`) {
		t.Fatalf("POST %s: %d %s", link[1], code, body)
	}
	var prefs struct {
		Categories map[string]bool `json:"categories"`
	}
	a.want(http.StatusOK, "GET", "/v1/subscribers/"+id(1)+"/preferences", nil, &prefs)
	if v, ok := prefs.Categories["promo"]; !ok || v {
		t.Fatalf("c0001's preferences after the POST: %+v", prefs)
	}

	// The next send: c0001 gets nothing, c0002 (whose id the forged token
	// held) gets its second mail.
	campaign([]string{id(1), id(2)})
	if got1, got2 := len(mail.Inboxes()[addr(1)]), len(mail.Inboxes()[addr(2)]); got1 != 1 || got2 != 2 {
		t.Fatalf("after unsubscribing c0001: c0001 has %d mails (want 1), c0002 %d (want 2)", got1, got2)
	}
}
