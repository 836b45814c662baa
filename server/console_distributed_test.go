package server_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rune-org/rune/internal/browsertest"
)

// TestConsoleDistributed: the web console (issue 16) served by the
// distributed master, a `rune server` process on PostgreSQL, RabbitMQ and
// Redis with a worker and a scheduler: log in, the list, an execution's
// page with its graph coloured by the run, a node's output, a write
// through the console, the dead-letter page reading the broker's queue; and
// in a browser, a run watched live to its end. The full browser test runs
// against the embedded default (console/browser_test.go).
func TestConsoleDistributed(t *testing.T) {
	d := newDeployment(t)
	d.worker()
	d.scheduler()
	srv := d.server()
	d.waitHealthy(srv)
	tg := &target{url: "http://" + srv.addr, token: newToken(t, d.store(), "console"), output: d.logs.String}
	a := newAPI(t, tg)
	a.pushWorkflow(readExample(t, "fanout_orders.json"))
	x := a.trigger("fanout_orders", readExample(t, "fanout_orders.input.json"))
	a.waitStatus(x.ID, "completed")

	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	get := func(path string) string {
		t.Helper()
		res, err := hc.Get(tg.url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, res.StatusCode, b)
		}
		return string(b)
	}
	if page := get("/"); !strings.Contains(page, `id="token"`) {
		t.Fatalf("/ without a session does not show the login form")
	}
	res, err := hc.PostForm(tg.url+"/login", url.Values{"token": {tg.token}, "next": {"/"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	list := get("/")
	if !strings.Contains(list, `data-id="`+x.ID+`"`) || !strings.Contains(list, `<span class="mode">distributed</span>`) {
		t.Fatalf("the list lacks execution %s or the mode", x.ID)
	}
	page := get("/executions/" + x.ID)
	for _, want := range []string{`class="node st-success" data-node="each_order"`, `class="node st-success" data-node="report"`,
		`<text class="progress" x="10" y="46">3 / 3 branches</text>`, `id="completion"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the execution page lacks %s", want)
		}
	}
	if panel := get("/ui/executions/" + x.ID + "/nodes/summary"); !strings.Contains(panel, "grand_total") {
		t.Errorf("the summary node's panel lacks its output")
	}
	csrf := between(page, `<meta name="csrf" content="`, `"`)
	req, _ := http.NewRequest("POST", tg.url+"/ui/api/v1/executions/"+x.ID+"/rerun", nil)
	req.Header.Set("X-Rune-CSRF", csrf)
	res, err = hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("re-run through the console: %d %s", res.StatusCode, body)
	}
	// The master's URL here is RabbitMQ's administrator (guest), so the
	// page reads the queue: empty in this deployment.
	if dlq := get("/dlq"); !strings.Contains(dlq, "The dead-letter queue is empty.") {
		t.Errorf("the dead-letter page does not show the (empty) queue:\n%s", between(dlq, "<main>", "</main>"))
	}

	// Issue 38: the dashboard shows RabbitMQ's queues and Redis's timers.
	if dash := get("/dashboard"); !strings.Contains(dash, `id="depths"`) || !strings.Contains(dash, `data-depth="timers scheduled"`) ||
		strings.Count(dash, "data-depth=") < 4 || strings.Contains(dash, "Reading some depths failed") {
		t.Errorf("the dashboard's queues and timers:\n%s", between(dash, `id="depths-h"`, "</table>"))
	}

	// The same pages in a browser: log in, watch an execution with a wait
	// reach completed without a reload, and no request leaves the machine.
	a.pushWorkflow(`{"id":"napper","nodes":[{"id":"start","type":"trigger","trigger":true},
	 {"id":"nap","type":"wait","parameters":{"amount":3,"unit":"seconds"}},{"id":"after","type":"log","parameters":{"message":"woke"}}],
	 "edges":[{"id":"e1","src":"start","dst":"nap"},{"id":"e2","src":"nap","dst":"after"}]}`)
	tab := browsertest.NewTab(t)
	tab.Login(tg.url, "/workflows/napper", tg.token)
	tab.Do("trigger", chromedp.Click(chromedp.ID("trigger")), chromedp.WaitVisible(chromedp.ID("execution")))
	browsertest.Eval[any](tab, `window.__sameDocument = true`)
	tab.Until("the run complete", `document.getElementById('status').textContent === 'completed' &&
		[...document.querySelectorAll('#graph .node')].every(n => n.classList.contains('st-success'))`)
	if !browsertest.Eval[bool](tab, `window.__sameDocument === true`) {
		t.Error("the execution page reloaded; it must update live")
	}
	tab.CheckLocal(srv.addr, 8)
}

func between(s, a, b string) string {
	_, rest, _ := strings.Cut(s, a)
	v, _, _ := strings.Cut(rest, b)
	return v
}
