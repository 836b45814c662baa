package console_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestParentChildLinks: the execution page of a parent links its child
// (and the node that started it), the child's links its parent.
func TestParentChildLinks(t *testing.T) {
	t.Parallel()
	tg := embeddedTarget(t)
	tg.mustAPI(t, 201, "POST", "/v1/workflows", `{"id":"kid","nodes":[{"id":"start","type":"trigger","trigger":true},
	 {"id":"v","type":"set","parameters":{"values":{"v":1}}}],"edges":[{"id":"e1","src":"start","dst":"v"}]}`)
	tg.mustAPI(t, 201, "POST", "/v1/workflows", `{"id":"mom","nodes":[{"id":"start","type":"trigger","trigger":true},
	 {"id":"call","type":"workflow","parameters":{"workflow_id":"kid"}}],"edges":[{"id":"e1","src":"start","dst":"call"}]}`)
	x := tg.mustAPI(t, 201, "POST", "/v1/workflows/mom/executions", `{}`)
	id := between(x, `"id":"`, `"`)
	waitFor(t, "the parent to complete", func() bool {
		_, b := tg.api(t, "GET", "/v1/executions/"+id, "")
		var x struct{ Status string }
		return json.Unmarshal([]byte(b), &x) == nil && x.Status == "completed"
	})
	_, kids := tg.api(t, "GET", "/v1/executions/"+id+"/children", "")
	kid := between(kids, `"id":"`, `"`)
	s := tg.login(t)
	_, page := s.get("/executions/" + id)
	if links := between(page, `id="children"`, `</dd>`); kid == "" || !strings.Contains(links, `href="/executions/`+kid+`"`) || !strings.Contains(links, "node call") {
		t.Errorf("the parent's page links no child %q: %q", kid, links)
	}
	_, page = s.get("/executions/" + kid)
	if link := between(page, `id="parent"`, `</dd>`); !strings.Contains(link, `href="/executions/`+id+`"`) {
		t.Errorf("the child's page links no parent: %q", link)
	}
}
