package console_test

import (
	"html"
	"strings"
	"testing"
)

// A node's panel offers "Re-run from here" pre-filled with the context the
// run saw ($-keyed, as the API takes it); posting it through the console
// starts an execution at that node. A workflow's page pauses and resumes it.
func TestRerunFromHereAndPause(t *testing.T) {
	t.Parallel()
	tg := embeddedTarget(t)
	def := `{"id":"rr","nodes":[{"id":"start","type":"trigger","trigger":true},
	 {"id":"a","type":"set","parameters":{"values":{"v":"{{ $trigger.n }}"}}},
	 {"id":"b","type":"set","parameters":{"values":{"w":"{{ $a.v }}"}}}],
	 "edges":[{"id":"e1","src":"start","dst":"a"},{"id":"e2","src":"a","dst":"b"}]}`
	tg.mustAPI(t, 201, "POST", "/v1/workflows", def)
	id := between(tg.mustAPI(t, 201, "POST", "/v1/workflows/rr/executions", `{"n":3}`), `"id":"`, `"`)
	waitFor(t, "the execution to finish", func() bool {
		_, b := tg.api(t, "GET", "/v1/executions/"+id, "")
		return strings.Contains(b, `"status":"completed"`)
	})
	s := tg.login(t)
	code, panel := s.get("/ui/executions/" + id + "/nodes/b")
	if code != 200 || !strings.Contains(panel, `id="rerun-node"`) || !strings.Contains(html.UnescapeString(panel), `"$a": {`) {
		t.Fatalf("panel of b: %d, want a Re-run from here form with $a in its context:\n%s", code, panel)
	}
	_, page := s.get("/executions/" + id)
	csrf := between(page, `<meta name="csrf" content="`, `"`)
	code, out := s.do("POST", "/ui/api/v1/executions/"+id+"/rerun", `{"from_node":"b","context":{"$trigger":{"n":3},"$a":{"v":8}}}`,
		"X-Rune-CSRF", csrf, "Content-Type", "application/json")
	if code != 201 {
		t.Fatalf("re-run through the console: %d %s", code, out)
	}
	rid := between(out, `"id":"`, `"`)
	waitFor(t, "the re-run to complete with w 8", func() bool {
		_, b := tg.api(t, "GET", "/v1/executions/"+rid, "")
		return strings.Contains(b, `"status":"completed"`) && strings.Contains(b, `"w":8`)
	})

	if _, wp := s.get("/workflows/rr"); !strings.Contains(wp, `id="pause-toggle" data-action="pause"`) {
		t.Fatalf("workflow page without a Pause control:\n%s", wp)
	}
	if code, out := s.do("POST", "/ui/api/v1/workflows/rr/pause", "", "X-Rune-CSRF", csrf); code != 200 {
		t.Fatalf("pause through the console: %d %s", code, out)
	}
	if _, wp := s.get("/workflows/rr"); !strings.Contains(wp, `id="paused"`) || !strings.Contains(wp, `data-action="resume"`) {
		t.Fatalf("workflow page of a paused workflow:\n%s", wp)
	}
}
