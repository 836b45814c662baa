package console_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/rune-org/rune/internal/browsertest"
)

// brokenDef is a workflow whose http node always meets a 503: tried twice,
// 200 ms apart, it fails the execution. Its error-edged twin shows the
// graph's edge labels: an error edge, the success edge beside it, and a
// conditional's true and false edges.
func brokenDef(url string) string {
	return `{"id":"broken","name":"Always 503","nodes":[
 {"id":"start","type":"trigger","trigger":true},
 {"id":"fetch","type":"http","parameters":{"method":"GET","url":"` + url + `/down","timeout":"5s"},
  "retry":{"max_attempts":2,"initial_delay":"200ms","multiplier":1}},
 {"id":"after","type":"log","parameters":{"message":"never"}}],
 "edges":[{"id":"e1","src":"start","dst":"fetch"},{"id":"e2","src":"fetch","dst":"after"}]}`
}

const routesDef = `{"id":"routes","nodes":[
 {"id":"start","type":"trigger","trigger":true},
 {"id":"fetch","type":"set","parameters":{"values":{"n":1}},"error":{"type":"branch","error_edge":"bad"}},
 {"id":"check","type":"conditional","parameters":{"expression":"{{ $fetch.n > 0 }}","true_edge_id":"yes","false_edge_id":"no"}},
 {"id":"alert","type":"log","parameters":{"message":"failed"}},
 {"id":"big","type":"log","parameters":{"message":"big"}},
 {"id":"small","type":"log","parameters":{"message":"small"}}],
 "edges":[{"id":"e1","src":"start","dst":"fetch"},{"id":"good","src":"fetch","dst":"check"},{"id":"bad","src":"fetch","dst":"alert"},
 {"id":"yes","src":"check","dst":"big","label":"more than zero items to ship"},{"id":"no","src":"check","dst":"small"}]}`

// TestBrowserFailuresAndManners: a failed execution says why at the top and
// links to its node, whose panel lists every attempt; edges say what they
// are, their labels on no box; the timeline and times; keyboard use; dark
// mode by the system's preference and by the toggle; a 360 px wide
// screen; titles and favicon; and axe-core finds no serious or critical
// violation on any page, light or dark.
//
// Not parallel: it runs (about 10 s) before the parallel tests start, since
// a page in a tab that is not in front stops updating live when another
// test's tab is (TestBrowserConsole's live checks then time out).
func TestBrowserFailuresAndManners(t *testing.T) {
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}))
	t.Cleanup(down.Close)
	tg := embeddedTarget(t)
	// issue 36: a template for the Templates page's scan.
	tg.mustAPI(t, 200, "PUT", "/v1/templates/welcome", `{"subject":"Hi {{ $trigger.name }}","html":"<p>Hi</p>","body":"Hi"}`)
	tg.mustAPI(t, 201, "POST", "/v1/workflows", brokenDef(down.URL))
	tg.mustAPI(t, 201, "POST", "/v1/workflows", routesDef)
	tab := browsertest.NewTab(t)
	tab.Media("light")

	// The login page: a title, a favicon, accessible.
	tab.Do("the login page", chromedp.Navigate(tg.url+"/executions"), chromedp.WaitVisible(chromedp.ID("token")))
	if title := browsertest.Eval[string](tab, `document.title`); title != "Log in · Rune" {
		t.Errorf("login page title %q", title)
	}
	if ok := browsertest.Get(tab, "fetch the favicon", chromedp.Evaluate[bool](`fetch(document.querySelector('link[rel=icon]').href).then(r => r.ok && r.headers.get('content-type').startsWith('image/svg'))`, chromedp.EvalAwaitPromise)); !ok {
		t.Error("the favicon does not load")
	}
	tab.Axe("the login page")
	tab.Login(tg.url, "/executions", tg.token)

	// A failed execution: the banner names the node, code and message.
	out := tg.mustAPI(t, 201, "POST", "/v1/workflows/broken/executions", `{}`)
	id := between(out, `"id":"`, `"`)
	tab.Do("the failed execution", chromedp.Navigate(tg.url+"/executions/"+id))
	ready(tab)
	tab.Until("the failure banner", `!!document.getElementById('failure') && document.getElementById('status').textContent === 'failed'`)
	if node, code, msg := tab.Text("#failure-node"), tab.Text("#failure-code"), tab.Text("#failure-message"); node != "fetch" || code != "HTTP_STATUS" || !strings.Contains(msg, "503") {
		t.Errorf("banner: node %q code %q message %q", node, code, msg)
	}
	// Its link opens the node: both attempts, the backoff between them,
	// and no "next attempt" on a node that finally failed.
	tab.Click("the banner's node link", "#failure-node")
	tab.Do("the failed node's panel", chromedp.WaitVisible(chromedp.ID("attempts")))
	attempts := browsertest.Eval[[]string](tab, `[...document.querySelectorAll('#attempts tbody tr[data-attempt]')].map(r => [...r.cells].map(c => c.textContent.trim()).join(' | ') + (r.nextElementSibling && r.nextElementSibling.classList.contains('attempt-error') ? ' | ' + r.nextElementSibling.textContent.trim() : ''))`)
	if len(attempts) != 2 || !strings.HasPrefix(attempts[0], "1 | retrying |") || !strings.Contains(attempts[0], "200ms, until") ||
		!strings.HasPrefix(attempts[1], "2 | failed |") || !strings.Contains(attempts[1], "HTTP_STATUS") || strings.Contains(attempts[1], "until") {
		t.Errorf("attempts:\n%s\nwant a retried one with a 200ms backoff, then a failed one", strings.Join(attempts, "\n"))
	}
	if st, n := tab.Text("#run-status"), tab.Text("#run-attempts"); st != "failed" || n != "2 of at most 2" {
		t.Errorf("run status %q, attempts %q", st, n)
	}
	if browsertest.Eval[bool](tab, `document.getElementById('run').innerText.includes('Next attempt')`) {
		t.Error("a node that finally failed shows a next attempt")
	}
	if !strings.HasSuffix(tab.Location(), "?node=fetch") {
		t.Errorf("the node link left the page at %s, want ?node=fetch", tab.Location())
	}
	tab.Axe("an execution page with a node open")
	shot(t, tab, "console-failure.png")
	// Escape closes the panel and gives the focus back to the link; a
	// node of the graph opens with Enter.
	tab.Do("Escape", chromedp.KeyEvent("\x1b"))
	tab.Until("the panel closed, focus back", `document.getElementById('panel').hidden && document.activeElement.id === 'failure-node'`)
	browsertest.Eval[any](tab, `document.querySelector('#graph [data-node="start"]').focus()`)
	tab.Do("Enter on a node", chromedp.KeyEvent("\r"))
	tab.Until("the start node's panel", `!document.getElementById('panel').hidden && document.getElementById('panel-h').textContent.startsWith('start')`)
	tab.Do("Escape", chromedp.KeyEvent("\x1b"))

	// Times: relative, and the zone toggle turns UTC into local time.
	tab.Timezone("Asia/Kolkata")
	utc := tab.Text(`#summary time[data-t="abs"]`)
	tab.Click("the zone toggle", "#tz")
	local := tab.Text(`#summary time[data-t="abs"]`)
	if !strings.HasSuffix(utc, " UTC") || !strings.HasSuffix(local, " local") || utc[11:16] == local[11:16] {
		t.Errorf("start time %q in UTC, %q in local (Asia/Kolkata): want different clocks, each zone named", utc, local)
	}
	if rel := tab.Text(`#summary time[data-t="rel"]`); !strings.HasSuffix(rel, " ago") && rel != "now" {
		t.Errorf("relative start %q", rel)
	}
	tab.Click("the zone toggle back", "#tz")

	// The dashboard: the failed execution counted in the day and the
	// hour, its run time, and fetch ranked first among failing nodes.
	tab.Do("the dashboard", chromedp.Navigate(tg.url+"/dashboard"), chromedp.WaitVisible(chromedp.ID("dashboard")))
	if row := browsertest.Eval[string](tab, `(r => r ? [...r.cells].map(c => c.textContent.trim()).join(' | ') : '')(document.querySelector('#dashboard tr[data-workflow="broken"]'))`); !strings.HasPrefix(row, "broken | 1 / 1 |") {
		t.Errorf("the dashboard's row of broken: %q", row)
	}
	if failed := tab.Text(`#dashboard tr[data-workflow="broken"] td[data-status="failed"]`); failed != "1 / 1" {
		t.Errorf("broken's failed executions on the dashboard: %q, want 1 / 1", failed)
	}
	if p50 := tab.Text(`#dashboard tr[data-workflow="broken"] td[data-p50]`); p50 == "—" || p50 == "0s" {
		t.Errorf("broken's p50 run time %q", p50)
	}
	if first := browsertest.Eval[string](tab, `[...document.querySelector('#failing tbody tr').cells].map(c => c.textContent.trim()).slice(0, 4).join(' | ')`); first != "1 | broken | fetch | 1" {
		t.Errorf("the first failing node: %q, want broken's fetch with 1 failed run", first)
	}

	// Edge labels: what each edge is, drawn on no node.
	tab.Do("the routes workflow", chromedp.Navigate(tg.url+"/workflows/routes"), chromedp.WaitVisible(chromedp.ID("graph")))
	labels := browsertest.Eval[map[string]string](tab, `Object.fromEntries([...document.querySelectorAll('[data-edge-label]')].map(g => [g.dataset.edgeLabel, g.querySelector('text').textContent]))`)
	if labels["bad"] != "on error" || labels["good"] != "on success" || labels["no"] != "false" || !strings.HasPrefix(labels["yes"], "true: more than") {
		t.Errorf("edge labels %v", labels)
	}
	if overlaps := browsertest.Eval[[]string](tab, `(() => {
  const boxes = [...document.querySelectorAll('#graph .node')].map(g => [g.dataset.node, g.getBoundingClientRect()]);
  const out = [];
  for (const l of document.querySelectorAll('[data-edge-label] rect')) {
    const r = l.getBoundingClientRect();
    for (const [id, b] of boxes) if (r.left < b.right && r.right > b.left && r.top < b.bottom && r.bottom > b.top) out.push(l.parentNode.dataset.edgeLabel + ' on ' + id);
  }
  return out; })()`); len(overlaps) > 0 {
		t.Errorf("edge labels behind nodes: %v", overlaps)
	}
	if dash := browsertest.Eval[string](tab, `getComputedStyle(document.querySelector('[data-edge="bad"]')).strokeDasharray`); dash == "none" || dash == "" {
		t.Error("the error edge is drawn like the others")
	}

	// Every page: a title, and no serious accessibility violation, light
	// and dark (the system's preference).
	pages := []struct{ path, title, ready string }{
		{"/executions", "Executions · Rune", "#executions"},
		{"/executions/" + id, "Execution " + id + " · Rune", "#graph"},
		{"/workflows", "Workflows · Rune", "#workflows"},
		{"/workflows/routes", "Workflow routes · Rune", "#graph"},
		{"/dashboard", "Dashboard · Rune", "#dashboard"},
		{"/dlq", "Dead letters · Rune", "main"},
		{"/approvals", "Approvals · Rune", "#approvals"},                     // issue 34
		{"/templates?name=welcome", "Templates · Rune", "#template-preview"}, // issue 36
		{"/executions/exec_missing", "Not found · Rune", "main"},
	}
	for _, scheme := range []string{"light", "dark"} {
		tab.Media(scheme)
		for _, p := range pages {
			tab.Do("open "+p.path, chromedp.Navigate(tg.url+p.path), chromedp.WaitVisible(chromedp.CSS(p.ready)))
			if title := browsertest.Eval[string](tab, `document.title`); title != p.title {
				t.Errorf("%s: title %q, want %q", p.path, title, p.title)
			}
			tab.Axe(p.path + " (" + scheme + ")")
			if p.path == "/dashboard" {
				shot(t, tab, "console-dashboard-"+scheme+".png")
			}
			if p.path == "/executions/"+id && scheme == "dark" {
				shot(t, tab, "console-failure-dark.png")
			}
		}
	}
	const darkBG = "rgb(15, 17, 21)"
	if bg := browsertest.Eval[string](tab, `getComputedStyle(document.body).backgroundColor`); bg != darkBG {
		t.Errorf("with prefers-color-scheme: dark the page's background is %s, want %s", bg, darkBG)
	}
	// The toggle: auto → dark → light → auto, kept across pages.
	tab.Media("light")
	ready(tab)
	tab.Click("the theme toggle", "#theme")
	tab.Do("reload", chromedp.Navigate(tg.url+"/workflows"), chromedp.WaitVisible(chromedp.ID("workflows")))
	ready(tab)
	if bg := browsertest.Eval[string](tab, `getComputedStyle(document.body).backgroundColor`); bg != darkBG {
		t.Errorf("after the toggle to dark, on the next page, the background is %s", bg)
	}
	tab.Click("the theme toggle", "#theme")
	if bg := browsertest.Eval[string](tab, `getComputedStyle(document.body).backgroundColor`); bg == darkBG {
		t.Error("the toggle's light theme is dark")
	}
	tab.Click("the theme toggle", "#theme")

	// 360 px wide: nothing wider than the screen but the tables, which
	// scroll in their own box.
	tab.Viewport(360, 740)
	for _, p := range pages[:4] {
		tab.Do("open "+p.path+" at 360 px", chromedp.Navigate(tg.url+p.path), chromedp.WaitVisible(chromedp.CSS(p.ready)))
		if w := browsertest.Eval[float64](tab, `document.documentElement.scrollWidth`); w > 360 {
			t.Errorf("%s at 360 px is %v px wide", p.path, w)
		}
		if h := browsertest.Eval[bool](tab, `(h => h.scrollWidth <= h.clientWidth)(document.querySelector('header'))`); !h {
			t.Errorf("%s at 360 px: the header overflows", p.path)
		}
		if p.path == "/executions/"+id {
			shot(t, tab, "console-failure-360.png")
		}
	}
	tab.CheckLocal(strings.TrimPrefix(tg.url, "http://"), 10)
}

// shot writes a screenshot of the tab to $RUNE_CONSOLE_SCREENSHOTS/name,
// when that is set (docs/console.md's pictures).
func shot(t *testing.T, tab *browsertest.Tab, name string) {
	if dir := os.Getenv("RUNE_CONSOLE_SCREENSHOTS"); dir != "" {
		screenshot(t, tab, filepath.Join(dir, name))
	}
}
