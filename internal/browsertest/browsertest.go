// Package browsertest drives Debian's headless chromium from tests through
// github.com/chromedp/chromedp (the web console's browser tests): one
// browser per test binary, a tab per test, every request the tab makes
// recorded so a test can check that none left the machine.
package browsertest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/rune-org/rune/internal/testinfra"
)

// Timeout bounds one step of a test, sized for a loaded machine.
const Timeout = 90 * time.Second

var browser struct {
	once   sync.Once
	ctx    context.Context
	cancel context.CancelFunc
	err    error
}

// Shutdown stops the browser, if one started; call it from TestMain after m.Run.
func Shutdown() {
	if browser.cancel != nil {
		browser.cancel()
	}
}

// Tab is one browser tab of a test.
type Tab struct {
	t   *testing.T
	ctx context.Context
	mu  sync.Mutex
	req []string
}

// NewTab opens a tab, starting the browser on first use: RUNE_CHROMIUM or
// /usr/bin/chromium, headless, without sandbox, GPU, background
// networking, component updates or sync, in a fresh user-data-dir. Without
// chromium the test skips, or fails under CI=true.
func NewTab(t *testing.T) *Tab {
	t.Helper()
	path := testinfra.Env("RUNE_CHROMIUM", "/usr/bin/chromium")
	if _, err := os.Stat(path); err != nil {
		testinfra.Unavailable(t, "chromium not found at %s: %v (.ci/run installs Debian's chromium)", path, err)
	}
	browser.once.Do(func() {
		dir, err := os.MkdirTemp("", "rune-chromium-")
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
	ctx, cancel := chromedp.NewContext(browser.ctx)
	t.Cleanup(cancel)
	tab := &Tab{t: t, ctx: ctx}
	err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok && e.Request != nil {
			tab.mu.Lock()
			tab.req = append(tab.req, e.Request.URL)
			tab.mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// Context is the tab's chromedp context.
func (b *Tab) Context() context.Context { return b.ctx }

// Requests returns the URL of every request the tab made so far.
func (b *Tab) Requests() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.req...)
}

// CheckLocal fails the test for every request the tab made to a host
// other than host (data: URLs aside), and when it saw fewer than min
// requests (the listener would not be working).
func (b *Tab) CheckLocal(host string, min int) {
	b.t.Helper()
	reqs := b.Requests()
	if len(reqs) < min {
		b.t.Fatalf("recorded only %d requests, want at least %d: the network listener is not working", len(reqs), min)
	}
	for _, u := range reqs {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "data" && p.Host != host) {
			b.t.Errorf("request to another host: %s", u)
		}
	}
}

// Do runs steps, failing the test on the first error.
func (b *Tab) Do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, Timeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// Click clicks the first element sel matches, as a user does: mouse events
// at its position.
func (b *Tab) Click(what, sel string) {
	b.t.Helper()
	b.fresh(what, func(ctx context.Context) error { return chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel))) })
}

// fresh runs step on the element it finds, finding it again while the step
// fails because the element left the document meanwhile (a live page
// re-renders a panel: a refresh replaced it), until Timeout.
func (b *Tab) fresh(what string, step func(ctx context.Context) error) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, Timeout)
	defer cancel()
	for {
		err := step(ctx)
		if err == nil {
			return
		}
		if ctx.Err() != nil || !staleNode(err) {
			b.t.Fatalf("%s: %v", what, err)
		}
	}
}

// staleNode reports whether err is the DevTools protocol's answer for a DOM
// node that left the document after it was found.
func staleNode(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "Could not find node with given id") ||
		strings.Contains(msg, "No node with given id found") ||
		strings.Contains(msg, "Node is detached from document")
}

// Get runs one action that returns a value.
func Get[T any](b *Tab, what string, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, Timeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
	return v
}

// Until waits for a JavaScript condition on the page.
// On a timeout the failure shows the page's address and text.
func (b *Tab) Until(what, cond string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, Timeout)
	defer cancel()
	// Polled on an interval, not chromedp's default of every animation
	// frame: a tab that is not in front (tests share one browser, a tab
	// each) gets no animation frames, and would never see cond hold.
	poll := chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingTimeout(Timeout-time.Second), chromedp.WithPollingInterval(50*time.Millisecond))
	if _, err := chromedp.Run(ctx, poll); err != nil {
		sctx, scancel := context.WithTimeout(b.ctx, 5*time.Second)
		defer scancel()
		page, _ := chromedp.Run(sctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText.slice(0, 3000)`))
		b.t.Fatalf("%s: %v; the page:\n%s", what, err, page)
	}
}

// Text is the text content of the first element sel matches (found again
// if a refresh replaced it meanwhile).
func (b *Tab) Text(sel string) string {
	b.t.Helper()
	var text string
	b.fresh("text of "+sel, func(ctx context.Context) error {
		var err error
		text, err = chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(sel)))
		return err
	})
	return text
}

// Eval evaluates a JavaScript expression.
func Eval[T any](b *Tab, expr string) T {
	b.t.Helper()
	return Get(b, expr, chromedp.Evaluate[T](expr))
}

// Location is the tab's URL.
func (b *Tab) Location() string {
	b.t.Helper()
	return Get(b, "location", chromedp.Location())
}

// Login logs in to the console at base through its form with token.
func (b *Tab) Login(base, path, token string) {
	b.t.Helper()
	b.Do("log in",
		chromedp.Navigate(base+path),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Click(chromedp.ID("login")),
		chromedp.WaitNotPresent(chromedp.ID("token")))
}

// Media emulates the prefers-color-scheme media feature ("light", "dark";
// "" for the system's).
func (b *Tab) Media(scheme string) {
	b.t.Helper()
	var f []*emulation.MediaFeature
	if scheme != "" {
		f = []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}
	}
	Get(b, "emulate prefers-color-scheme "+scheme, func(ctx context.Context, _ *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Features: f})
		return chromedp.Void{}, err
	})
}

// Timezone makes the tab's local time zone id (an IANA name; "" for the
// machine's).
func (b *Tab) Timezone(id string) {
	b.t.Helper()
	Get(b, "emulate time zone "+id, func(ctx context.Context, _ *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Call(ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: id})
		return chromedp.Void{}, err
	})
}

// Viewport sets the tab's viewport width and height in CSS pixels.
func (b *Tab) Viewport(w, h int64) {
	b.t.Helper()
	b.Do(fmt.Sprintf("viewport %dx%d", w, h), chromedp.EmulateViewport(w, h))
}

// axe is axe-core's script (https://github.com/dequelabs/axe-core), read
// once from RUNE_AXE_CORE (its axe.min.js; .ci/run installs a pinned
// version from npm).
var axe struct {
	once sync.Once
	src  string
	err  error
}

// AxeViolation is one rule axe-core found broken, with the first few
// elements that break it.
type AxeViolation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

// Axe scans the tab's page with axe-core (WCAG 2 A and AA rules and best
// practices) and fails the test for every serious or critical violation,
// naming page. Without RUNE_AXE_CORE the scan is skipped with a log line,
// or fails under CI=true.
func (b *Tab) Axe(page string) {
	b.t.Helper()
	axe.once.Do(func() {
		path := os.Getenv("RUNE_AXE_CORE")
		if path == "" {
			axe.err = fmt.Errorf("RUNE_AXE_CORE is not set (the path of axe-core's axe.min.js; .ci/run installs it)")
			return
		}
		src, err := os.ReadFile(path)
		axe.src, axe.err = string(src), err
	})
	if axe.err != nil {
		if os.Getenv("CI") == "true" {
			b.t.Fatalf("accessibility scan of %s: %v", page, axe.err)
		}
		b.t.Logf("accessibility scan of %s skipped: %v", page, axe.err)
		return
	}
	// Evaluated through DevTools, the script is not subject to the page's
	// Content-Security-Policy (no inline script), as a page's own would be.
	if !Eval[bool](b, `typeof axe !== "undefined"`) {
		Get(b, "load axe-core", chromedp.Evaluate[chromedp.Void](axe.src+";undefined"))
	}
	vs := Get(b, "axe-core on "+page, chromedp.Evaluate[[]AxeViolation](`axe.run(document, {resultTypes: ["violations"]}).then(r =>
  r.violations.filter(v => v.impact === "serious" || v.impact === "critical").map(v => ({id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.slice(0, 5).map(n => n.target.join(" ") + ": " + (n.failureSummary || "").replace(/\s+/g, " "))})))`, chromedp.EvalAwaitPromise))
	for _, v := range vs {
		b.t.Errorf("accessibility (axe-core) on %s: %s %s: %s\n  %s", page, v.Impact, v.ID, v.Help, strings.Join(v.Nodes, "\n  "))
	}
}
