package console_test

import (
	"context"
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/rune-org/rune/internal/browsertest"
)

// The editor's browser tests are not parallel (as TestBrowserFailuresAndManners):
// they run before the parallel tests start, each tab in front.

// editorReady waits for the editor's script to have read the schemas,
// drawn the definition and had the server check it.
func editorReady(tab *browsertest.Tab) {
	tab.Do("the editor ready", chromedp.WaitVisible(chromedp.CSS(`#editor[data-ready="1"]`)))
}

// typeInto focuses the field sel and types text, as a user does.
func typeInto(tab *browsertest.Tab, what, sel, text string) {
	tab.Do(what, chromedp.Focus(chromedp.CSS(sel)), chromedp.SendKeys(chromedp.CSS(sel), text))
}

// edgesOf is the definition's edges as "src>dst", from the JSON the editor
// would save.
func edgesOf(t *testing.T, tab *browsertest.Tab) []string {
	t.Helper()
	var def struct {
		Edges []struct{ Src, Dst string } `json:"edges"`
	}
	text := browsertest.Eval[string](tab, `(() => { const b = document.getElementById('ed-view'); b.click(); const v = document.getElementById('ed-json').value; b.click(); return v; })()`)
	if err := json.Unmarshal([]byte(text), &def); err != nil {
		t.Fatalf("the editor's JSON %q: %v", text, err)
	}
	var out []string
	for _, e := range def.Edges {
		out = append(out, e.Src+">"+e.Dst)
	}
	sort.Strings(out)
	return out
}

// TestBrowserEditorBuildAndRun builds a three-node workflow on the canvas
// from scratch (palette, connect, delete and re-draw an edge, parameters in
// the forms generated from the OpenAPI document, the server's problems on
// the graph as it is edited, auto-layout), saves it, triggers it and sees
// it run to completion; then the completion offers the paths its run
// produced. axe-core finds no serious violation on the editor.
func TestBrowserEditorBuildAndRun(t *testing.T) {
	tg := embeddedTarget(t)
	tab := browsertest.NewTab(t)
	tab.Media("light")
	tab.Login(tg.url, "/workflows", tg.token)
	tab.Click("new workflow", "#new-workflow")
	editorReady(tab)
	if loc := tab.Location(); !strings.HasSuffix(loc, "/editor") {
		t.Fatalf("the workflows page's link led to %s, want /editor", loc)
	}

	// The palette is the API's node types, as its OpenAPI document has them.
	var doc struct {
		Components struct {
			Schemas struct {
				Node struct {
					Discriminator struct {
						Mapping map[string]string `json:"mapping"`
					} `json:"discriminator"`
				} `json:"Node"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal([]byte(tg.mustAPI(t, 200, "GET", "/v1/openapi.json", "")), &doc); err != nil {
		t.Fatal(err)
	}
	var want []string
	for k := range doc.Components.Schemas.Node.Discriminator.Mapping {
		want = append(want, k)
	}
	got := browsertest.Eval[[]string](tab, `[...document.querySelectorAll('#ed-types button')].map(b => b.dataset.type)`)
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) || len(got) < 5 {
		t.Fatalf("palette %v, want the OpenAPI node types %v", got, want)
	}
	tab.Axe("the editor, empty")

	// The workflow's id in its form; then three nodes from the palette, each
	// added after (and connected to) the selected one.
	typeInto(tab, "the workflow id", `#ed-form [data-field="id"] input`, "greet")
	tab.Click("add a trigger", `#ed-types [data-type="trigger"]`)
	tab.Click("add a set", `#ed-types [data-type="set"]`)
	tab.Click("add a log", `#ed-types [data-type="log"]`)
	if got := edgesOf(t, tab); !slices.Equal(got, []string{"set_1>log_1", "start>set_1"}) {
		t.Fatalf("edges %v after adding three nodes", got)
	}
	// The server's problems show on the graph: set without values, log
	// without a message.
	tab.Until("the problems on the graph", `document.querySelector('[data-node="set_1"]').classList.contains('ed-bad') &&
		document.querySelector('[data-node="log_1"]').classList.contains('ed-bad') && Number(document.getElementById('editor').dataset.problems) >= 2`)
	if txt := tab.Text("#ed-problems"); !strings.Contains(txt, "set_1") || !strings.Contains(txt, "values") {
		t.Errorf("problems list %q, want set_1's missing values", txt)
	}

	// Parameters, in the forms the schemas generate.
	tab.Click("select set_1", `[data-select="set_1"]`)
	typeInto(tab, "set_1's values", `#ed-params [data-field="values"] textarea`, `{"greeting": "hello {{ $trigger.name }}"}`)
	tab.Until("set_1 valid", `!document.querySelector('[data-node="set_1"]').classList.contains('ed-bad')`)
	tab.Click("select log_1", `[data-select="log_1"]`)
	// The completion offers node names: "$set_" completes to $set_1.
	typeInto(tab, "log_1's message", `#ed-params [data-field="message"] input`, "{{ $set_")
	tab.Until("the completion of $set_", `!document.getElementById('ed-complete').hidden && document.getElementById('ed-complete').textContent.includes('$set_1')`)
	tab.Do("accept the completion", chromedp.KeyEvent(kb.Enter))
	typeInto(tab, "the rest of the message", `#ed-params [data-field="message"] input`, ".greeting }}")
	if v := browsertest.Eval[string](tab, `document.querySelector('#ed-params [data-field="message"] input').value`); v != "{{ $set_1.greeting }}" {
		t.Errorf("message %q after the completion", v)
	}
	tab.Until("no problems left", `document.getElementById('editor').dataset.problems === "0" && !document.querySelector('.ed-bad')`)

	// Delete an edge, then draw it again from set_1's port to log_1.
	tab.Click("delete log_1's edge", `[data-delete-edge="e2"]`)
	if got := edgesOf(t, tab); !slices.Equal(got, []string{"start>set_1"}) {
		t.Fatalf("edges %v after deleting e2", got)
	}
	tab.Click("set_1's port", `[data-port="set_1"]`)
	tab.Click("connect to log_1", `[data-select="log_1"]`)
	if got := edgesOf(t, tab); !slices.Equal(got, []string{"set_1>log_1", "start>set_1"}) {
		t.Fatalf("edges %v after connecting set_1 to log_1", got)
	}
	// Auto-layout puts the chain left to right.
	browsertest.Eval[any](tab, `document.querySelector('[data-node="log_1"]').style.left = "0px"`)
	tab.Click("auto-layout", "#ed-layout")
	xs := browsertest.Eval[[]float64](tab, `["start","set_1","log_1"].map(id => document.querySelector('[data-node="'+id+'"]').offsetLeft)`)
	if !(xs[0] < xs[1] && xs[1] < xs[2]) {
		t.Errorf("after auto-layout the nodes' x are %v, want left to right", xs)
	}
	tab.Axe("the editor with a node selected")
	shot(t, tab, "console-editor.png")

	// Save; the workflow's page has version 1; trigger it and watch it run.
	tab.Click("save", "#ed-save")
	tab.Do("the save dialog", chromedp.WaitVisible(chromedp.ID("ed-confirm")))
	tab.Axe("the editor's save dialog")
	tab.Click("confirm", "#ed-confirm")
	tab.Do("the saved workflow's page", chromedp.WaitVisible(chromedp.CSS(`#workflow[data-id="greet"][data-version="1"]`)))
	ready(tab)
	tab.Do("trigger", chromedp.SetValue(chromedp.ID("trigger-input"), `{"name":"Ada"}`), chromedp.Click(chromedp.ID("trigger")),
		chromedp.WaitVisible(chromedp.ID("execution")))
	tab.Until("the run complete", `document.getElementById('status').textContent === 'completed' &&
		[...document.querySelectorAll('#graph .node')].length === 3 && [...document.querySelectorAll('#graph .node')].every(n => n.classList.contains('st-success'))`)
	tab.Click("open set_1", `[data-node="set_1"]`)
	tab.Do("set_1's panel", chromedp.WaitVisible(chromedp.ID("run-output")))
	if out := tab.Text("#run-output"); !strings.Contains(out, "hello Ada") {
		t.Errorf("set_1's output %q, want the greeting", out)
	}

	// Editing it again: the completion has the paths of that run.
	tab.Do("the editor of greet", chromedp.Navigate(tg.url+"/workflows/greet"))
	tab.Click("open in the editor", "#edit-workflow")
	editorReady(tab)
	tab.Until("the recent paths", `Number(document.getElementById('editor').dataset.paths) > 0`)
	tab.Click("select log_1", `[data-select="log_1"]`)
	browsertest.Eval[any](tab, clearMessage)
	typeInto(tab, "a path", `#ed-params [data-field="message"] input`, "{{ $set_1.gr")
	tab.Until("$set_1.greeting offered", `[...document.querySelectorAll('#ed-complete li')].some(l => l.textContent === '$set_1.greeting')`)
	browsertest.Eval[any](tab, clearMessage)
	typeInto(tab, "a trigger path", `#ed-params [data-field="message"] input`, "{{ $trigger.n")
	tab.Until("$trigger.name offered", `[...document.querySelectorAll('#ed-complete li')].some(l => l.textContent === '$trigger.name')`)
	tab.Media("dark")
	tab.Axe("the editor of a stored workflow, dark")
	shot(t, tab, "console-editor-dark.png")
	// 360 px wide: one column, nothing wider than the screen (the canvas
	// scrolls in its own box).
	tab.Viewport(360, 740)
	tab.Do("the editor at 360 px", chromedp.Navigate(tg.url+"/editor/greet"))
	editorReady(tab)
	if w := browsertest.Eval[int](tab, `document.documentElement.scrollWidth`); w > 360 {
		t.Errorf("at 360 px the editor is %d px wide", w)
	}
	tab.CheckLocal(strings.TrimPrefix(tg.url, "http://"), 5)
}

// clearMessage empties the selected log node's message field.
const clearMessage = `(i => { i.value = ""; i.dispatchEvent(new Event("input")); i.focus(); })(document.querySelector('#ed-params [data-field="message"] input'))`

// roundTripDef is stored as written: keys in an unusual order, odd spacing.
const roundTripDef = "{\"name\": \"Round trip\",   \"id\":\"roundtrip\",\n\"nodes\":[{\"type\":\"trigger\",\"id\":\"start\",\"trigger\":true},\n  {\"parameters\":{\"message\":\"n = {{ $trigger.n }}\",\"level\":\"info\"},\"type\":\"log\",\"id\":\"say\"}],\n\t\"edges\":[{\"dst\":\"say\",\"src\":\"start\",\"id\":\"e1\"}]}\n"

// TestBrowserEditorRoundTrip: a stored definition shows in the JSON view
// byte for byte, survives switching views, and saving it unchanged stores
// no version; an edit on the canvas keeps the keys' order, shows its diff
// and stores the next version. The editor's load time is measured.
func TestBrowserEditorRoundTrip(t *testing.T) {
	tg := embeddedTarget(t)
	tg.mustAPI(t, 201, "POST", "/v1/workflows", roundTripDef)
	tab := browsertest.NewTab(t)
	tab.Media("light")
	tab.Login(tg.url, "/editor/roundtrip", tg.token)
	editorReady(tab)
	jsonText := func() string {
		return browsertest.Eval[string](tab, `document.getElementById('ed-json').value`)
	}
	if got := jsonText(); got != roundTripDef {
		t.Fatalf("JSON view on load:\n%q\nwant the stored text\n%q", got, roundTripDef)
	}
	for i := range 2 {
		tab.Click("the JSON view", "#ed-view")
		tab.Until("the JSON view shown", `document.getElementById('editor').dataset.view === "json"`)
		if got := jsonText(); got != roundTripDef {
			t.Fatalf("JSON view after switching (%d):\n%q\nwant\n%q", i, got, roundTripDef)
		}
		if i == 0 {
			tab.Axe("the editor's JSON view")
		}
		tab.Click("the canvas", "#ed-view")
		tab.Until("the canvas shown", `document.getElementById('editor').dataset.view === "canvas"`)
	}
	tab.Click("save unchanged", "#ed-save")
	tab.Until("nothing to save", `document.getElementById('ed-status').textContent.startsWith('No changes')`)
	if out := tg.mustAPI(t, 200, "GET", "/v1/workflows/roundtrip", ""); !strings.Contains(out, `"version":1`) {
		t.Fatalf("after an unchanged save the API shows %s", limit(out, 300))
	}
	if v1, err := tg.store.GetWorkflow(context.Background(), "roundtrip", 0); err != nil || string(v1.Definition) != roundTripDef {
		t.Errorf("after an unchanged save the stored definition is %v (%v), want the text as pushed", v1, err)
	}

	// An edit on the canvas: the order of keys stays, the diff shows it.
	tab.Click("select say", `[data-select="say"]`)
	tab.Do("level warn", chromedp.SetValue(chromedp.CSS(`#ed-params [data-field="level"] select`), "warn"))
	browsertest.Eval[any](tab, `document.querySelector('#ed-params [data-field="level"] select').dispatchEvent(new Event('change'))`)
	tab.Click("save", "#ed-save")
	tab.Do("the diff", chromedp.WaitVisible(chromedp.ID("ed-diff")))
	diff := tab.Text("#ed-diff")
	if !strings.Contains(diff, `-         "level": "info"`) || !strings.Contains(diff, `+         "level": "warn"`) || strings.Contains(diff, `"message"`) && !strings.Contains(diff, `  `) {
		t.Errorf("diff against version 1:\n%s", diff)
	}
	if h := tab.Text("#ed-dialog-h"); h != "Save version 2 of roundtrip" {
		t.Errorf("dialog heading %q", h)
	}
	tab.Click("confirm", "#ed-confirm")
	tab.Do("version 2's page", chromedp.WaitVisible(chromedp.CSS(`#workflow[data-version="2"]`)))
	v2, err := tg.store.GetWorkflow(context.Background(), "roundtrip", 0)
	if err != nil || v2.Version != 2 {
		t.Fatalf("after the save: %v, %v", v2, err)
	}
	s := string(v2.Definition)
	if !(strings.Index(s, `"name"`) < strings.Index(s, `"id"`) && strings.Index(s, `"parameters"`) < strings.Index(s, `"type": "log"`) &&
		strings.Index(s, `"message"`) < strings.Index(s, `"level": "warn"`) && strings.Index(s, `"dst"`) < strings.Index(s, `"src"`)) {
		t.Errorf("version 2 lost the keys' order:\n%s", s)
	}

	// The JSON view edits the graph: a node added as text shows on the canvas.
	tab.Do("the editor again", chromedp.Navigate(tg.url+"/editor/roundtrip"))
	editorReady(tab)
	tab.Click("the JSON view", "#ed-view")
	browsertest.Eval[any](tab, `(t => { const v = JSON.parse(t.value); v.nodes.push({id: "more", type: "log", parameters: {message: "more"}}); v.edges.push({id: "e2", src: "say", dst: "more"}); t.value = JSON.stringify(v, null, 2); t.dispatchEvent(new Event('input')); })(document.getElementById('ed-json'))`)
	tab.Click("the canvas", "#ed-view")
	tab.Until("the node from the JSON on the canvas", `!!document.querySelector('[data-node="more"]')`)
	// The keyboard: Tab to a node, Enter selects it, Delete removes it and its edge.
	browsertest.Eval[any](tab, `document.querySelector('[data-select="more"]').focus()`)
	tab.Do("Enter on more", chromedp.KeyEvent(kb.Enter))
	tab.Until("more selected", `document.getElementById('ed-form-h').textContent === "Node more"`)
	browsertest.Eval[any](tab, `document.querySelector('[data-select="more"]').focus()`)
	tab.Do("Delete", chromedp.KeyEvent(kb.Delete))
	tab.Until("more deleted", `!document.querySelector('[data-node="more"]')`)
	if got := edgesOf(t, tab); !slices.Equal(got, []string{"start>say"}) {
		t.Errorf("edges %v after deleting more", got)
	}

	// Load time: from the navigation's start to the editor ready (schemas
	// read, graph drawn, the server's check back), the median of five.
	var ms []float64
	for range 5 {
		tab.Do("load the editor", chromedp.Navigate(tg.url+"/editor/roundtrip"))
		editorReady(tab)
		ms = append(ms, browsertest.Eval[float64](tab, `Number(document.getElementById('editor').dataset.loadms)`))
	}
	slices.Sort(ms)
	t.Logf("editor load (navigation start → ready), 5 loads: %v ms; median %.0f ms", ms, ms[2])
	if ms[2] > 1000 {
		t.Errorf("the editor's median load is %.0f ms, want ≤ 1 s", ms[2])
	}
}
