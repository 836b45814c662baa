package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/server"
	"github.com/rune-org/rune/store"
)

// nested is a JSON object nested depth levels deep: {"a":{"a":…{}…}}.
func nested(depth int) string {
	return strings.Repeat(`{"a":`, depth-1) + `{}` + strings.Repeat(`}`, depth-1)
}

// TestInputRefusedAtTheDoor: an input the engine would refuse (nested
// deeper than message.MaxDepth, an unpaired surrogate) is refused where it
// enters — the API's trigger, a webhook (no token needed), a schedule's
// input, a re-run — with 422 naming the path, and is never enqueued; one
// that reached the store another way is ended failed by the dispatcher,
// once, instead of being dispatched again after every lease.
func TestInputRefusedAtTheDoor(t *testing.T) {
	t.Parallel()
	eachStore(t, testInputRefused)
}

func testInputRefused(t *testing.T, tg *target) {
	a := newAPI(t, tg)
	wf := "guarded"
	a.pushWorkflow(wfDef(wf, `{"id":"s","type":"set","parameters":{"values":{"v":1}}}`, `{"id":"e1","src":"start","dst":"s"}`))
	deepPath := "input" + strings.Repeat(".a", message.MaxDepth)
	refused := func(what string, e errorBody, path, problem string) {
		t.Helper()
		if len(e.Error.Problems) != 1 || e.Error.Problems[0].Path != path || !strings.Contains(e.Error.Problems[0].Message, problem) ||
			!strings.Contains(e.Error.Message, path) {
			t.Fatalf("%s: %+v, want one problem at %s (%s), named in the message", what, e.Error, path, problem)
		}
	}
	// The API: 70 levels, and an unpaired surrogate escape.
	e := a.wantError(http.StatusUnprocessableEntity, server.CodeInvalidInput, "POST", "/v1/workflows/"+wf+"/executions", []byte(nested(70)))
	refused("trigger 70 deep", e, deepPath, "deeper than 64")
	e = a.wantError(http.StatusUnprocessableEntity, server.CodeInvalidInput, "POST", "/v1/workflows/"+wf+"/executions", []byte(`{"name":"\ud800"}`))
	refused("trigger with a lone surrogate", e, "input.name", "surrogate")
	// At the limit it is accepted and runs.
	ok := a.trigger(wf, nested(message.MaxDepth))
	a.waitStatus(ok.ID, "completed")

	// A webhook: the body sits in $trigger.body, one level down.
	var hk hookView
	a.want(http.StatusCreated, "POST", "/v1/workflows/"+wf+"/hooks", []byte(`{"name":"open"}`), &hk)
	r := a.deliver(hk.URL, nested(message.MaxDepth))
	var he errorBody
	r.decode(t, &he)
	if r.status != http.StatusUnprocessableEntity || he.Error.Code != server.CodeInvalidInput {
		t.Fatalf("webhook 64 deep: %d %s, want 422 invalid_input", r.status, r.body)
	}
	refused("webhook", he, "input.body"+strings.Repeat(".a", message.MaxDepth-1), "deeper than 64")

	// A schedule's input: $trigger.input.
	e = a.wantError(http.StatusUnprocessableEntity, server.CodeInvalidInput, "POST", "/v1/workflows/"+wf+"/schedules",
		[]byte(`{"cron":"@every 1h","input":`+nested(message.MaxDepth)+`}`))
	refused("schedule", e, "input.input"+strings.Repeat(".a", message.MaxDepth-1), "deeper than 64")

	// Nothing refused was enqueued: the one execution is the accepted one.
	if xs := a.executionsOf(wf); len(xs) != 1 || xs[0].ID != ok.ID {
		t.Fatalf("executions %+v, want only %s", xs, ok.ID)
	}

	// An input in the store that the engine refuses (enqueued before the
	// check, or by another way in): the dispatcher ends it failed at once
	// rather than claiming it again every lease (30 s) for ever.
	ctx := context.Background()
	now := time.Now()
	bad, _, err := tg.store.CreateExecution(ctx, store.ExecutionInput{ID: engine.NewExecutionID(now), WorkflowID: wf,
		Input: json.RawMessage(nested(70)), Trigger: "api", At: now})
	if err != nil {
		t.Fatal(err)
	}
	a.want(http.StatusCreated, "POST", "/v1/workflows/"+wf+"/executions", []byte(`{}`), nil) // wakes the dispatcher
	done := a.waitStatus(bad.ID, "failed", "completed", "halted", "cancelled")
	var comp message.Completion
	if err := json.Unmarshal(done.Completion, &comp); err != nil || done.Status != "failed" || comp.FailureReason == nil ||
		comp.FailureReason.Code != server.CodeInputRefused || !strings.Contains(comp.FailureReason.Message, deepPath) {
		t.Fatalf("stored bad input: status %s, completion %s; want failed with %s naming %s", done.Status, done.Completion, server.CodeInputRefused, deepPath)
	}
	// Its re-run is refused at the door too.
	e = a.wantError(http.StatusUnprocessableEntity, server.CodeInvalidInput, "POST", "/v1/executions/"+bad.ID+"/rerun", nil)
	refused("re-run", e, deepPath, "deeper than 64")
}
