package console_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestEditorEndpoints: the editor's check names the node or edge of each
// problem, wants the CSRF value like every write, and the completion's
// paths are those of the recent runs (names only, never values).
func TestEditorEndpoints(t *testing.T) {
	t.Parallel()
	tg := embeddedTarget(t)
	s := tg.login(t)
	code, page := s.get("/editor")
	if code != http.StatusOK || !strings.Contains(page, `id="editor"`) || !strings.Contains(page, "/assets/editor.js") {
		t.Fatalf("/editor: %d", code)
	}
	if code, _ := s.get("/editor/nope"); code != http.StatusNotFound {
		t.Errorf("/editor/nope: %d, want 404", code)
	}
	csrf := between(page, `<meta name="csrf" content="`, `"`)

	bad := `{"id":"w","nodes":[{"id":"start","type":"trigger","trigger":true},{"id":"say","type":"log","parameters":{}}],
	 "edges":[{"id":"e1","src":"start","dst":"say"},{"id":"e2","src":"say","dst":"ghost"}]}`
	if code, _ := s.do("POST", "/ui/editor/validate", bad); code != http.StatusForbidden {
		t.Errorf("a check without the CSRF value: %d, want 403", code)
	}
	code, out := s.do("POST", "/ui/editor/validate", bad, "X-Rune-CSRF", csrf)
	if code != http.StatusOK {
		t.Fatalf("validate: %d %s", code, out)
	}
	var res struct {
		Problems []struct{ Path, Message, Node, Edge string } `json:"problems"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	var sayMsg, ghost bool
	for _, p := range res.Problems {
		sayMsg = sayMsg || p.Node == "say" && strings.Contains(p.Path+p.Message, "message")
		ghost = ghost || p.Edge == "e2" && strings.Contains(p.Message, "ghost")
	}
	if !sayMsg || !ghost {
		t.Errorf("problems %+v, want say's missing message and edge e2's unknown node", res.Problems)
	}
	code, out = s.do("POST", "/ui/editor/validate", `{"id":"w","nodes":[{"id":"start","type":"trigger","trigger":true}]}`, "X-Rune-CSRF", csrf)
	if code != http.StatusOK || !strings.Contains(out, `"problems":[]`) {
		t.Errorf("a valid definition: %d %s", code, out)
	}
	if code, out = s.do("POST", "/ui/editor/validate", `{"id":`, "X-Rune-CSRF", csrf); code != http.StatusOK || !strings.Contains(out, `"message"`) {
		t.Errorf("malformed JSON: %d %s, want a problem", code, out)
	}

	// Paths from a run: the trigger payload's and the set node's output.
	tg.mustAPI(t, 201, "POST", "/v1/workflows", `{"id":"paths","nodes":[{"id":"start","type":"trigger","trigger":true},
	 {"id":"shape","type":"set","parameters":{"values":{"user":{"name":"{{ $trigger.who }}","tags":["a"]},"secret-ish key":1}}}],
	 "edges":[{"id":"e1","src":"start","dst":"shape"}]}`)
	x := tg.mustAPI(t, 201, "POST", "/v1/workflows/paths/executions", `{"who":"Ada","n":7}`)
	id := between(x, `"id":"`, `"`)
	waitFor(t, "the run", func() bool {
		return strings.Contains(tg.mustAPI(t, 200, "GET", "/v1/executions/"+id, ""), `"status":"completed"`)
	})
	code, out = s.get("/ui/editor/paths?workflow=paths")
	var ps struct {
		Paths []string `json:"paths"`
	}
	if err := json.Unmarshal([]byte(out), &ps); code != http.StatusOK || err != nil {
		t.Fatalf("paths: %d %s", code, out)
	}
	for _, want := range []string{"$trigger.who", "$trigger.n", "$shape.user.name", "$shape.user.tags[0]", `$shape["secret-ish key"]`} {
		if !slices.Contains(ps.Paths, want) {
			t.Errorf("paths %v lack %s", ps.Paths, want)
		}
	}
	if strings.Contains(out, "Ada") {
		t.Errorf("the paths carry a value: %s", out)
	}
	if _, out := s.get("/ui/editor/paths?workflow=other"); !strings.Contains(out, `"paths":[]`) {
		t.Errorf("paths of a workflow without runs: %s", out)
	}
}
