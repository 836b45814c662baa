package server_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rune-org/rune/server"
)

// Issue 34 over HTTP: POST /v1/events resumes the executions waiting for
// the (event, key), once, an Idempotency-Key making a retry match nothing
// new; bad events are 400/422; approvals list and decide a waiting
// approval; a hook with event settings sends an event instead of starting
// an execution.

type eventSent struct {
	EventID string `json:"event_id"`
	Matched int    `json:"matched"`
}

func eventWF(id, extra string) string {
	return wfDef(id, `{"id":"paid","type":"wait_for_event","parameters":{"event":"order.paid","key":"{{ $trigger.order_id }}","timeout":"1h"`+extra+`}},
		{"id":"thanks","type":"set","parameters":{"values":{"data":"{{ $paid.data }}"}}}`,
		`{"id":"e1","src":"start","dst":"paid"},{"id":"e2","src":"paid","dst":"thanks"}`)
}

func testSendEvents(t *testing.T, a *api, id string) {
	a.pushWorkflow(eventWF(id, ""))
	key := "o-" + id
	x1 := a.trigger(id, `{"order_id":"`+key+`"}`)
	x2 := a.trigger(id, `{"order_id":"`+key+`"}`)
	other := a.trigger(id, `{"order_id":"other-`+id+`"}`)
	for _, x := range []execution{x1, x2, other} {
		a.waitFor(x.ID, "with paid waiting", func(x *execution) bool { return slices.Contains(x.Cursor, "paid") })
	}
	body := []byte(`{"event":"order.paid","key":"` + key + `","data":{"amount":12}}`)
	var sent eventSent
	a.want(http.StatusAccepted, "POST", "/v1/events", body, &sent, "Idempotency-Key", "pay-"+id)
	if sent.Matched != 2 || sent.EventID == "" {
		t.Fatalf("sent %+v, want matched 2 and an event id", sent)
	}
	var again eventSent
	a.want(http.StatusAccepted, "POST", "/v1/events", body, &again, "Idempotency-Key", "pay-"+id)
	if again.EventID != sent.EventID || again.Matched != 2 {
		t.Fatalf("the retry with the same Idempotency-Key: %+v, want %+v", again, sent)
	}
	for _, x := range []execution{x1, x2} {
		done := a.waitStatus(x.ID, "completed")
		if !strings.Contains(string(done.Completion), `"amount":12`) {
			t.Fatalf("completion %s, want the event's data", done.Completion)
		}
	}
	if x := a.get(other.ID); x.Status == "completed" {
		t.Fatalf("the execution waiting on another key completed")
	}
	a.want(http.StatusAccepted, "POST", "/v1/events", []byte(`{"event":"order.paid","key":"other-`+id+`"}`), &sent)
	if sent.Matched != 1 {
		t.Fatalf("the other key's event matched %d, want 1", sent.Matched)
	}
	a.waitStatus(other.ID, "completed")

	a.wantError(http.StatusUnprocessableEntity, server.CodeInvalidRequest, "POST", "/v1/events", []byte(`{"event":"","key":"k"}`))
	a.wantError(http.StatusUnprocessableEntity, server.CodeInvalidRequest, "POST", "/v1/events", []byte(`{"event":"e","key":""}`))
	a.wantError(http.StatusBadRequest, server.CodeInvalidJSON, "POST", "/v1/events", []byte(`{"event":"e","key":"k","nope":1}`))
	big := `{"event":"e","key":"k","data":"` + strings.Repeat("x", 70<<10) + `"}`
	a.wantError(http.StatusRequestEntityTooLarge, server.CodeTooLarge, "POST", "/v1/events", []byte(big))
}

func (a *api) get(id string) execution {
	a.t.Helper()
	var x execution
	a.want(http.StatusOK, "GET", "/v1/executions/"+id, nil, &x)
	return x
}

func testApprovals(t *testing.T, a *api, id string) {
	a.pushWorkflow(eventWF(id, `,"approval":{"title":"Send the bulk mail?"}`))
	x := a.trigger(id, `{"order_id":"appr-`+id+`"}`)
	a.waitFor(x.ID, "with paid waiting", func(x *execution) bool { return slices.Contains(x.Cursor, "paid") })
	var page struct {
		Items []struct {
			ExecutionID string `json:"execution_id"`
			NodeID      string `json:"node_id"`
			Title       string `json:"title"`
			Key         string `json:"key"`
		} `json:"items"`
	}
	found := false
	// The waiting status reaches the history in batches: poll, 30 s at most.
	for deadline := time.Now().Add(30 * time.Second); !found && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		a.want(http.StatusOK, "GET", "/v1/approvals", nil, &page)
		found = slices.ContainsFunc(page.Items, func(p struct {
			ExecutionID string `json:"execution_id"`
			NodeID      string `json:"node_id"`
			Title       string `json:"title"`
			Key         string `json:"key"`
		}) bool {
			return p.ExecutionID == x.ID && p.NodeID == "paid" && p.Title == "Send the bulk mail?" && p.Key == "appr-"+id
		})
	}
	if !found {
		t.Fatalf("approvals %+v: want execution %s's node paid", page.Items, x.ID)
	}
	a.wantError(http.StatusConflict, server.CodeConflict, "POST", "/v1/executions/"+x.ID+"/approvals/thanks", []byte(`{"approved":true}`))
	var sent eventSent
	a.want(http.StatusAccepted, "POST", "/v1/executions/"+x.ID+"/approvals/paid", []byte(`{"approved":true,"comment":"ok"}`), &sent)
	if sent.Matched != 1 {
		t.Fatalf("approve: %+v, want matched 1", sent)
	}
	done := a.waitStatus(x.ID, "completed")
	var c struct {
		FinalContext map[string]json.RawMessage `json:"final_context"`
	}
	if err := json.Unmarshal(done.Completion, &c); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(c.FinalContext["$paid"]), `"approved":true`) || !strings.Contains(string(c.FinalContext["$paid"]), `"comment":"ok"`) {
		t.Fatalf("$paid %s, want the approval's data", c.FinalContext["$paid"])
	}
}

func testHookEvent(t *testing.T, a *api, id string) {
	a.pushWorkflow(eventWF(id, ""))
	x := a.trigger(id, `{"order_id":"hook-`+id+`"}`)
	a.waitFor(x.ID, "with paid waiting", func(x *execution) bool { return slices.Contains(x.Cursor, "paid") })
	var hk struct {
		URL string `json:"url"`
	}
	a.want(http.StatusCreated, "POST", "/v1/workflows/"+id+"/hooks", []byte(`{"name":"payments","event":{"name":"order.paid","key":"body.order"}}`), &hk)
	r := a.deliver(hk.URL, `{"order":"hook-`+id+`","amount":5}`, "X-Request-Id", "d-"+id)
	if r.status != http.StatusAccepted {
		t.Fatalf("delivery: %d %s, want 202", r.status, r.body)
	}
	var sent eventSent
	r.decode(t, &sent)
	if sent.Matched != 1 {
		t.Fatalf("the hook's event matched %d, want 1", sent.Matched)
	}
	done := a.waitStatus(x.ID, "completed")
	if !strings.Contains(string(done.Completion), `"amount":5`) {
		t.Fatalf("completion %s, want the delivery's body as data", done.Completion)
	}
	if n := len(a.executionsOf(id)); n != 1 {
		t.Fatalf("%d executions of the workflow, want 1: the hook started none", n)
	}
	r = a.deliver(hk.URL, `{"amount":5}`)
	if r.status != http.StatusUnprocessableEntity {
		t.Fatalf("a delivery without the key: %d %s, want 422", r.status, r.body)
	}
	a.wantError(http.StatusBadRequest, server.CodeInvalidRequest, "POST", "/v1/workflows/"+id+"/hooks", []byte(`{"event":{"name":"e","key":"body.k"},"reply":{}}`))
}
