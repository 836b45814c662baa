package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/rune-org/rune/internal/testinfra"
)

// The browser: Debian's chromium (RUNE_CHROMIUM overrides the path), one
// process for the whole test binary, a tab per test.
var browser struct {
	once   sync.Once
	ctx    context.Context
	cancel context.CancelFunc
	err    error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if browser.cancel != nil {
		browser.cancel()
	}
	os.Exit(code)
}

// newTab opens a browser tab, recording the URL of every request it
// makes. Without chromium the test skips, or fails under CI=true.
func newTab(t *testing.T) (context.Context, func() []string) {
	t.Helper()
	path := testinfra.Env("RUNE_CHROMIUM", "/usr/bin/chromium")
	if _, err := os.Stat(path); err != nil {
		testinfra.Unavailable(t, "chromium not found at %s: %v (.ci/run installs Debian's chromium)", path, err)
	}
	browser.once.Do(func() {
		dir, err := os.MkdirTemp("", "rune-console-chromium-")
		if err != nil {
			browser.err = err
			return
		}
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
			chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
			chromedp.Flag("disable-sync", true), chromedp.NoFirstRun, chromedp.UserDataDir(dir),
			chromedp.WindowSize(1400, 900))
		alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancelCtx := chromedp.NewContext(alloc)
		browser.err = chromedp.Do(ctx) // starts the browser, for the test binary's life
		browser.ctx = ctx
		browser.cancel = func() { cancelCtx(); cancelAlloc(); os.RemoveAll(dir) }
	})
	if browser.err != nil {
		t.Fatalf("start chromium: %v", browser.err)
	}
	tab, cancel := chromedp.NewContext(browser.ctx)
	t.Cleanup(cancel)
	var mu sync.Mutex
	var urls []string
	err := chromedp.Listen(tab, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok && e.Request != nil {
			mu.Lock()
			urls = append(urls, e.Request.URL)
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return tab, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), urls...) }
}

// do runs chromedp steps with a deadline sized for a loaded machine.
func do(t *testing.T, tab context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 90*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// get runs one chromedp action that returns a value.
func get[T any](t *testing.T, tab context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 90*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// until waits for a JavaScript condition on the page.
func until(t *testing.T, tab context.Context, what, cond string) {
	t.Helper()
	get(t, tab, what, chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingTimeout(60*time.Second)))
}

func text(t *testing.T, tab context.Context, sel string) string {
	t.Helper()
	return get(t, tab, "text of "+sel, chromedp.TextContent(chromedp.CSS(sel)))
}

func eval[T any](t *testing.T, tab context.Context, expr string) T {
	t.Helper()
	return get(t, tab, expr, chromedp.Evaluate[T](expr))
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
	tab, requests := newTab(t)
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
	do(t, tab, "log in",
		chromedp.Navigate(tg.url+"/workflows/orders"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), tg.token),
		chromedp.Click(chromedp.ID("login")),
		chromedp.WaitVisible(chromedp.ID("trigger")))
	if loc := get(t, tab, "location", chromedp.Location()); !strings.HasSuffix(loc, "/workflows/orders") {
		t.Fatalf("after login at %s, want the workflow page", loc)
	}
	cookies := get(t, tab, "cookies", func(ctx context.Context, _ *chromedp.Target) (network.GetCookiesResult, error) {
		return chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{})
	})
	if c := cookies.Cookies; len(c) != 1 || !c[0].HTTPOnly || c[0].SameSite != network.CookieSameSiteStrict {
		t.Fatalf("session cookies %+v, want one HttpOnly SameSite=Strict", c)
	}

	// Trigger from the workflow page with a JSON payload.
	do(t, tab, "trigger",
		chromedp.SetValue(chromedp.ID("trigger-input"), `{"items":`+items+`,"pause":`+pause+`}`),
		chromedp.Click(chromedp.ID("trigger")),
		chromedp.WaitVisible(chromedp.ID("execution"))) // the workflow page has a graph too
	loc := get(t, tab, "location", chromedp.Location())
	execID := loc[strings.LastIndex(loc, "/")+1:]
	if !strings.HasPrefix(execID, "exec_") {
		t.Fatalf("after trigger at %s, want an execution page", loc)
	}
	eval[any](t, tab, `window.__sameDocument = true`)
	// The wait shows as waiting, live.
	until(t, tab, "the wait waiting", `document.querySelector('[data-node="pause"]').classList.contains('st-waiting')`)
	if shots != "" {
		until(t, tab, "the split's progress", `document.querySelector('[data-node="each"] .progress').textContent.startsWith('12 / 12')`)
		screenshot(t, tab, filepath.Join(shots, "console-execution.png"))
	}
	// The graph reaches success without a reload.
	until(t, tab, "the run complete", `document.getElementById('status').textContent === 'completed' &&
		[...document.querySelectorAll('#graph .node')].every(n => n.classList.contains('st-success'))`)
	if !eval[bool](t, tab, `window.__sameDocument === true`) {
		t.Fatal("the execution page reloaded; it must update live")
	}
	if got, want := text(t, tab, `[data-node="each"] .progress`), "3 / 3"; shots == "" && got != want {
		t.Errorf("split progress %q, want %q", got, want)
	}

	// A node's output, attempts and input context; then a split branch.
	do(t, tab, "open the retried node",
		chromedp.Click(chromedp.CSS(`[data-node="fetch"]`)),
		chromedp.WaitVisible(chromedp.ID("run-output")))
	if out := text(t, tab, "#run-output"); !strings.Contains(out, "hello from the flaky service") {
		t.Errorf("fetch output %q, want the service's body", out)
	}
	if attempt := eval[string](t, tab, `[...document.querySelectorAll('#run dt')].find(d => d.textContent === 'Attempt').nextElementSibling.textContent`); attempt != "2" {
		t.Errorf("fetch panel shows attempt %q, want 2 (one retry)", attempt)
	}
	if ctx := text(t, tab, "#run-context"); !strings.Contains(ctx, `"pause"`) || !strings.Contains(ctx, `"trigger"`) {
		t.Errorf("fetch input context lacks the trigger and the wait's output:\n%s", ctx)
	}
	do(t, tab, "open a split branch",
		chromedp.Click(chromedp.CSS(`[data-node="shape"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#panel table.runs a[data-panel]`)),
		chromedp.Click(chromedp.CSS(`#panel table.runs a[data-panel]`)),
		chromedp.WaitVisible(chromedp.ID("run-output")))
	if out := text(t, tab, "#run-output"); !strings.Contains(out, `"double"`) {
		t.Errorf("branch output %q, want the set node's values", out)
	}

	// The list: the run is there, and a new execution appears live.
	do(t, tab, "open the list",
		chromedp.Navigate(tg.url+"/"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-id="`+execID+`"]`)))
	eval[any](t, tab, `window.__sameDocument = true`)
	newer := tg.mustAPI(t, 201, "POST", "/v1/workflows/orders/executions", `{"items":[5],"pause":0}`)
	newID := between(newer, `"id":"`, `"`)
	until(t, tab, "the new execution in the list, completed",
		`(r => r && r.textContent.includes('completed'))(document.querySelector('tr[data-id="`+newID+`"]'))`)
	if !eval[bool](t, tab, `window.__sameDocument === true`) {
		t.Fatal("the list reloaded; it must update live")
	}
	if shots != "" {
		screenshot(t, tab, filepath.Join(shots, "console-list.png"))
	}

	// Cancel a second execution from its page.
	second := tg.mustAPI(t, 201, "POST", "/v1/workflows/sleeper/executions", `{}`)
	secondID := between(second, `"id":"`, `"`)
	do(t, tab, "open the second execution", chromedp.Navigate(tg.url+"/executions/"+secondID))
	until(t, tab, "the second execution waiting", `document.querySelector('[data-node="nap"]').classList.contains('st-waiting')`)
	do(t, tab, "cancel", chromedp.Click(chromedp.ID("cancel")))
	until(t, tab, "the second execution cancelled", `document.getElementById('status').textContent === 'cancelled'`)
	if out := tg.mustAPI(t, 200, "GET", "/v1/executions/"+secondID, ""); !strings.Contains(out, `"status":"cancelled"`) {
		t.Errorf("after cancel the API shows %s", limit(out, 300))
	}

	// Nothing left the machine: every request went to this server.
	host := strings.TrimPrefix(tg.url, "http://")
	reqs := requests()
	if len(reqs) < 10 {
		t.Fatalf("recorded only %d requests: the network listener is not working", len(reqs))
	}
	for _, u := range reqs {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "data" && p.Host != host) {
			t.Errorf("request to another host: %s", u)
		}
	}
}

func screenshot(t *testing.T, tab context.Context, path string) {
	t.Helper()
	png := get(t, tab, "screenshot", chromedp.CaptureScreenshot())
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
