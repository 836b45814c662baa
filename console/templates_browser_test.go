package console_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/rune-org/rune/internal/browsertest"
)

// TestBrowserTemplates (issue 36): the Templates page lists the message
// templates; one opens with its versions and sources; the preview pane
// renders the shown version with sample data through /ui/api, wrapped by
// its layout; another version previews its own text; bad sample data and a
// render error show their message. axe-core scans the page.
//
// Not parallel: browser tests share the browser's cookies.
func TestBrowserTemplates(t *testing.T) {
	tg := embeddedTarget(t)
	tg.mustAPI(t, 200, "PUT", "/v1/templates/base", `{"html":"<main>{{ content }}</main>","subject":"[Acme] {{ content }}"}`)
	tg.mustAPI(t, 200, "PUT", "/v1/templates/welcome", `{"subject":"Hi {{ $trigger.name }}","text":"first","layout":"base"}`)
	tg.mustAPI(t, 200, "PUT", "/v1/templates/welcome", `{"subject":"Hello {{ $trigger.name }}","html":"<p>v2 {{ $trigger.name | upcase }}</p>","layout":"base"}`)
	tab := browsertest.NewTab(t)
	tab.Media("light")
	tab.Login(tg.url, "/templates", tg.token)
	ready(tab)
	if rows := browsertest.Eval[[]string](tab, `[...document.querySelectorAll('#templates tr[data-template]')].map(r => r.dataset.template + "@" + r.cells[1].textContent)`); strings.Join(rows, " ") != "base@1 welcome@2" {
		t.Fatalf("templates list %v, want base@1 welcome@2", rows)
	}
	tab.Click("open welcome", `#templates tr[data-template="welcome"] a`)
	tab.Do("the template", chromedp.WaitVisible(chromedp.ID("template-preview")))
	ready(tab)
	if v := tab.Text("#template-versions"); !strings.Contains(v, "v2") || !strings.Contains(v, "v1") {
		t.Errorf("versions %q, want v2 and v1", v)
	}
	if src := tab.Text("#src-html"); src != "<p>v2 {{ $trigger.name | upcase }}</p>" {
		t.Errorf("html source %q", src)
	}
	tab.Axe("the template page")

	preview := func(data string) {
		t.Helper()
		tab.Do("sample data", chromedp.SetValue(chromedp.ID("preview-data"), data))
		browsertest.Eval[bool](tab, `document.getElementById("preview-out").hidden = true; document.getElementById("preview-error").textContent = ""; true`)
		tab.Click("preview", "#preview-run")
	}
	preview(`{"$trigger": {"name": "Ada"}}`)
	waitJS(t, tab, "the preview", `!document.getElementById("preview-out").hidden`)
	if s, h := tab.Text("#preview-subject"), tab.Text("#preview-html"); s != "[Acme] Hello Ada" || h != "<main><p>v2 ADA</p></main>" {
		t.Errorf("preview subject %q html %q", s, h)
	}
	if w := tab.Text("#preview-what"); !strings.Contains(w, "base@1") {
		t.Errorf("preview says %q, want the layout named", w)
	}
	tab.Axe("the preview")

	tab.Click("version 1", `#template-versions a`)
	tab.Do("version 1", chromedp.WaitVisible(chromedp.ID("src-text")))
	ready(tab)
	preview(`{"$trigger": {"name": "Bo"}}`)
	waitJS(t, tab, "the preview of version 1", `!document.getElementById("preview-out").hidden`)
	if s, x := tab.Text("#preview-subject"), tab.Text("#preview-text"); s != "[Acme] Hi Bo" || x != "first" {
		t.Errorf("version 1 preview subject %q text %q", s, x)
	}

	preview(`{not json`)
	waitJS(t, tab, "the JSON error", `document.getElementById("preview-error").textContent.includes("not JSON")`)
	preview(`{}`)
	waitJS(t, tab, "the render error", `document.getElementById("preview-error").textContent.includes("$trigger")`)
}
