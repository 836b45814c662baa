package console_test

import (
	"strings"
	"testing"
)

// The execution page of a running execution offers Pause…; paused through
// the console, it offers Resume…, which resumes it (issue 34).
func TestExecutionPauseControl(t *testing.T) {
	t.Parallel()
	tg := embeddedTarget(t)
	def := `{"id":"xp","nodes":[{"id":"start","type":"trigger","trigger":true},
	 {"id":"d","type":"delay","parameters":{"delayMs":1500}},
	 {"id":"b","type":"set","parameters":{"values":{"w":1}}}],
	 "edges":[{"id":"e1","src":"start","dst":"d"},{"id":"e2","src":"d","dst":"b"}]}`
	tg.mustAPI(t, 201, "POST", "/v1/workflows", def)
	id := between(tg.mustAPI(t, 201, "POST", "/v1/workflows/xp/executions", `{}`), `"id":"`, `"`)
	s := tg.login(t)
	_, page := s.get("/executions/" + id)
	if !strings.Contains(page, `id="xpause" data-action="pause"`) {
		t.Fatalf("execution page without a Pause control:\n%s", page)
	}
	csrf := between(page, `<meta name="csrf" content="`, `"`)
	if code, out := s.do("POST", "/ui/api/v1/executions/"+id+"/pause", "", "X-Rune-CSRF", csrf); code != 200 {
		t.Fatalf("pause through the console: %d %s", code, out)
	}
	if _, page := s.get("/executions/" + id); !strings.Contains(page, `data-action="resume"`) {
		t.Fatalf("execution page of a paused execution without Resume:\n%s", page)
	}
	if code, out := s.do("POST", "/ui/api/v1/executions/"+id+"/resume", "", "X-Rune-CSRF", csrf); code != 200 {
		t.Fatalf("resume through the console: %d %s", code, out)
	}
	waitFor(t, "the execution to complete", func() bool {
		_, b := tg.api(t, "GET", "/v1/executions/"+id, "")
		return strings.Contains(b, `"status":"completed"`)
	})
}
