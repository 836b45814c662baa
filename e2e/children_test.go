package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Child executions (issue 34) under kill -9 of the durable embedded server.

const childExecutions = 20

// TestChildrenSurviveServerKill: parents wait for their children (each
// child waits 2 s); the embedded server is killed with SIGKILL while they
// wait and restarted on its directory; every parent completes once, with
// its child's final context, and has exactly one child.
func TestChildrenSurviveServerKill(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data")
	first := startEmbedded(t, "server", data)
	first.call(t, "POST", "/v1/workflows", json.RawMessage(`{"id":"kid","nodes":[{"id":"start","type":"trigger","trigger":true},
		{"id":"nap","type":"delay","parameters":{"delayMs":2000}},
		{"id":"double","type":"set","parameters":{"values":{"v":"{{ $trigger.n * 2 }}"}}}],
		"edges":[{"id":"e1","src":"start","dst":"nap"},{"id":"e2","src":"nap","dst":"double"}]}`), http.StatusCreated, nil)
	first.call(t, "POST", "/v1/workflows", json.RawMessage(`{"id":"mom","nodes":[{"id":"start","type":"trigger","trigger":true},
		{"id":"call","type":"workflow","parameters":{"workflow_id":"kid","input":{"n":"{{ $trigger.n }}"}}},
		{"id":"done","type":"set","parameters":{"values":{"got":"{{ $call.final_context.$double.v }}"}}}],
		"edges":[{"id":"e1","src":"start","dst":"call"},{"id":"e2","src":"call","dst":"done"}]}`), http.StatusCreated, nil)
	for n := range childExecutions {
		first.call(t, "POST", "/v1/workflows/mom/executions", map[string]any{"n": n}, http.StatusCreated, nil)
	}
	list := func(s *embeddedServer, wf string) []durableExecution {
		var page struct {
			Items []durableExecution `json:"items"`
		}
		s.call(t, "GET", "/v1/executions?workflow_id="+wf+"&limit=500", nil, http.StatusOK, &page)
		return page.Items
	}
	waitFor(t, 60*time.Second, "children to start", func() bool { return len(list(first, "kid")) >= childExecutions/2 })
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.wait(t, 30*time.Second)

	again := startEmbedded(t, "restarted server", data)
	var moms []durableExecution
	waitFor(t, 120*time.Second, "every parent to end", func() bool {
		moms = list(again, "mom")
		for _, x := range moms {
			if !strings.Contains("completed failed halted cancelled", x.Status) {
				return false
			}
		}
		return len(moms) == childExecutions
	})
	for _, x := range moms {
		n := int(x.Input["n"].(float64))
		if x.Status != "completed" || x.Completion == nil {
			t.Errorf("parent %s (n=%d): %s, want completed", x.ID, n, x.Status)
			continue
		}
		done, _ := x.Completion.FinalContext["$done"].(map[string]any)
		if fmt.Sprint(done["got"]) != fmt.Sprint(2*n) {
			t.Errorf("parent %s (n=%d): $done %v, want got %d", x.ID, n, done, 2*n)
		}
		var kids struct {
			Items []durableExecution `json:"items"`
		}
		again.call(t, "GET", "/v1/executions/"+x.ID+"/children", nil, http.StatusOK, &kids)
		if len(kids.Items) != 1 || kids.Items[0].Status != "completed" {
			t.Errorf("parent %s: children %+v, want one, completed", x.ID, kids.Items)
		}
	}
	if kids := list(again, "kid"); len(kids) != childExecutions {
		t.Errorf("%d child executions, want %d (one per parent)", len(kids), childExecutions)
	}
}
