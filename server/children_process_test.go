package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/rune-org/rune/message"
)

// TestChildrenSurviveWorkerKill: on the distributed runtime, parents wait
// for their children (each child waits 2 s in a delay); one of the two
// workers is killed with SIGKILL while they wait, and another started:
// every parent completes once with its child's final context, and has
// exactly one child.
func TestChildrenSurviveWorkerKill(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	victim := d.worker()
	d.worker()
	d.scheduler()
	srv := d.server()
	d.waitHealthy(srv)
	st := d.store()
	a := newAPI(t, &target{url: "http://" + srv.addr, token: newToken(t, st, "kids"), store: st, output: d.logs.String})
	const n = 20
	a.pushWorkflow(wfDef("kid", `{"id":"nap","type":"delay","parameters":{"delayMs":2000}},
		{"id":"double","type":"set","parameters":{"values":{"doubled":"{{ $trigger.n * 2 }}"}}}`,
		`{"id":"e1","src":"start","dst":"nap"},{"id":"e2","src":"nap","dst":"double"}`))
	a.pushWorkflow(childCall("mom", "kid", ""))
	ids := make([]string, n)
	for i := range n {
		ids[i] = a.trigger("mom", fmt.Sprintf(`{"n":%d}`, i)).ID
	}
	a.waitFor(ids[n-1], "waiting for its child", func(x *execution) bool { return x.Status == "waiting" })
	victim.kill()
	d.worker()
	for i, id := range ids {
		done := a.waitStatus(id, "completed", "failed", "cancelled", "halted")
		var comp message.Completion
		if err := json.Unmarshal(done.Completion, &comp); err != nil || done.Status != "completed" {
			t.Errorf("parent %d: %s %s", i, done.Status, done.Completion)
			continue
		}
		if got := fmt.Sprint(comp.FinalContext["$after"]); got != fmt.Sprintf("map[got:%d]", 2*i) {
			t.Errorf("parent %d: $after %s, want got %d", i, got, 2*i)
		}
		var kids childrenPage
		a.want(http.StatusOK, "GET", "/v1/executions/"+id+"/children", nil, &kids)
		if len(kids.Items) != 1 || kids.Items[0].Status != "completed" {
			t.Errorf("parent %d: children %+v, want one, completed", i, kids.Items)
		}
	}
	var all struct {
		Items []execution `json:"items"`
	}
	a.want(http.StatusOK, "GET", "/v1/executions?workflow_id=kid&limit=500", nil, &all)
	if len(all.Items) != n {
		t.Errorf("%d child executions, want %d", len(all.Items), n)
	}
}
