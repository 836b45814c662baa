package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/rune-org/rune/internal/testinfra"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/runtimetest"
	"github.com/rune-org/rune/server"
)

// apiSuite is the one API suite: every route over HTTP against a running
// server, the embedded default or the distributed master with worker and
// scheduler processes. Subtests share the target and isolate by workflow id.
func apiSuite(t *testing.T, tg *target) {
	for _, tc := range []struct {
		name string
		f    func(t *testing.T, a *api, id string)
	}{
		{"Health", testHealth},
		{"Auth", testAuth},
		{"Errors", testErrors},
		{"Workflows", testWorkflows},
		{"Conventions", testConventions},
		{"EventsFromNow", testEventsFromNow},
		{"TriggerToCompletion", testTriggerToCompletion},
		{"History", testHistory},
		{"Idempotency", testIdempotency},
		{"ListExecutions", testListExecutions},
		{"NodeFailure", testNodeFailure},
		{"Cancel", testCancel},
		{"CancelEnqueued", testCancelEnqueued},
		{"Rerun", testRerun},
		{"Stream", testStream},
		{"Credentials", testCredentials},
		{"Metrics", testMetrics},
		{"DeliveryStatus", testDeliveryStatus}, // issue 36
		{"Subscribers", testSubscribers},
		// Issue 38: the list's trigger and input filters, a cron's preview.
		{"Search", testSearch},
		// Re-run from a node and workflow pause (issue 34).
		{"RerunFromNode", testRerunFromNode},
		{"WorkflowPause", testWorkflowPause},
		// issue 34: events, approvals, hooks sending events
		{"SendEvents", testSendEvents},
		{"Approvals", testApprovals},
		{"HookEvent", testHookEvent},
		// issue 34: child executions (children_test.go)
		{"Subworkflow", testSubworkflow},
		{"SubworkflowFailed", testSubworkflowFailed},
		{"SubworkflowCycle", testSubworkflowCycle},
		{"SubworkflowCancel", testSubworkflowCancel},
		{"SubworkflowNoWait", testSubworkflowNoWait},
		{"SubworkflowExample", testSubworkflowExample},
		// issue 38: a hook's last deliveries (hook_deliveries_test.go)
		{"HookDeliveries", testHookDeliveries},
		// Execution pause and resume (issue 34, pause_execution_test.go).
		{"ExecutionPause", testExecutionPause},
		// issue 36: the digest node, through examples/comment_digest.json
		{"DigestExample", testDigestExample},
		// issue 36: message templates (templates_test.go)
		{"Templates", testTemplates},
		{"TemplatePinning", testTemplatePinning},
		// issue 36: quiet hours (quiet_test.go)
		{"QuietHours", testQuietHours},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.f(t, newAPI(t, tg), strings.ToLower(tc.name)+"_"+testinfra.Name(t))
		})
	}
}

func testHealth(t *testing.T, a *api, _ string) {
	a.want(http.StatusOK, "GET", "/healthz", nil, nil, "Authorization", "")
	var doc map[string]any
	a.want(http.StatusOK, "GET", "/v1/openapi.json", nil, &doc, "Authorization", "")
	if doc["openapi"] != "3.1.0" {
		t.Fatalf("openapi %v, want 3.1.0", doc["openapi"])
	}
}

// testAuth: every route but the open ones refuses a missing, malformed,
// unknown or revoked token with 401, a Bearer challenge and the JSON error.
func testAuth(t *testing.T, a *api, id string) {
	for _, rt := range server.Endpoints() {
		if rt.Open {
			continue
		}
		path := strings.NewReplacer("{id}", "x", "{name}", "x").Replace(rt.Path)
		for _, h := range []string{"", "Bearer", "Basic dXNlcjpwYXNz", "Bearer rune_not_a_token"} {
			r := a.do(rt.Method, path, nil, map[string]string{"Authorization": h})
			var e errorBody
			r.decode(t, &e)
			if r.status != http.StatusUnauthorized || e.Error.Code != server.CodeUnauthorized || !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("%s %s with Authorization %q: %d %s (WWW-Authenticate %q), want 401 unauthorized with a Bearer challenge",
					rt.Method, path, h, r.status, r.body, r.header.Get("WWW-Authenticate"))
			}
		}
	}
	// A created token works; revoked, it stops working (after the cache TTL).
	tok := newToken(t, a.tg.store, id)
	a.want(http.StatusOK, "GET", "/v1/workflows", nil, nil, "Authorization", "Bearer "+tok)
	if err := a.tg.store.RevokeToken(context.Background(), id, time.Now()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for a.do("GET", "/v1/workflows", nil, map[string]string{"Authorization": "Bearer " + tok}).status != http.StatusUnauthorized {
		if time.Now().After(deadline) {
			t.Fatal("a revoked token is still accepted after 30 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func testErrors(t *testing.T, a *api, id string) {
	a.wantError(http.StatusNotFound, server.CodeNotFound, "GET", "/v1/nothing", nil)
	a.wantError(http.StatusMethodNotAllowed, server.CodeMethodNotAllowed, "PATCH", "/v1/workflows", nil)
	a.wantError(http.StatusNotFound, server.CodeNotFound, "GET", "/v1/workflows/"+id, nil)
	a.wantError(http.StatusNotFound, server.CodeNotFound, "GET", "/v1/executions/exec_none", nil)
	a.wantError(http.StatusNotFound, server.CodeNotFound, "POST", "/v1/workflows/"+id+"/executions", []byte(`{}`))
	// Malformed JSON.
	a.wantError(http.StatusBadRequest, server.CodeInvalidJSON, "POST", "/v1/workflows", []byte(`{"id": `))
	a.wantError(http.StatusBadRequest, server.CodeInvalidJSON, "POST", "/v1/workflows", nil)
	a.wantError(http.StatusBadRequest, server.CodeInvalidJSON, "POST", "/v1/credentials", []byte(`[1,2`))
	// Every problem of an invalid workflow, each with its path.
	e := a.wantError(http.StatusUnprocessableEntity, server.CodeInvalidWorkflow, "POST", "/v1/workflows", []byte(`{"id":"`+id+`","nodes":[
		{"id":"start","type":"trigger","trigger":true},
		{"id":"a","type":"nosuchtype"},
		{"id":"b","type":"set"},{"id":"b","type":"set"}],"edges":[{"id":"e1","src":"start","dst":"zz"}]}`))
	if len(e.Error.Problems) < 3 {
		t.Fatalf("problems %+v, want at least 3 (unknown type, duplicate id, unknown edge target)", e.Error.Problems)
	}
	for _, p := range e.Error.Problems {
		if p.Path == "" || p.Message == "" {
			t.Fatalf("problem %+v has no path or message", p)
		}
	}
	// Oversized bodies: a trigger payload over 1 MiB, a definition over 6 MiB.
	a.pushWorkflow(wfDef(id, `{"id":"s","type":"set","parameters":{"values":{"v":1}}}`, `{"id":"e1","src":"start","dst":"s"}`))
	big := []byte(`{"pad":"` + strings.Repeat("x", server.MaxTriggerDefault) + `"}`)
	a.wantError(http.StatusRequestEntityTooLarge, server.CodeTooLarge, "POST", "/v1/workflows/"+id+"/executions", big)
	huge := []byte(`{"pad":"` + strings.Repeat("x", server.MaxBodyDefault) + `"}`)
	a.wantError(http.StatusRequestEntityTooLarge, server.CodeTooLarge, "POST", "/v1/workflows", huge)
	// Bad query parameters name themselves.
	e = a.wantError(http.StatusBadRequest, server.CodeInvalidRequest, "GET", "/v1/executions?status=bogus", nil)
	if !strings.Contains(e.Error.Message, "status") {
		t.Fatalf("message %q does not name the parameter", e.Error.Message)
	}
	a.wantError(http.StatusBadRequest, server.CodeInvalidRequest, "POST", "/v1/workflows/"+id+"/executions?start_at=tomorrow", []byte(`{}`))
	a.wantError(http.StatusBadRequest, server.CodeInvalidRequest, "GET", "/v1/executions?limit=0", nil)
}

func testWorkflows(t *testing.T, a *api, id string) {
	v1 := wfDef(id, `{"id":"s","type":"set","parameters":{"values":{"v":1}}}`, `{"id":"e1","src":"start","dst":"s"}`)
	var w struct {
		ID         string          `json:"id"`
		Version    int             `json:"version"`
		Definition json.RawMessage `json:"definition"`
	}
	a.want(http.StatusCreated, "POST", "/v1/workflows", []byte(v1), &w)
	if w.ID != id || w.Version != 1 {
		t.Fatalf("created %+v, want id %s version 1", w, id)
	}
	a.wantError(http.StatusConflict, server.CodeConflict, "POST", "/v1/workflows", []byte(v1))
	v2 := strings.Replace(v1, `"v":1`, `"v":2`, 1)
	a.want(http.StatusOK, "PUT", "/v1/workflows/"+id, []byte(v2), &w)
	if w.Version != 2 {
		t.Fatalf("update gave version %d, want 2", w.Version)
	}
	e := a.wantError(http.StatusUnprocessableEntity, server.CodeInvalidWorkflow, "PUT", "/v1/workflows/other_"+id, []byte(v2))
	if len(e.Error.Problems) != 1 || e.Error.Problems[0].Path != "id" {
		t.Fatalf("id mismatch problems %+v, want one at path id", e.Error.Problems)
	}
	a.want(http.StatusOK, "GET", "/v1/workflows/"+id, nil, &w)
	if w.Version != 2 || !bytes.Contains(w.Definition, []byte(`"v":2`)) {
		t.Fatalf("latest %d %s, want version 2", w.Version, w.Definition)
	}
	a.want(http.StatusOK, "GET", "/v1/workflows/"+id+"?version=1", nil, &w)
	if w.Version != 1 || !bytes.Contains(w.Definition, []byte(`"v":1`)) {
		t.Fatalf("version 1: %d %s", w.Version, w.Definition)
	}
	var versions struct {
		Items []struct{ Version int } `json:"items"`
	}
	a.want(http.StatusOK, "GET", "/v1/workflows/"+id+"/versions", nil, &versions)
	if len(versions.Items) != 2 || versions.Items[0].Version != 2 {
		t.Fatalf("versions %+v, want 2 then 1", versions.Items)
	}
	// An execution records the version it ran.
	x := a.trigger(id, `{}`, "")
	if x.Version != 2 {
		t.Fatalf("execution of version %d, want 2", x.Version)
	}
	x = *a.waitStatus(x.ID, "completed")
	if !bytes.Contains(x.Completion, []byte(`"v":2`)) {
		t.Fatalf("completion %s, want the version 2 output", x.Completion)
	}
	if !listHas(t, a, "/v1/workflows?limit=500", id) {
		t.Fatalf("workflow %s not listed", id)
	}
	a.want(http.StatusNoContent, "DELETE", "/v1/workflows/"+id, nil, nil)
	a.wantError(http.StatusNotFound, server.CodeNotFound, "GET", "/v1/workflows/"+id, nil)
	a.want(http.StatusOK, "GET", "/v1/workflows/"+id+"?version=1", nil, nil) // versions stay readable
	a.wantError(http.StatusNotFound, server.CodeNotFound, "PUT", "/v1/workflows/"+id, []byte(v2))
	if listHas(t, a, "/v1/workflows?limit=500", id) {
		t.Fatalf("deleted workflow %s still listed", id)
	}
	a.want(http.StatusOK, "GET", "/v1/executions/"+x.ID, nil, nil) // its executions stay
}

// testConventions: the HTTP conventions of docs/api.md ("Conventions"):
// Location on 201, ETag and If-Match on workflows, an unchanged definition
// stores no version, Allow on 405, unknown query parameters refused.
func testConventions(t *testing.T, a *api, id string) {
	v1 := wfDef(id, `{"id":"s","type":"set","parameters":{"values":{"v":1}}}`, `{"id":"e1","src":"start","dst":"s"}`)
	var w struct {
		ID        string `json:"id"`
		Version   int    `json:"version"`
		Unchanged bool   `json:"unchanged"`
	}
	r := a.want(http.StatusCreated, "POST", "/v1/workflows", []byte(v1), &w)
	if loc := r.header.Get("Location"); loc != "/v1/workflows/"+id {
		t.Fatalf("Location %q, want /v1/workflows/%s", loc, id)
	}
	if tag := r.header.Get("ETag"); tag != `"v1"` {
		t.Fatalf("ETag of the created workflow %q, want \"v1\"", tag)
	}
	r = a.want(http.StatusOK, "GET", "/v1/workflows/"+id, nil, nil)
	tag1 := r.header.Get("ETag")
	if tag1 != `"v1"` {
		t.Fatalf("ETag %q, want \"v1\"", tag1)
	}
	// The same definition again (key order and spacing aside): no version.
	same := wfDef(id, `{"parameters":{"values":{"v":1}},"type":"set","id":"s"}`, `{"id":"e1","src":"start","dst":"s"}`)
	r = a.want(http.StatusOK, "PUT", "/v1/workflows/"+id, []byte(" "+same), &w, "If-Match", tag1)
	if !w.Unchanged || w.Version != 1 || r.header.Get("ETag") != tag1 {
		t.Fatalf("unchanged update: %+v, ETag %q, want version 1 unchanged", w, r.header.Get("ETag"))
	}
	// Two editors of version 1: the first stores version 2, the second is refused.
	v2 := strings.Replace(v1, `"v":1`, `"v":2`, 1)
	w.Unchanged = false
	r = a.want(http.StatusOK, "PUT", "/v1/workflows/"+id, []byte(v2), &w, "If-Match", tag1)
	if w.Version != 2 || w.Unchanged || r.header.Get("ETag") != `"v2"` {
		t.Fatalf("update: %+v, ETag %q, want version 2", w, r.header.Get("ETag"))
	}
	v3 := strings.Replace(v1, `"v":1`, `"v":3`, 1)
	a.wantError(http.StatusPreconditionFailed, server.CodePreconditionFailed, "PUT", "/v1/workflows/"+id, []byte(v3), "If-Match", tag1)
	a.wantError(http.StatusPreconditionFailed, server.CodePreconditionFailed, "PUT", "/v1/workflows/"+id, []byte(v3), "If-Match", "bogus")
	var versions struct {
		Items []struct{ Version int } `json:"items"`
	}
	a.want(http.StatusOK, "GET", "/v1/workflows/"+id+"/versions", nil, &versions)
	if len(versions.Items) != 2 {
		t.Fatalf("versions %+v, want 2 (unchanged and refused updates store none)", versions.Items)
	}
	// A trigger's 201 says where the execution is.
	r = a.want(http.StatusCreated, "POST", "/v1/workflows/"+id+"/executions", []byte(`{}`), nil)
	var x execution
	r.decode(t, &x)
	if loc := r.header.Get("Location"); loc != "/v1/executions/"+x.ID {
		t.Fatalf("trigger Location %q, want /v1/executions/%s", loc, x.ID)
	}
	a.want(http.StatusOK, "GET", r.header.Get("Location"), nil, nil)
	// 405 says what is allowed.
	r = a.do("PATCH", "/v1/workflows/"+id, nil, nil)
	if r.status != http.StatusMethodNotAllowed || r.header.Get("Allow") != "GET, PUT, DELETE" {
		t.Fatalf("PATCH: %d, Allow %q, want 405 with Allow GET, PUT, DELETE", r.status, r.header.Get("Allow"))
	}
	// An unknown query parameter is refused, named, not ignored.
	e := a.wantError(http.StatusBadRequest, server.CodeInvalidRequest, "GET", "/v1/executions?workflow="+id, nil)
	if !strings.Contains(e.Error.Message, "workflow") || !strings.Contains(e.Error.Message, "workflow_id") {
		t.Fatalf("unknown parameter: %q, want it named with the known ones", e.Error.Message)
	}
	a.wantError(http.StatusBadRequest, server.CodeInvalidRequest, "GET", "/v1/workflows/"+id+"/hooks?limit=5", nil)
}

// testEventsFromNow: /v1/events without a last event id starts from now;
// ?from=beginning replays the history.
func testEventsFromNow(t *testing.T, a *api, id string) {
	a.pushWorkflow(wfDef(id, `{"id":"s","type":"set","parameters":{"values":{"v":1}}}`, `{"id":"e1","src":"start","dst":"s"}`))
	old := a.trigger(id, `{}`)
	a.waitStatus(old.ID, "completed")
	live, _, cancel := a.stream("/v1/events", "")
	defer cancel()
	all, _, cancelAll := a.stream("/v1/events?from=beginning", "")
	defer cancelAll()
	x := a.trigger(id, `{}`)
	seen := func(ch <-chan sseEvent, want string) (sawOld bool) {
		timeout := time.After(60 * time.Second)
		for {
			select {
			case ev, ok := <-ch:
				if !ok {
					t.Fatal("/v1/events ended")
				}
				sawOld = sawOld || strings.Contains(ev.Data, old.ID)
				if ev.Event == "completion" && strings.Contains(ev.Data, want) {
					return sawOld
				}
			case <-timeout:
				t.Fatalf("/v1/events: no completion of %s within 60 s", want)
			}
		}
	}
	if seen(live, x.ID) {
		t.Fatalf("/v1/events without Last-Event-ID replayed execution %s, which ended before it opened", old.ID)
	}
	if !seen(all, x.ID) {
		t.Fatalf("/v1/events?from=beginning did not replay execution %s", old.ID)
	}
	a.wantError(http.StatusBadRequest, server.CodeInvalidRequest, "GET", "/v1/events?from=yesterday", nil)
}

// listHas walks every page of a list for an item with id.
func listHas(t *testing.T, a *api, path, id string) bool {
	for path != "" {
		var page struct {
			Items []struct {
				ID string `json:"id"`
			} `json:"items"`
			NextCursor string `json:"next_cursor"`
		}
		a.want(http.StatusOK, "GET", path, nil, &page)
		for _, it := range page.Items {
			if it.ID == id {
				return true
			}
		}
		path = ""
		if page.NextCursor != "" {
			path = "/v1/workflows?limit=500&cursor=" + page.NextCursor
		}
	}
	return false
}

func testTriggerToCompletion(t *testing.T, a *api, id string) {
	a.pushWorkflow(strings.Replace(readExample(t, "hello.json"), `"id": "hello"`, `"id": "`+id+`"`, 1))
	x := a.trigger(id, `{"name": "Ada"}`)
	if x.Status != "enqueued" || x.WorkflowID != id || x.Version != 1 || x.Trigger != "api" {
		t.Fatalf("triggered %+v, want enqueued version 1 by api", x)
	}
	done := a.waitStatus(x.ID, "completed")
	var c message.Completion
	if err := json.Unmarshal(done.Completion, &c); err != nil {
		t.Fatalf("completion %s: %v", done.Completion, err)
	}
	if c.ExecutionID != x.ID || c.Status != message.CompletionCompleted || c.WorkflowID != id {
		t.Fatalf("completion %+v", c)
	}
	greet, _ := c.FinalContext["$greet"].(map[string]any)
	if greet["greeting"] != "Hello, Ada!" {
		t.Fatalf("final context %v, want $greet.greeting Hello, Ada!", c.FinalContext)
	}
	// The completion is the CompletionMessage as published: every field of
	// message.Completion, re-encoded, gives the same JSON.
	again, _ := json.Marshal(c)
	if !jsonEqual(t, again, done.Completion) {
		t.Fatalf("completion is not the CompletionMessage verbatim:\n got %s\nwant %s", done.Completion, again)
	}
	for _, n := range []string{"start", "greet", "announce"} {
		if !slices.ContainsFunc(done.Nodes, func(r nodeRun) bool {
			return r.NodeID == n && r.Status == message.StatusSuccess
		}) {
			t.Fatalf("node %s has no success run: %+v", n, done.Nodes)
		}
	}
	if len(done.Cursor) != 0 {
		t.Fatalf("cursor %v after the completion, want empty", done.Cursor)
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return bytes.Equal(ja, jb)
}

// testHistory: every node run, a split's branches and progress, a wait
// with its resume time, a retried node with its attempts.
func testHistory(t *testing.T, a *api, id string) {
	var calls atomic.Int32
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok":true}`)
	}))
	defer flaky.Close()
	a.pushWorkflow(wfDef(id, `
		{"id":"each","type":"split","parameters":{"input_array":"{{ $trigger.items }}"}},
		{"id":"double","type":"set","parameters":{"values":{"v":"{{ $item * 2 }}"}}},
		{"id":"agg","type":"aggregator"},
		{"id":"pause","type":"wait","parameters":{"amount":1}},
		{"id":"call","type":"http","parameters":{"method":"GET","url":"`+flaky.URL+`/x"},"retry":{"max_attempts":3,"initial_delay":"300ms"}}`,
		`{"id":"e1","src":"start","dst":"each"},{"id":"e2","src":"each","dst":"double"},{"id":"e3","src":"double","dst":"agg"},
		{"id":"e4","src":"agg","dst":"pause"},{"id":"e5","src":"pause","dst":"call"}`))
	t0 := time.Now()
	x := a.trigger(id, `{"items":[1,2,3]}`)
	w := a.waitFor(x.ID, "waiting in the wait node", func(x *execution) bool {
		return x.Status == "waiting" && slices.Equal(x.Cursor, []string{"pause"})
	})
	// The wait's resume time: a second after the wait began, which was after the trigger.
	if w.AvailableAt.Before(t0.Add(time.Second)) || w.AvailableAt.After(time.Now().Add(2*time.Second)) {
		t.Fatalf("waiting: available_at %s, want the wait's resume time (1 s after it began; triggered %s)", w.AvailableAt, t0)
	}
	done := a.waitStatus(x.ID, "completed", "failed", "halted")
	if done.Status != "completed" {
		t.Fatalf("status %s, want completed: %s", done.Status, done.Completion)
	}
	count := map[string]int{}
	for _, n := range done.Nodes {
		count[n.NodeID]++
		switch n.NodeID {
		case "pause":
			if n.ResumeAt == nil || n.Status != message.StatusSuccess {
				t.Fatalf("wait run %+v: want success with resume_at", n)
			}
		case "call":
			if n.Attempt != 2 || n.Status != message.StatusSuccess {
				t.Fatalf("retried run %+v: want success on attempt 2", n)
			}
		case "double":
			if n.Branch == "" {
				t.Fatalf("split branch run without a branch key: %+v", n)
			}
		}
	}
	if count["double"] != 3 || count["agg"] != 1 || count["pause"] != 1 || count["call"] != 1 {
		t.Fatalf("node runs %v, want double ×3 (one per branch), agg, pause and call once", count)
	}
	if done.Attempts != 2 {
		t.Fatalf("attempts %d, want 2 (the retried node's)", done.Attempts)
	}
	if len(done.Splits) != 1 || done.Splits[0].Total != 3 || done.Splits[0].Done != 3 {
		t.Fatalf("splits %+v, want each: 3 of 3 done", done.Splits)
	}
}

func testIdempotency(t *testing.T, a *api, id string) {
	a.pushWorkflow(wfDef(id, `{"id":"s","type":"set","parameters":{"values":{"v":"{{ $trigger.n }}"}}}`, `{"id":"e1","src":"start","dst":"s"}`))
	first := a.trigger(id, `{"n":1}`, "Idempotency-Key", "order-42")
	var again execution
	// The same request again (spacing aside) gets the first execution back.
	a.want(http.StatusOK, "POST", "/v1/workflows/"+id+"/executions", []byte(`{ "n": 1 }`), &again, "Idempotency-Key", "order-42")
	if again.ID != first.ID {
		t.Fatalf("repeated key gave execution %s, want %s", again.ID, first.ID)
	}
	// Another body, or another version, under the same key is refused.
	e := a.wantError(http.StatusUnprocessableEntity, server.CodeIdempotencyKeyReused, "POST", "/v1/workflows/"+id+"/executions", []byte(`{"n":2}`), "Idempotency-Key", "order-42")
	if !strings.Contains(e.Error.Message, first.ID) {
		t.Fatalf("reused key: %q, want it to name execution %s", e.Error.Message, first.ID)
	}
	a.want(http.StatusOK, "PUT", "/v1/workflows/"+id, []byte(wfDef(id, `{"id":"s","type":"set","parameters":{"values":{"v":"x{{ $trigger.n }}"}}}`, `{"id":"e1","src":"start","dst":"s"}`)), nil)
	a.wantError(http.StatusUnprocessableEntity, server.CodeIdempotencyKeyReused, "POST", "/v1/workflows/"+id+"/executions?version=2", []byte(`{"n":1}`), "Idempotency-Key", "order-42")
	other := a.trigger(id, `{"n":3}`, "Idempotency-Key", "order-43")
	if other.ID == first.ID {
		t.Fatal("a different key gave the same execution")
	}
	var page struct {
		Items []execution `json:"items"`
	}
	a.want(http.StatusOK, "GET", "/v1/executions?workflow_id="+id, nil, &page)
	if len(page.Items) != 2 {
		t.Fatalf("%d executions, want 2 (the repeated key made none)", len(page.Items))
	}
	done := a.waitStatus(first.ID, "completed")
	if !bytes.Contains(done.Completion, []byte(`"v":1`)) {
		t.Fatalf("completion %s, want the first payload's", done.Completion)
	}
}

func testListExecutions(t *testing.T, a *api, id string) {
	a.pushWorkflow(wfDef(id, `{"id":"s","type":"set","parameters":{"values":{"v":1}}}`, `{"id":"e1","src":"start","dst":"s"}`))
	var ids []string
	for range 5 {
		ids = append(ids, a.trigger(id, `{}`).ID)
	}
	var lx execution
	at := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	a.want(http.StatusCreated, "POST", "/v1/workflows/"+id+"/executions?start_at="+at, []byte(`{}`), &lx)
	later := lx.ID
	a.want(http.StatusAccepted, "POST", "/v1/executions/"+later+"/cancel", nil, nil)
	for _, x := range ids {
		a.waitStatus(x, "completed")
	}
	var seen []string
	cursor := ""
	for pages := 0; ; pages++ {
		var page struct {
			Items      []execution `json:"items"`
			NextCursor string      `json:"next_cursor"`
		}
		a.want(http.StatusOK, "GET", "/v1/executions?workflow_id="+id+"&status=completed&limit=2&cursor="+cursor, nil, &page)
		if len(page.Items) > 2 {
			t.Fatalf("page of %d, want at most 2", len(page.Items))
		}
		for _, x := range page.Items {
			if x.Status != "completed" || x.WorkflowID != id {
				t.Fatalf("listed %+v, want completed of %s", x, id)
			}
			seen = append(seen, x.ID)
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
		if pages > 10 {
			t.Fatal("pagination does not end")
		}
	}
	want := slices.Clone(ids)
	slices.Reverse(want) // newest first
	if !slices.Equal(seen, want) {
		t.Fatalf("listed %v, want %v (newest first, each once)", seen, want)
	}
	var page struct {
		Items []execution `json:"items"`
	}
	a.want(http.StatusOK, "GET", "/v1/executions?workflow_id="+id+"&status=cancelled", nil, &page)
	if len(page.Items) != 1 || page.Items[0].ID != later {
		t.Fatalf("cancelled: %+v, want %s", page.Items, later)
	}
	a.want(http.StatusOK, "GET", "/v1/executions?workflow_id="+id+"&created_after="+time.Now().Add(time.Hour).UTC().Format(time.RFC3339), nil, &page)
	if len(page.Items) != 0 {
		t.Fatalf("created_after an hour ahead listed %d", len(page.Items))
	}
}

// testNodeFailure: a node whose retries are exhausted, under the halt
// strategy, ends its execution failed (RFC 001 §9.1, seed 003 §4.3): the
// status, the completion's failure_reason, ?status=failed; halted lists
// none of it.
func testNodeFailure(t *testing.T, a *api, id string) {
	var calls atomic.Int32
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer down.Close()
	a.pushWorkflow(wfDef(id, `{"id":"call","type":"http","parameters":{"method":"GET","url":"`+down.URL+`/x"},"retry":{"max_attempts":2,"initial_delay":"100ms"}},
		{"id":"after","type":"set","parameters":{"values":{"v":1}}}`,
		`{"id":"e1","src":"start","dst":"call"},{"id":"e2","src":"call","dst":"after"}`))
	x := a.trigger(id, `{}`)
	done := a.waitStatus(x.ID, "completed", "failed", "halted", "cancelled")
	var comp message.Completion
	if err := json.Unmarshal(done.Completion, &comp); err != nil || done.Status != "failed" || comp.Status != message.CompletionFailed ||
		comp.FailureReason == nil || comp.FailureReason.NodeID != "call" || comp.FailureReason.Code != "HTTP_STATUS" {
		t.Fatalf("status %s, completion %s; want failed by call with HTTP_STATUS", done.Status, done.Completion)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("the service was called %d times, want 2 (max_attempts)", n)
	}
	for status, want := range map[string]int{"failed": 1, "halted": 0} {
		var page struct {
			Items []execution `json:"items"`
		}
		a.want(http.StatusOK, "GET", "/v1/executions?workflow_id="+id+"&status="+status, nil, &page)
		if len(page.Items) != want {
			t.Fatalf("?status=%s lists %d, want %d", status, len(page.Items), want)
		}
	}
}

// testCancel: a running execution with a branch in a 10-minute wait and a
// branch stepping through delays is cancelled: the wait is woken and
// dropped, the other branch stops at its next node, and the execution
// shows cancelled with a halted completion, within seconds.
func testCancel(t *testing.T, a *api, id string) {
	a.pushWorkflow(wfDef(id, `
		{"id":"pause","type":"wait","parameters":{"amount":600}},
		{"id":"after","type":"set","parameters":{"values":{"v":1}}},
		{"id":"d1","type":"delay","parameters":{"delayMs":3000}},
		{"id":"d2","type":"delay","parameters":{"delayMs":3000}},
		{"id":"d3","type":"delay","parameters":{"delayMs":3000}},
		{"id":"end","type":"set","parameters":{"values":{"v":2}}}`,
		`{"id":"e1","src":"start","dst":"pause"},{"id":"e2","src":"pause","dst":"after"},
		{"id":"e3","src":"start","dst":"d1"},{"id":"e4","src":"d1","dst":"d2"},{"id":"e5","src":"d2","dst":"d3"},{"id":"e6","src":"d3","dst":"end"}`))
	x := a.trigger(id, `{}`)
	a.waitFor(x.ID, "with pause waiting", func(x *execution) bool { return slices.Contains(x.Cursor, "pause") })
	start := time.Now()
	var c execution
	a.want(http.StatusAccepted, "POST", "/v1/executions/"+x.ID+"/cancel", nil, &c)
	if !c.CancelRequested {
		t.Fatalf("cancel answer %+v, want cancel_requested", c)
	}
	done := a.waitStatus(x.ID, "cancelled", "completed", "failed", "halted")
	if done.Status != "cancelled" {
		t.Fatalf("status %s, want cancelled; completion %s", done.Status, done.Completion)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("cancelled after %s: the wait was not woken", took)
	}
	var comp message.Completion
	if err := json.Unmarshal(done.Completion, &comp); err != nil || comp.Status != message.CompletionHalted ||
		comp.FailureReason == nil || comp.FailureReason.Code != "CANCELLED" {
		t.Fatalf("completion %s, want halted with CANCELLED", done.Completion)
	}
	for _, n := range done.Nodes {
		if (n.NodeID == "after" || n.NodeID == "end") && n.Status == message.StatusSuccess {
			t.Fatalf("node %s ran after the cancel", n.NodeID)
		}
	}
	a.wantError(http.StatusConflict, server.CodeConflict, "POST", "/v1/executions/"+x.ID+"/cancel", nil)
}

func testCancelEnqueued(t *testing.T, a *api, id string) {
	a.pushWorkflow(wfDef(id, `{"id":"s","type":"set","parameters":{"values":{"v":1}}}`, `{"id":"e1","src":"start","dst":"s"}`))
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	var later execution
	a.want(http.StatusCreated, "POST", "/v1/workflows/"+id+"/executions?start_at="+at.Format(time.RFC3339), []byte(`{}`), &later)
	if later.Status != "enqueued" || !later.AvailableAt.Equal(at) {
		t.Fatalf("start_at execution %+v, want enqueued available at %s", later, at)
	}
	time.Sleep(200 * time.Millisecond) // several dispatcher polls: it must stay enqueued
	var still execution
	a.want(http.StatusOK, "GET", "/v1/executions/"+later.ID, nil, &still)
	if still.Status != "enqueued" {
		t.Fatalf("an execution due in an hour is %s", still.Status)
	}
	var c execution
	a.want(http.StatusAccepted, "POST", "/v1/executions/"+later.ID+"/cancel", nil, &c)
	if c.Status != "cancelled" {
		t.Fatalf("cancel of an enqueued execution: %s, want cancelled at once", c.Status)
	}
	ch, _, cancel := a.stream("/v1/executions/"+later.ID+"/events", "")
	defer cancel()
	evs := a.collect(ch, -1) // the stream ends by itself
	if len(evs) == 0 || evs[len(evs)-1].Event != "execution" || !strings.Contains(evs[len(evs)-1].Data, `"cancelled"`) {
		t.Fatalf("stream of a cancelled execution: %+v, want it to end with the cancel", evs)
	}
}

func testRerun(t *testing.T, a *api, id string) {
	a.pushWorkflow(wfDef(id, `{"id":"s","type":"set","parameters":{"values":{"v":"{{ $trigger.n }}"}}}`, `{"id":"e1","src":"start","dst":"s"}`))
	x := a.trigger(id, `{"n": 7}`)
	a.waitStatus(x.ID, "completed")
	var r execution
	a.want(http.StatusCreated, "POST", "/v1/executions/"+x.ID+"/rerun", nil, &r)
	if r.ID == x.ID || r.Trigger != "rerun:"+x.ID || r.Version != 1 {
		t.Fatalf("rerun %+v", r)
	}
	done := a.waitStatus(r.ID, "completed")
	if !bytes.Contains(done.Completion, []byte(`"v":7`)) {
		t.Fatalf("rerun completion %s, want the same input", done.Completion)
	}
	// Not finished: 409.
	slow := id + "_slow"
	a.pushWorkflow(wfDef(slow, `{"id":"p","type":"wait","parameters":{"amount":600}}`, `{"id":"e1","src":"start","dst":"p"}`))
	y := a.trigger(slow, `{}`)
	a.wantError(http.StatusConflict, server.CodeConflict, "POST", "/v1/executions/"+y.ID+"/rerun", nil)
	a.want(http.StatusAccepted, "POST", "/v1/executions/"+y.ID+"/cancel", nil, nil)
	a.waitStatus(y.ID, "cancelled")
}

// testStream: the per-execution stream gives the history then live events
// up to the completion and ends; a reconnect with Last-Event-ID resumes
// with neither gap nor duplicate; /v1/events carries the same events.
func testStream(t *testing.T, a *api, id string) {
	a.pushWorkflow(wfDef(id, `
		{"id":"a","type":"set","parameters":{"values":{"v":1}}},
		{"id":"p","type":"delay","parameters":{"delayMs":500}},
		{"id":"b","type":"set","parameters":{"values":{"v":2}}}`,
		`{"id":"e1","src":"start","dst":"a"},{"id":"e2","src":"a","dst":"p"},{"id":"e3","src":"p","dst":"b"}`))
	// Start following every execution's events from now.
	allCh, _, cancelAll := a.stream("/v1/events", "")
	defer cancelAll()

	x := a.trigger(id, `{}`)
	ch, resp, cancel := a.stream("/v1/executions/"+x.ID+"/events", "")
	for k, want := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"} {
		if got := resp.Header.Get(k); got != want {
			t.Fatalf("header %s: %q, want %q", k, got, want)
		}
	}
	first := a.collect(ch, 3)
	cancel() // drop the connection mid-run
	ch2, _, cancel2 := a.stream("/v1/executions/"+x.ID+"/events", first[len(first)-1].ID)
	defer cancel2()
	rest := a.collect(ch2, -1) // ends after the completion
	evs := append(first, rest...)
	// It ended (collect returned) after the completion; a status published
	// before the completion may be committed just after it (another queue).
	if n := countEvents(evs, "completion"); n != 1 {
		t.Fatalf("%d completions in the stream, want 1: %+v", n, evs)
	}
	prev := int64(0)
	statuses := map[string]int{}
	for _, ev := range evs {
		n, err := strconv.ParseInt(ev.ID, 10, 64)
		if err != nil || n <= prev {
			t.Fatalf("event ids not ascending without duplicates at %q (previous %d): %+v", ev.ID, prev, evs)
		}
		prev = n
		if ev.Event == "status" {
			var st message.NodeStatus
			if err := json.Unmarshal([]byte(ev.Data), &st); err != nil {
				t.Fatal(err)
			}
			statuses[st.NodeID+"/"+st.Status]++
		}
	}
	for _, k := range []string{"start/success", "a/success", "p/success", "b/success"} {
		if statuses[k] != 1 {
			t.Fatalf("status %s seen %d times over the reconnect, want once: %v", k, statuses[k], statuses)
		}
	}
	// A stream opened after the end replays everything and ends.
	replay := a.collect(func() <-chan sseEvent { c, _, _ := a.stream("/v1/executions/"+x.ID+"/events", ""); return c }(), -1)
	if len(replay) != len(evs) {
		t.Fatalf("replay has %d events, the live stream had %d", len(replay), len(evs))
	}
	// The global stream carried this execution's events too.
	got := 0
	timeout := time.After(60 * time.Second)
	for got < len(evs) {
		select {
		case ev, ok := <-allCh:
			if !ok {
				t.Fatal("/v1/events ended")
			}
			if strings.Contains(ev.Data, x.ID) {
				got++
			}
		case <-timeout:
			t.Fatalf("/v1/events: %d of this execution's %d events after 60 s", got, len(evs))
		}
	}
}

// testCredentials: a stored credential is used by an http node, and its
// value, in any of its forms (runtimetest.SecretForms: as is, base64,
// URL-escaped), never appears in an API response, the event stream (every
// status and completion), the server's and workers' logs, or, on the
// distributed target, any message published on the broker during the run
// (node messages, statuses, completions, timers), read raw off RabbitMQ's
// firehose.
func testCredentials(t *testing.T, a *api, id string) {
	// "/" and "+" give the secret URL-escaped forms of its own.
	const secret = "s3cr3t/value+4f9a"
	forms := runtimetest.SecretForms(secret)
	var sawAuth atomic.Bool
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer "+secret {
			sawAuth.Store(true)
		}
		// Echo the headers back, as a careless API might: the body lands in
		// the node's output, and so in the messages that carry the context
		// on, unless the node keeps credentials out of it.
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"ok": true, "headers": r.Header})
	}))
	defer api.Close()
	name := "cred_" + id
	var c struct {
		Name  string `json:"name"`
		Type  string `json:"type"`
		KeyID string `json:"key_id"`
	}
	a.want(http.StatusCreated, "POST", "/v1/credentials", []byte(`{"name":"`+name+`","type":"bearer","value":{"token":"`+secret+`"}}`), &c)
	if c.Name != name || c.Type != "bearer" || c.KeyID == "" {
		t.Fatalf("created %+v", c)
	}
	a.wantError(http.StatusBadRequest, server.CodeInvalidRequest, "POST", "/v1/credentials", []byte(`{"name":"","type":"bearer","value":{"token":"`+secret+`"}}`))
	a.wantError(http.StatusBadRequest, server.CodeInvalidJSON, "POST", "/v1/credentials", []byte(`{"name":"x","type":"bearer","value":{"token":1234}, "`+secret+`": 1}`))
	var list struct {
		Items []map[string]any `json:"items"`
	}
	a.want(http.StatusOK, "GET", "/v1/credentials", nil, &list)
	found := false
	for _, it := range list.Items {
		if it["name"] == name {
			found = true
			if _, ok := it["value"]; ok {
				t.Fatalf("listed credential has a value: %v", it)
			}
		}
	}
	if !found {
		t.Fatalf("credential %s not listed: %v", name, list.Items)
	}
	// A node that uses it, a wait (a timer), and a node whose URL is wrong,
	// retried once (a delayed message) and then its error recorded.
	a.pushWorkflow(wfDef(id, `
		{"id":"call","type":"http","parameters":{"method":"GET","url":"`+api.URL+`/x"},"credentials":{"ref":"`+name+`"}},
		{"id":"pause","type":"wait","parameters":{"amount":1}},
		{"id":"bad","type":"http","parameters":{"method":"GET","url":"http://127.0.0.1:9/x","timeout":"1s"},"credentials":{"ref":"`+name+`"},"retry":{"max_attempts":2,"initial_delay":"200ms"},"error":{"type":"ignore"}}`,
		`{"id":"e1","src":"start","dst":"call"},{"id":"e2","src":"call","dst":"pause"},{"id":"e3","src":"pause","dst":"bad"}`))
	// The spy reads from before the trigger to the completion's copy.
	var spy *testinfra.Spy
	if a.tg.spy != nil {
		spy = a.tg.spy(t)
	}
	x := a.trigger(id, `{}`)
	ch, _, cancel := a.stream("/v1/executions/"+x.ID+"/events", "")
	defer cancel()
	a.collect(ch, -1)
	done := a.waitStatus(x.ID, "completed", "failed", "halted")
	if done.Status != "completed" || !sawAuth.Load() {
		t.Fatalf("status %s (completion %s), credential used: %v; want completed with the stored token sent", done.Status, done.Completion, sawAuth.Load())
	}
	if !strings.Contains(string(done.Completion), "[redacted]") {
		t.Fatalf("completion %s: want the echoed Authorization header, redacted, in call's output", done.Completion)
	}
	if spy != nil {
		checkWire(t, spy, x.ID, forms)
	}
	a.want(http.StatusNoContent, "DELETE", "/v1/credentials/"+name, nil, nil)
	a.wantError(http.StatusNotFound, server.CodeNotFound, "DELETE", "/v1/credentials/"+name, nil)
	a.mu.Lock()
	bodies := a.bodies.String()
	a.mu.Unlock()
	if f := runtimetest.FindSecret([]byte(bodies), forms); f != "" {
		t.Fatalf("the credential's value appears in an API response or event (as %q)", f)
	}
	if a.tg.output != nil {
		if f := runtimetest.FindSecret([]byte(a.tg.output()), forms); f != "" {
			t.Fatalf("the credential's value appears in the logs (as %q)", f)
		}
	}
	// Stored encrypted: the ciphertext does not hold it either (checked
	// before the delete through a second credential).
	a.want(http.StatusCreated, "POST", "/v1/credentials", []byte(`{"name":"`+name+`2","type":"bearer","value":{"token":"`+secret+`"}}`), nil)
	stored, err := a.tg.store.GetCredential(context.Background(), name+"2")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(stored.Ciphertext, []byte(secret)) || stored.KeyID != c.KeyID {
		t.Fatalf("stored credential: plaintext in ciphertext or key id %q != %q", stored.KeyID, c.KeyID)
	}
}

// checkWire reads spy until the completion of execution xid has been
// published, then fails t if any form of the secret is in a message, or if
// the spy did not see the execution's node messages, statuses and
// completion (it would then prove nothing).
func checkWire(t *testing.T, spy *testinfra.Spy, xid string, forms []string) {
	t.Helper()
	isCompletion := func(d amqp091.Delivery) bool {
		return strings.HasSuffix(d.RoutingKey, "workflow.events") && bytes.Contains(d.Body, []byte(`"final_context"`)) && bytes.Contains(d.Body, []byte(xid))
	}
	if !spy.Until(60*time.Second, isCompletion) {
		t.Fatalf("execution %s: its completion never showed on the wire (%d messages seen)", xid, spy.Len())
	}
	wire := spy.Wire()
	if f := runtimetest.FindSecret(wire, forms); f != "" {
		i := bytes.Index(wire, []byte(f))
		t.Fatalf("a published message holds the credential's value (as %q): …%s…", f, wire[max(0, i-200):min(len(wire), i+100)])
	}
	// The execution's own traffic, per exchange (the trace's routing key
	// is publish.<exchange>).
	per := map[string]int{}
	for line := range bytes.Lines(wire) {
		if rk, _, ok := bytes.Cut(line, []byte(" ")); ok && bytes.Contains(line, []byte(xid)) {
			per[string(rk)]++
		}
	}
	t.Logf("the spy read %d published messages (%d KiB); this execution's per exchange: %v", spy.Len(), len(wire)>>10, per)
	execution, events := 0, 0
	for rk, n := range per {
		switch {
		case strings.HasSuffix(rk, "workflow.execution.x"):
			execution += n
		case strings.HasSuffix(rk, "workflow.events"):
			events += n
		}
	}
	// call, pause and bad twice: their messages, a status each and the
	// completion, and the echoed, redacted header carried on in the context.
	if execution < 4 || events < 5 || !bytes.Contains(wire, []byte("[redacted]")) {
		t.Fatalf("the spy saw %d node messages and %d statuses/completions of %s (redacted header seen: %v): not this run's traffic",
			execution, events, xid, bytes.Contains(wire, []byte("[redacted]")))
	}
}

func countEvents(evs []sseEvent, kind string) int {
	n := 0
	for _, ev := range evs {
		if ev.Event == kind {
			n++
		}
	}
	return n
}
