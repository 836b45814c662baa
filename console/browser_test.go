package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/rune-org/rune/internal/browsertest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	browsertest.Shutdown()
	os.Exit(code)
}

// flaky answers 503 to its first request and 200 after: the node calling
// it is retried once.
func flaky(t *testing.T) string {
	var n atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"greeting":"hello from the flaky service"}`)
	}))
	t.Cleanup(hs.Close)
	return hs.URL
}

// flowDef is a workflow with a split, a wait and a node retried once.
func flowDef(id, flakyURL string) string {
	return `{"id":"` + id + `","name":"Orders: split, wait, retry","nodes":[
 {"id":"start","type":"trigger","trigger":true},
 {"id":"each","type":"split","parameters":{"input_array":"{{ $trigger.items }}"}},
 {"id":"shape","type":"set","parameters":{"values":{"item":"{{ $item }}","double":"{{ $item * 2 }}"}}},
 {"id":"gather","type":"aggregator","parameters":{"timeout":60}},
 {"id":"pause","type":"wait","parameters":{"amount":"{{ $trigger.pause }}","unit":"seconds"}},
 {"id":"fetch","type":"http","parameters":{"method":"GET","url":"` + flakyURL + `/hello","timeout":"5s"},
  "retry":{"max_attempts":3,"initial_delay":"300ms","multiplier":1}},
 {"id":"done","type":"set","parameters":{"values":{"greeting":"{{ $fetch.body.greeting }}","count":"{{ $gather.total }}"}}}],
 "edges":[{"id":"e1","src":"start","dst":"each"},{"id":"e2","src":"each","dst":"shape"},{"id":"e3","src":"shape","dst":"gather"},
 {"id":"e4","src":"gather","dst":"pause"},{"id":"e5","src":"pause","dst":"fetch"},{"id":"e6","src":"fetch","dst":"done","label":"ok"}]}`
}

const cancelDef = `{"id":"sleeper","nodes":[{"id":"start","type":"trigger","trigger":true},
 {"id":"nap","type":"wait","parameters":{"amount":10,"unit":"minutes"}},{"id":"after","type":"log","parameters":{"message":"woke"}}],
 "edges":[{"id":"e1","src":"start","dst":"nap"},{"id":"e2","src":"nap","dst":"after"}]}`

// TestBrowserConsole drives the console as a user does: log in, trigger a
// workflow with a split, a wait and a retried node from its page, watch the
// graph reach success without a reload, open node outputs, see a new
// execution appear in the list live, cancel a second execution; and no
// request goes to another host. With RUNE_CONSOLE_SCREENSHOTS=DIR it
// also writes the README's screenshots there.
func TestBrowserConsole(t *testing.T) {
	t.Parallel()
	tg := embeddedTarget(t)
	tab := browsertest.NewTab(t)
	shots := os.Getenv("RUNE_CONSOLE_SCREENSHOTS")
	tg.mustAPI(t, 201, "POST", "/v1/workflows", flowDef("orders", flaky(t)))
	tg.mustAPI(t, 201, "POST", "/v1/workflows", cancelDef)
	// The wait lasts long enough for a loaded machine to show it, and
	// longer for a photograph of the run mid-way.
	pause, items := "3", "[1,2,3]"
	if shots != "" {
		pause, items = "4", "[1,2,3,4,5,6,7,8,9,10,11,12]"
	}

	// Log in through the form; the page asked for first comes back.
	tab.Login(tg.url, "/workflows/orders", tg.token)
	if loc := tab.Location(); !strings.HasSuffix(loc, "/workflows/orders") {
		t.Fatalf("after login at %s, want the workflow page", loc)
	}
	cookies := browsertest.Get(tab, "cookies", func(ctx context.Context, _ *chromedp.Target) (network.GetCookiesResult, error) {
		return chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{})
	})
	if c := cookies.Cookies; len(c) != 1 || !c[0].HTTPOnly || c[0].SameSite != network.CookieSameSiteStrict {
		t.Fatalf("session cookies %+v, want one HttpOnly SameSite=Strict", c)
	}

	// Trigger from the workflow page with a JSON payload.
	ready(tab)
	tab.Do("trigger",
		chromedp.SetValue(chromedp.ID("trigger-input"), `{"items":`+items+`,"pause":`+pause+`}`),
		chromedp.Click(chromedp.ID("trigger")),
		chromedp.WaitVisible(chromedp.ID("execution"))) // the workflow page has a graph too
	loc := tab.Location()
	execID := loc[strings.LastIndex(loc, "/")+1:]
	if !strings.HasPrefix(execID, "exec_") {
		t.Fatalf("after trigger at %s, want an execution page", loc)
	}
	browsertest.Eval[any](tab, `window.__sameDocument = true`)
	// The wait shows as waiting, live.
	tab.Until("the wait waiting", `document.querySelector('[data-node="pause"]').classList.contains('st-waiting')`)
	if shots != "" {
		tab.Until("the split's progress", `document.querySelector('[data-node="each"] .progress').textContent.startsWith('12 / 12')`)
		screenshot(t, tab, filepath.Join(shots, "console-execution.png"))
	}
	// The graph reaches success without a reload.
	tab.Until("the run complete", `document.getElementById('status').textContent === 'completed' &&
		[...document.querySelectorAll('#graph .node')].every(n => n.classList.contains('st-success'))`)
	if !browsertest.Eval[bool](tab, `window.__sameDocument === true`) {
		t.Fatal("the execution page reloaded; it must update live")
	}
	if got, want := tab.Text(`[data-node="each"] .progress`), "3 / 3 branches"; shots == "" && got != want {
		t.Errorf("split progress %q, want %q", got, want)
	}

	// A node's output, attempts and input context; then a split branch.
	tab.Click("open the retried node", `[data-node="fetch"]`)
	tab.Do("the retried node's panel", chromedp.WaitVisible(chromedp.ID("run-output")))
	if out := tab.Text("#run-output"); !strings.Contains(out, "hello from the flaky service") {
		t.Errorf("fetch output %q, want the service's body", out)
	}
	if attempt := tab.Text("#run-attempts"); attempt != "2 of at most 3" {
		t.Errorf("fetch panel shows attempts %q, want 2 of at most 3 (one retry)", attempt)
	}
	// Every attempt, not only the last: the first failed with the
	// service's 503 and waited 300 ms (the policy's delay) before the next.
	attempts := browsertest.Eval[[]string](tab, `[...document.querySelectorAll('#attempts tbody tr[data-attempt]')].map(r => [...r.cells].map(c => c.textContent.trim()).join(' | ') + (r.nextElementSibling && r.nextElementSibling.classList.contains('attempt-error') ? ' | ' + r.nextElementSibling.textContent.trim() : ''))`)
	if len(attempts) != 2 || !strings.HasPrefix(attempts[0], "1 | retrying |") || !strings.Contains(attempts[0], "300ms, until") ||
		!strings.Contains(attempts[0], "503") || !strings.HasPrefix(attempts[1], "2 | succeeded |") {
		t.Errorf("fetch's attempts:\n%s\nwant a retried one (503, 300ms backoff) and a successful one", strings.Join(attempts, "\n"))
	}
	// The timeline beside the graph has the retry, in order.
	tl := browsertest.Eval[string](tab, `document.getElementById('timeline').innerText`)
	if i, j := strings.Index(tl, "fetch retrying"), strings.Index(tl, "fetch succeeded"); i < 0 || j < i || !strings.Contains(tl, "Execution completed") {
		t.Errorf("timeline lacks fetch's retry before its success, or the completion:\n%s", tl)
	}
	if ctx := tab.Text("#run-context"); !strings.Contains(ctx, `"pause"`) || !strings.Contains(ctx, `"trigger"`) {
		t.Errorf("fetch input context lacks the trigger and the wait's output:\n%s", ctx)
	}
	// The page refreshes the open panel once more a second after the
	// completion: Click finds a replaced link again.
	tab.Click("open the split's node", `[data-node="shape"]`)
	tab.Do("the split's runs", chromedp.WaitVisible(chromedp.CSS(`#panel table.runs a[data-panel]`)))
	tab.Click("open a split branch", `#panel table.runs a[data-panel]`)
	tab.Do("the branch's panel", chromedp.WaitVisible(chromedp.ID("run-output")))
	if out := tab.Text("#run-output"); !strings.Contains(out, `"double"`) {
		t.Errorf("branch output %q, want the set node's values", out)
	}

	// The list: the run is there, and a new execution appears live.
	tab.Do("open the list",
		chromedp.Navigate(tg.url+"/"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-id="`+execID+`"]`)))
	browsertest.Eval[any](tab, `window.__sameDocument = true`)
	newer := tg.mustAPI(t, 201, "POST", "/v1/workflows/orders/executions", `{"items":[5],"pause":0}`)
	newID := between(newer, `"id":"`, `"`)
	tab.Until("the new execution in the list, completed",
		`(r => r && r.textContent.includes('completed'))(document.querySelector('tr[data-id="`+newID+`"]'))`)
	if !browsertest.Eval[bool](tab, `window.__sameDocument === true`) {
		t.Fatal("the list reloaded; it must update live")
	}
	if shots != "" {
		screenshot(t, tab, filepath.Join(shots, "console-list.png"))
	}

	// Cancel a second execution from its page.
	second := tg.mustAPI(t, 201, "POST", "/v1/workflows/sleeper/executions", `{}`)
	secondID := between(second, `"id":"`, `"`)
	tab.Do("open the second execution", chromedp.Navigate(tg.url+"/executions/"+secondID))
	ready(tab)
	tab.Until("the second execution waiting", `document.querySelector('[data-node="nap"]').classList.contains('st-waiting')`)
	// Cancel asks first; "keep it running" keeps it running.
	tab.Click("cancel", "#cancel")
	tab.Do("the confirmation", chromedp.WaitVisible(chromedp.ID("cancel-yes")))
	tab.Click("keep it running", "#cancel-no")
	tab.Do("the confirmation gone", chromedp.WaitNotVisible(chromedp.ID("cancel-yes")))
	if st := tg.mustAPI(t, 200, "GET", "/v1/executions/"+secondID, ""); !strings.Contains(st, `"status":"waiting"`) {
		t.Fatalf("after declining the cancel the API shows %s", limit(st, 300))
	}
	tab.Click("cancel", "#cancel")
	tab.Click("confirm the cancel", "#cancel-yes")
	tab.Until("the second execution cancelled", `document.getElementById('status').textContent === 'cancelled'`)
	if out := tg.mustAPI(t, 200, "GET", "/v1/executions/"+secondID, ""); !strings.Contains(out, `"status":"cancelled"`) {
		t.Errorf("after cancel the API shows %s", limit(out, 300))
	}

	// Two editors: a version saved through the API after the page loaded
	// is not overwritten by the page's save (If-Match, 412); after a
	// reload the save stores the next version.
	tab.Do("open the workflow", chromedp.Navigate(tg.url+"/workflows/orders"))
	ready(tab)
	var cur struct {
		Version    int            `json:"version"`
		Definition map[string]any `json:"definition"`
	}
	if err := json.Unmarshal([]byte(tg.mustAPI(t, 200, "GET", "/v1/workflows/orders", "")), &cur); err != nil {
		t.Fatal(err)
	}
	cur.Definition["name"] = "edited through the API"
	other, _ := json.Marshal(cur.Definition)
	tg.mustAPI(t, 200, "PUT", "/v1/workflows/orders", string(other))
	rename := `(d => { const v = JSON.parse(d.value); v.name = "edited in the console"; d.value = JSON.stringify(v); })(document.getElementById('definition'))`
	browsertest.Eval[any](tab, rename)
	tab.Click("save over another editor's version", "#save")
	tab.Until("the stale save refused", `document.getElementById('save-error').textContent.includes('newer than If-Match')`)
	tab.Do("reload the workflow", chromedp.Navigate(tg.url+"/workflows/orders"))
	ready(tab)
	browsertest.Eval[any](tab, rename)
	tab.Click("save", "#save")
	tab.Do("the saved version's page", chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#workflow[data-version="%d"]`, cur.Version+2))))
	if loc := tab.Location(); !strings.HasSuffix(loc, fmt.Sprintf("/workflows/orders?version=%d", cur.Version+2)) {
		t.Errorf("after the save at %s, want the new version's page", loc)
	}

	// Nothing left the machine: every request went to this server.
	tab.CheckLocal(strings.TrimPrefix(tg.url, "http://"), 10)
}

// ready waits for the page's script to have bound its handlers: a click
// before that would do nothing.
func ready(tab *browsertest.Tab) {
	tab.Until("the page's script", `document.body.dataset.ready === "1"`)
}

func screenshot(t *testing.T, tab *browsertest.Tab, path string) {
	t.Helper()
	png := browsertest.Get(tab, "screenshot", chromedp.CaptureScreenshot())
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
}

func between(s, a, b string) string {
	_, rest, _ := strings.Cut(s, a)
	v, _, _ := strings.Cut(rest, b)
	return v
}

func limit(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
