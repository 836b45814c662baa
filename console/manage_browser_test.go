package console_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rune-org/rune/internal/browsertest"
)

const greetDef = `{"id":"greet","nodes":[{"id":"start","type":"trigger","trigger":true},
 {"id":"hello","type":"set","parameters":{"values":{"msg":"hi"}}}],"edges":[{"id":"e1","src":"start","dst":"hello"}]}`

// TestBrowserManage (issue 38): the list filtered by an input value and by
// trigger; two enqueued executions selected and cancelled, a finished one
// re-run, each after a confirmation; a hook created (its URL shown once),
// delivered to and listed with its execution, disabled, and a delivery
// to it then refused listed with its status and code; a schedule made
// from a cron whose next 5 fire times show as it is typed, with the
// catch-up policy, then paused; a credential whose value is never shown
// again, with its allowed hosts; a token created, and a viewer who logs in
// with it sees no control it may not use. axe-core scans every new page.
//
// Not parallel: browser tests share the browser's cookies.
func TestBrowserManage(t *testing.T) {
	tg := embeddedTarget(t)
	tg.mustAPI(t, 201, "POST", "/v1/workflows", greetDef)
	trigger := func(input, query string) string {
		return between(tg.mustAPI(t, 201, "POST", "/v1/workflows/greet/executions"+query, input), `"id":"`, `"`)
	}
	later := "?start_at=" + time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	done42 := trigger(`{"user_id":42}`, "")
	done7 := trigger(`{"user_id":7}`, "")
	wait1, wait2 := trigger(`{"user_id":42,"n":1}`, later), trigger(`{"user_id":42,"n":2}`, later)
	waitFor(t, "the first two complete", func() bool {
		_, a := tg.api(t, "GET", "/v1/executions/"+done42, "")
		_, b := tg.api(t, "GET", "/v1/executions/"+done7, "")
		return strings.Contains(a, `"status":"completed"`) && strings.Contains(b, `"status":"completed"`)
	})
	tab := browsertest.NewTab(t)
	tab.Media("light")
	tab.Login(tg.url, "/executions", tg.token)
	ready(tab)

	// Filter by an input value: the three with user_id 42, not 7.
	tab.Do("filter by input", chromedp.SetValue(chromedp.ID("where"), "$trigger.user_id = 42"), chromedp.Submit(chromedp.ID("where")))
	waitJS(t, tab, "the filtered list", `location.search.includes('where=') && document.querySelectorAll('#rows tr[data-id]').length === 3`)
	rows := browsertest.Eval[[]string](tab, `[...document.querySelectorAll('#rows tr[data-id]')].map(r => r.dataset.id)`)
	if strings.Join(rows, " ") != strings.Join([]string{wait2, wait1, done42}, " ") {
		t.Errorf("user_id = 42: rows %v, want %v", rows, []string{wait2, wait1, done42})
	}
	tab.Axe("the filtered executions list")
	tab.Click("select one for the picture", `#rows input[value="`+wait1+`"]`)
	shot(t, tab, "console-search.png")
	tab.Click("unselect it", `#rows input[value="`+wait1+`"]`)
	tab.Do("filter by trigger and input", chromedp.Navigate(tg.url+"/executions?trigger=api&where=input.user_id+%3D+7"))
	waitJS(t, tab, "one row", `document.querySelectorAll('#rows tr[data-id]').length === 1 && document.querySelector('#rows tr[data-id]').dataset.id === '`+done7+`'`)

	// Cancel the two enqueued ones: selected, confirmed, done.
	tab.Do("back to 42", chromedp.Navigate(tg.url+"/executions?where=user_id+%3D+42"))
	ready(tab)
	tab.Click("select the first waiting one", `#rows input[value="`+wait1+`"]`)
	tab.Click("select the second", `#rows input[value="`+wait2+`"]`)
	if n := tab.Text("#bulk-count"); n != "2 selected:" {
		t.Errorf("selection count %q", n)
	}
	tab.Click("cancel selected", "#bulk-cancel")
	tab.Do("the confirmation", chromedp.WaitVisible(chromedp.ID("bulk-confirm")))
	if n := browsertest.Eval[int](tab, `document.querySelectorAll('#bulk-confirm input[name=id]').length`); n != 2 {
		t.Errorf("the confirmation lists %d executions, want 2", n)
	}
	tab.Axe("the bulk confirmation")
	tab.Click("confirm", "#bulk-yes")
	tab.Do("the results", chromedp.WaitVisible(chromedp.ID("bulk-results")))
	if h := tab.Text("h1"); h != "Cancelled 2 of 2" {
		t.Errorf("bulk cancel: %q", h)
	}
	for _, id := range []string{wait1, wait2} {
		if _, out := tg.api(t, "GET", "/v1/executions/"+id, ""); !strings.Contains(out, `"status":"cancelled"`) {
			t.Errorf("%s after the bulk cancel: %s", id, out)
		}
	}
	// Re-run the finished one: a new execution, same input, from the start.
	tab.Do("the list", chromedp.Navigate(tg.url+"/executions?where=user_id+%3D+42&status=completed"))
	ready(tab)
	tab.Click("select the finished one", `#rows input[value="`+done42+`"]`)
	tab.Click("re-run selected", "#bulk-rerun")
	tab.Do("the confirmation", chromedp.WaitVisible(chromedp.ID("bulk-confirm")))
	tab.Click("confirm", "#bulk-yes")
	tab.Do("the results", chromedp.WaitVisible(chromedp.ID("bulk-results")))
	rerun := browsertest.Eval[string](tab, `(a => a ? a.textContent : '')(document.querySelectorAll('#bulk-results a')[1])`)
	if _, out := tg.api(t, "GET", "/v1/executions/"+rerun, ""); rerun == "" || !strings.Contains(out, `"trigger":"rerun:`+done42+`"`) || !strings.Contains(out, `"user_id":42`) {
		t.Errorf("the re-run %q: %s", rerun, out)
	}

	// Hooks: create, deliver, see the delivery, disable.
	tab.Do("hooks", chromedp.Navigate(tg.url+"/hooks"), chromedp.WaitVisible(chromedp.ID("hook-create")))
	tab.Do("create a hook", chromedp.SetValue(chromedp.ID("hook-name"), "incoming"), chromedp.Submit(chromedp.ID("hook-name")))
	tab.Do("its URL", chromedp.WaitVisible(chromedp.ID("hook-url")))
	hookURL := browsertest.Eval[string](tab, `document.getElementById('hook-url').value`)
	if !strings.HasPrefix(hookURL, "http") {
		hookURL = tg.url + hookURL
	}
	tab.Axe("the hooks page, a URL shown")
	shot(t, tab, "console-hooks.png")
	res, err := http.Post(hookURL, "application/json", strings.NewReader(`{"user_id":99}`))
	if err != nil || res.StatusCode >= 300 {
		t.Fatalf("delivery to the new hook: %v %v", res, err)
	}
	res.Body.Close()
	tab.Do("hooks again", chromedp.Navigate(tg.url+"/hooks"))
	waitJS(t, tab, "the delivery listed", `document.querySelectorAll('#hooks tr[data-hook] .delivery a').length === 1`)
	if strings.Contains(browsertest.Eval[string](tab, `document.documentElement.outerHTML`), strings.TrimPrefix(hookURL, tg.url)) {
		t.Error("the hooks page shows the hook's URL again")
	}
	tab.Click("disable it", `#hooks button[value="disable"]`)
	tab.Do("disabled", chromedp.WaitVisible(`#hooks button[value="enable"]`))
	if row := tab.Text("#hooks tr[data-hook]"); !strings.Contains(row, "disabled") {
		t.Errorf("hook row after disabling: %q", row)
	}
	if res, err := http.Post(hookURL, "application/json", strings.NewReader(`{}`)); err != nil || res.StatusCode < 400 {
		t.Errorf("a disabled hook accepted a delivery: %v %v", res, err)
	} else {
		res.Body.Close()
	}
	// The refused delivery is listed with its answer above the accepted
	// one, whose execution it links to (hook_deliveries.go).
	tab.Do("hooks after a refusal", chromedp.Navigate(tg.url+"/hooks"))
	waitJS(t, tab, "the refused delivery listed", `(() => { const d = document.querySelectorAll('#hooks tr[data-hook] .delivery');
		return d.length === 2 && d[0].dataset.status === '404' && d[0].textContent.includes('not_found') && !d[0].querySelector('a') &&
			d[1].dataset.status === '202' && d[1].querySelector('a[href^="/executions/exec_"]') !== null })()`)
	tab.Axe("the hooks page, a refused delivery listed")

	// Schedules: the cron's next 5 fire times as it is typed.
	tab.Do("schedules", chromedp.Navigate(tg.url+"/schedules"), chromedp.WaitVisible(chromedp.ID("schedule-create")))
	ready(tab)
	tab.Do("type a cron", chromedp.SendKeys(chromedp.ID("cron"), "*/5 * * * *"))
	waitJS(t, tab, "5 fire times", `document.querySelectorAll('#cron-times li').length === 5 && document.getElementById('cron-preview').dataset.cron === '*/5 * * * *'`)
	tab.Axe("the schedules page, a cron previewed")
	shot(t, tab, "console-schedules.png")
	browsertest.Eval[any](tab, `document.getElementById('cron').value = ''`)
	tab.Do("a bad cron", chromedp.SendKeys(chromedp.ID("cron"), "nope"))
	waitJS(t, tab, "its error", `!!document.getElementById('cron-error') && document.getElementById('cron-error').textContent.includes('cron')`)
	tab.Do("fill the schedule", chromedp.SetValue(chromedp.ID("cron"), "*/5 * * * *"), chromedp.SetValue(chromedp.ID("sched-name"), "every5"),
		chromedp.SetValue(chromedp.ID("policy"), "catch_up"), chromedp.SetValue(chromedp.ID("catch-up-max"), "3"))
	tab.Click("create it", `#schedule-create button[value="create"]`)
	tab.Do("listed", chromedp.WaitVisible(`#schedules tr[data-schedule]`))
	if n := browsertest.Eval[int](tab, `document.querySelectorAll('#schedules tr[data-schedule] time').length`); n != 5 {
		t.Errorf("the schedule's row shows %d next fire times, want 5", n)
	}
	if row := tab.Text("#schedules tr[data-schedule]"); !strings.Contains(row, "catch up (at most 3)") || !strings.Contains(row, "*/5 * * * *") {
		t.Errorf("schedule row %q", row)
	}
	tab.Click("pause it", `#schedules button[value="pause"]`)
	tab.Do("paused", chromedp.WaitVisible(`#schedules button[value="resume"]`))
	if row := tab.Text("#schedules tr[data-schedule]"); !strings.Contains(row, "paused") {
		t.Errorf("schedule row after pausing: %q", row)
	}
	tab.Axe("the schedules page")

	// Credentials: the value goes in and never comes back.
	const secret = "s3cret-never-rendered-38"
	tab.Do("credentials", chromedp.Navigate(tg.url+"/credentials"), chromedp.WaitVisible(chromedp.ID("credential-put")))
	tab.Do("fill a credential", chromedp.SetValue(chromedp.ID("cred-name"), "github"), chromedp.SetValue(chromedp.ID("cred-type"), "bearer"),
		chromedp.SetValue(chromedp.ID("cred-value"), secret), chromedp.SetValue(chromedp.ID("cred-hosts"), "api.github.com"))
	tab.Do("save", chromedp.Submit(chromedp.ID("cred-name")))
	tab.Do("listed", chromedp.WaitVisible(`#credentials tr[data-credential="github"]`))
	if row := tab.Text(`#credentials tr[data-credential="github"]`); !strings.Contains(row, "bearer") || !strings.Contains(row, "api.github.com") {
		t.Errorf("credential row %q", row)
	}
	if html := browsertest.Eval[string](tab, `document.documentElement.outerHTML`); strings.Contains(html, secret) {
		t.Error("the credentials page shows the value")
	}
	tab.Axe("the credentials page")

	// Tokens: a viewer's, shown once; the viewer sees no controls.
	tab.Do("tokens", chromedp.Navigate(tg.url+"/tokens"), chromedp.WaitVisible(chromedp.ID("token-create")))
	tab.Do("fill a token", chromedp.SetValue(chromedp.ID("token-name"), "watcher"), chromedp.SetValue(chromedp.ID("token-role"), "viewer"))
	tab.Do("create", chromedp.Submit(chromedp.ID("token-name")))
	tab.Do("the token", chromedp.WaitVisible(chromedp.ID("new-token")))
	viewer := browsertest.Eval[string](tab, `document.getElementById('new-token').value`)
	if !strings.Contains(tab.Text(`#tokens tr[data-token="watcher"]`), "viewer") {
		t.Error("the new token is not listed as a viewer's")
	}
	tab.Axe("the tokens page, a token shown")
	// The logout's navigation ends on the login page before the next one
	// starts (else the login's navigation aborts it, or it the login's).
	tab.Do("log out", chromedp.Submit(`form.logout`), chromedp.WaitVisible(chromedp.ID("token")))
	waitJS(t, tab, "the login page", `location.pathname === '/login' && document.readyState === 'complete'`)
	tab.Login(tg.url, "/hooks", viewer)
	tab.Do("hooks as a viewer", chromedp.WaitVisible(chromedp.ID("hooks")))
	if n := browsertest.Eval[int](tab, `document.querySelectorAll('main form, main button').length`); n != 0 {
		t.Errorf("a viewer sees %d forms or buttons on the hooks page", n)
	}
	if nav := tab.Text("nav"); strings.Contains(nav, "Credentials") || strings.Contains(nav, "Tokens") {
		t.Errorf("a viewer's nav: %q", nav)
	}
	for _, p := range []string{"/schedules", "/executions", "/credentials", "/tokens"} {
		tab.Do("open "+p, chromedp.Navigate(tg.url+p), chromedp.WaitVisible(chromedp.CSS("main")))
		if n := browsertest.Eval[int](tab, `document.querySelectorAll('main form, main button, #bulk').length`); n != (map[string]int{"/executions": 2})[p] {
			t.Errorf("a viewer sees %d forms or buttons on %s", n, p)
		}
		tab.Axe(p + " as a viewer")
	}
	tab.CheckLocal(strings.TrimPrefix(tg.url, "http://"), 10)
}

// waitJS polls cond in the tab for up to 30 s, through the navigation a
// form's submit starts (an evaluation during it errs: tried again).
func waitJS(t *testing.T, tab *browsertest.Tab, what, cond string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, err := chromedp.Run(tab.Context(), chromedp.Evaluate[bool](cond))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30 s (%v); the page:\n%s", what, err, browsertest.Eval[string](tab, `document.body.innerText`))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
