package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/rune-org/rune/message"
)

// Child executions (issue 34, the workflow node), run by apiSuite on both
// runtimes.

// childCall is a parent whose node "call" starts child and waits for it.
func childCall(id, child, extra string) string {
	return wfDef(id, `{"id":"call","type":"workflow","parameters":{"workflow_id":"`+child+`","input":{"n":"{{ $trigger.n }}"}`+extra+`}},
		{"id":"after","type":"set","parameters":{"values":{"got":"{{ $call.final_context.$double.doubled }}"}}}`,
		`{"id":"e1","src":"start","dst":"call"},{"id":"e2","src":"call","dst":"after"}`)
}

type childrenPage struct {
	Items []struct {
		execution
		ParentExecutionID string `json:"parent_execution_id"`
	} `json:"items"`
}

// testSubworkflow: a parent calling a child completes with the child's
// final context; the API links them both ways.
func testSubworkflow(t *testing.T, a *api, id string) {
	child := id + "_child"
	a.pushWorkflow(wfDef(child, `{"id":"double","type":"set","parameters":{"values":{"doubled":"{{ $trigger.n * 2 }}"}}}`,
		`{"id":"e1","src":"start","dst":"double"}`))
	a.pushWorkflow(childCall(id, child, ""))
	x := a.trigger(id, `{"n":21}`)
	done := a.waitStatus(x.ID, "completed", "failed", "cancelled", "halted")
	if done.Status != "completed" {
		t.Fatalf("parent %s, want completed; completion %s", done.Status, done.Completion)
	}
	var comp message.Completion
	if err := json.Unmarshal(done.Completion, &comp); err != nil {
		t.Fatal(err)
	}
	call, _ := comp.FinalContext["$call"].(map[string]any)
	kid, _ := call["execution_id"].(string)
	if call["status"] != "completed" || !strings.HasPrefix(kid, "exec_child_") {
		t.Fatalf("$call = %v, want the completed child's id and status", call)
	}
	if got := fmt.Sprint(comp.FinalContext["$after"]); got != "map[got:42]" {
		t.Fatalf("$after = %s, want got 42 from the child's final context", got)
	}
	var kids childrenPage
	a.want(http.StatusOK, "GET", "/v1/executions/"+x.ID+"/children", nil, &kids)
	if len(kids.Items) != 1 || kids.Items[0].ID != kid || kids.Items[0].ParentExecutionID != x.ID || kids.Items[0].Status != "completed" ||
		kids.Items[0].WorkflowID != child || kids.Items[0].Trigger != "workflow:"+x.ID {
		t.Fatalf("children %+v, want child %s of %s", kids.Items, kid, x.ID)
	}
	var byFilter childrenPage
	a.want(http.StatusOK, "GET", "/v1/executions?parent="+x.ID, nil, &byFilter)
	if len(byFilter.Items) != 1 || byFilter.Items[0].ID != kid {
		t.Fatalf("?parent= %+v, want child %s", byFilter.Items, kid)
	}
	var one struct {
		ParentExecutionID string `json:"parent_execution_id"`
	}
	a.want(http.StatusOK, "GET", "/v1/executions/"+kid, nil, &one)
	if one.ParentExecutionID != x.ID {
		t.Fatalf("child's parent_execution_id %q, want %s", one.ParentExecutionID, x.ID)
	}
}

// failureOf returns the failure reason of a finished execution.
func failureOf(t *testing.T, x *execution) *message.Failure {
	t.Helper()
	var comp message.Completion
	if err := json.Unmarshal(x.Completion, &comp); err != nil || comp.FailureReason == nil {
		t.Fatalf("completion %s: want a failure reason (%v)", x.Completion, err)
	}
	return comp.FailureReason
}

// testSubworkflowFailed: a child that fails fails its parent's node with
// CHILD_FAILED, the child's failure_reason in the details.
func testSubworkflowFailed(t *testing.T, a *api, id string) {
	child := id + "_child"
	a.pushWorkflow(wfDef(child, `{"id":"double","type":"set","parameters":{"values":{"doubled":"{{ $trigger.missing.deeper }}"}}}`,
		`{"id":"e1","src":"start","dst":"double"}`))
	a.pushWorkflow(childCall(id, child, ""))
	x := a.trigger(id, `{"n":1}`)
	done := a.waitStatus(x.ID, "completed", "failed", "cancelled", "halted")
	f := failureOf(t, done)
	if done.Status != "failed" || f.NodeID != "call" || f.Code != "CHILD_FAILED" {
		t.Fatalf("parent %s with %+v, want failed by node call with CHILD_FAILED", done.Status, f)
	}
	inner, _ := f.Details["failure_reason"].(map[string]any)
	if inner["node_id"] != "double" || inner["code"] == "" || f.Details["status"] != "failed" {
		t.Fatalf("details %v, want the child's failure_reason (node double)", f.Details)
	}
}

// testSubworkflowCycle: a workflow calling itself fails with CHILD_CYCLE,
// and nesting deeper than 16 with CHILD_DEPTH.
func testSubworkflowCycle(t *testing.T, a *api, id string) {
	a.pushWorkflow(childCall(id, id, ""))
	x := a.trigger(id, `{"n":1}`)
	done := a.waitStatus(x.ID, "completed", "failed", "cancelled", "halted")
	if f := failureOf(t, done); done.Status != "failed" || f.Code != "CHILD_CYCLE" || !strings.Contains(f.Message, id+" → "+id) {
		t.Fatalf("self-call: %s with %+v, want failed with CHILD_CYCLE", done.Status, f)
	}
	// w0 → w1 → … → w17: w16, at depth 16, may not start w17.
	const n = 17
	for i := n; i >= 0; i-- {
		wid := fmt.Sprintf("%s_d%d", id, i)
		if i == n {
			a.pushWorkflow(wfDef(wid, `{"id":"double","type":"set","parameters":{"values":{"doubled":1}}}`, `{"id":"e1","src":"start","dst":"double"}`))
			continue
		}
		a.pushWorkflow(childCall(wid, fmt.Sprintf("%s_d%d", id, i+1), ""))
	}
	x = a.trigger(id+"_d0", `{"n":1}`)
	done = a.waitStatus(x.ID, "completed", "failed", "cancelled", "halted")
	if f := failureOf(t, done); done.Status != "failed" || f.Code != "CHILD_FAILED" || !strings.Contains(f.Message, "CHILD_DEPTH") ||
		strings.Count(f.Message, "CHILD_FAILED") != 15 {
		t.Fatalf("17 deep: %s with %+v, want CHILD_FAILED 16 levels above CHILD_DEPTH", done.Status, f)
	}
}

// testSubworkflowCancel: cancelling a parent cancels its waiting child.
func testSubworkflowCancel(t *testing.T, a *api, id string) {
	child := id + "_child"
	a.pushWorkflow(wfDef(child, `{"id":"pause","type":"wait","parameters":{"amount":600}}`, `{"id":"e1","src":"start","dst":"pause"}`))
	a.pushWorkflow(childCall(id, child, ""))
	x := a.trigger(id, `{"n":1}`)
	var kids childrenPage
	deadlineOK := a.waitFor(x.ID, "with its child waiting", func(*execution) bool {
		a.want(http.StatusOK, "GET", "/v1/executions/"+x.ID+"/children", nil, &kids)
		return len(kids.Items) == 1 && len(kids.Items[0].Cursor) == 1 && kids.Items[0].Cursor[0] == "pause"
	})
	_ = deadlineOK
	a.want(http.StatusAccepted, "POST", "/v1/executions/"+x.ID+"/cancel", nil, nil)
	if done := a.waitStatus(x.ID, "cancelled", "completed", "failed", "halted"); done.Status != "cancelled" {
		t.Fatalf("parent %s, want cancelled", done.Status)
	}
	if done := a.waitStatus(kids.Items[0].ID, "cancelled", "completed", "failed", "halted"); done.Status != "cancelled" {
		t.Fatalf("child %s, want cancelled with its parent", done.Status)
	}
}

// testSubworkflowNoWait: wait false succeeds at once with the child's id;
// the child runs on its own.
func testSubworkflowNoWait(t *testing.T, a *api, id string) {
	child := id + "_child"
	a.pushWorkflow(wfDef(child, `{"id":"double","type":"set","parameters":{"values":{"doubled":"{{ $trigger.n * 2 }}"}}}`,
		`{"id":"e1","src":"start","dst":"double"}`))
	a.pushWorkflow(wfDef(id, `{"id":"call","type":"workflow","parameters":{"workflow_id":"`+child+`","wait":false,"input":{"n":"{{ $trigger.n }}"}}}`,
		`{"id":"e1","src":"start","dst":"call"}`))
	x := a.trigger(id, `{"n":2}`)
	done := a.waitStatus(x.ID, "completed", "failed", "cancelled", "halted")
	var comp message.Completion
	if err := json.Unmarshal(done.Completion, &comp); err != nil || done.Status != "completed" {
		t.Fatalf("parent %s %s", done.Status, done.Completion)
	}
	call, _ := comp.FinalContext["$call"].(map[string]any)
	kid, _ := call["execution_id"].(string)
	if call["status"] != "enqueued" || kid == "" {
		t.Fatalf("$call %v, want the child's id, enqueued", call)
	}
	// The child is started once the node's waiting status is recorded,
	// which may be just after the parent's completion.
	var kids childrenPage
	a.waitFor(x.ID, "with its child started and completed", func(*execution) bool {
		a.want(http.StatusOK, "GET", "/v1/executions/"+x.ID+"/children", nil, &kids)
		return len(kids.Items) == 1 && kids.Items[0].ID == kid && kids.Items[0].Status == "completed"
	})
}

// testSubworkflowExample: examples/parent_calls_child.json calls
// examples/child_price_quote.json (workflow ids made the test's own).
func testSubworkflowExample(t *testing.T, a *api, id string) {
	child := strings.ReplaceAll(readExample(t, "child_price_quote.json"), `"child_price_quote"`, `"`+id+`_child"`)
	parent := strings.ReplaceAll(readExample(t, "parent_calls_child.json"), `"child_price_quote"`, `"`+id+`_child"`)
	parent = strings.Replace(parent, `"parent_calls_child"`, `"`+id+`"`, 1)
	a.pushWorkflow(child)
	a.pushWorkflow(parent)
	x := a.trigger(id, readExample(t, "parent_calls_child.input.json"))
	done := a.waitStatus(x.ID, "completed", "failed", "cancelled", "halted")
	var comp message.Completion
	if err := json.Unmarshal(done.Completion, &comp); err != nil || done.Status != "completed" {
		t.Fatalf("example: %s %s", done.Status, done.Completion)
	}
	if reply, _ := comp.FinalContext["$reply"].(map[string]any); reply["total"] != 37.5 {
		t.Fatalf("$reply %v, want total 37.5", comp.FinalContext["$reply"])
	}
}
