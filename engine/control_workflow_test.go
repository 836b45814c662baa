package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	coordmem "github.com/rune-org/rune/coord/memory"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/message"
)

const parentDef = `{"id":"parent","nodes":[
	{"id":"start","type":"trigger","trigger":true},
	{"id":"call","type":"workflow","parameters":{"workflow_id":"child","input":{"n":"{{ $trigger.n }}"}}},
	{"id":"after","type":"set","parameters":{"values":{"got":"{{ $call.final_context.v }}"}}}],
	"edges":[{"id":"e1","src":"start","dst":"call"},{"id":"e2","src":"call","dst":"after"}]}`

func childHarness(t *testing.T) *harness {
	return newHarnessWith(t, parentDef, func(c *engine.Config) { c.ChildResults = coordmem.NewEffects(0) })
}

// childStarts returns the start requests of the waiting statuses.
func (h *harness) childStarts() []*message.ChildStart {
	var out []*message.ChildStart
	for _, s := range h.status {
		if s.Status == message.StatusWaiting && s.Child != nil {
			out = append(out, s.Child)
		}
	}
	return out
}

// TestWorkflowNodeRedeliveredAsksForOneChild: the node parks and asks for
// its child on the waiting status; a redelivery of its message asks for
// the same child id (the runtime starts it once); the delivered end
// resumes it once, with the child's final context.
func TestWorkflowNodeRedeliveredAsksForOneChild(t *testing.T) {
	h := childHarness(t)
	h.start(map[string]any{"n": 2.0})
	msg := h.queue[0].Msg
	h.step(0)
	// The redelivery: the same message again, as a broker gives it.
	var f engine.Effects
	if err := h.eng.Handle(context.Background(), engine.Delivery{Redelivered: true}, msg, &f); err != nil {
		t.Fatal(err)
	}
	h.absorb(&f)
	starts := h.childStarts()
	if len(starts) != 2 || starts[0].ExecutionID != starts[1].ExecutionID || !strings.HasPrefix(starts[0].ExecutionID, engine.ChildIDPrefix) ||
		starts[0].WorkflowID != "child" || !starts[0].Wait || starts[0].Wake == "" {
		t.Fatalf("child starts %+v, want the same child asked for twice", starts)
	}
	if in, _ := starts[0].Input.(map[string]any); in["n"] != 2.0 {
		t.Fatalf("child input %v, want n 2", starts[0].Input)
	}
	if len(h.queue) != 0 || len(h.done) != 0 {
		t.Fatalf("the parked branch went on: %d messages, %d completions", len(h.queue), len(h.done))
	}
	if got := h.fireTimers(time.Now()); len(got) != 0 {
		t.Fatalf("the parent resumed before its child ended: %v", got)
	}
	end := engine.ChildEnd{ExecutionID: starts[0].ExecutionID, Status: "completed", FinalContext: map[string]any{"v": "ok"}}
	for range 2 { // delivered twice: the first end stays
		if err := h.eng.DeliverChild(context.Background(), starts[0].Wake, end); err != nil {
			t.Fatal(err)
		}
	}
	if got := h.fireTimers(time.Now()); len(got) != 1 {
		t.Fatalf("%d timers fired after the child's end, want 1", len(got))
	}
	h.drain()
	c := h.completion()
	call, _ := c.FinalContext["$call"].(map[string]any)
	after, _ := c.FinalContext["$after"].(map[string]any)
	if c.Status != message.CompletionCompleted || call["execution_id"] != starts[0].ExecutionID || after["got"] != "ok" {
		t.Fatalf("completion %+v, want completed with the child's final context", c)
	}
}

// TestWorkflowNodeChildFailed: a failed child fails the node with
// CHILD_FAILED and its failure_reason; a refused one (no node of it ran)
// with the refusal's code. A refusal further down (a grandchild refused,
// so a node of the child failed with it) is the child's failure.
func TestWorkflowNodeChildFailed(t *testing.T) {
	for _, tc := range []struct{ node, code, want string }{
		{"x", "EXPRESSION", engine.CodeChildFailed},
		{"", engine.CodeChildDepth, engine.CodeChildDepth},
		{"x", engine.CodeChildDepth, engine.CodeChildFailed},
	} {
		h := childHarness(t)
		h.start(map[string]any{"n": 1.0})
		h.drain()
		st := h.childStarts()[0]
		f := &message.Failure{NodeID: tc.node, Error: message.Error{Code: tc.code, Message: "boom"}}
		if err := h.eng.DeliverChild(context.Background(), st.Wake, engine.ChildEnd{ExecutionID: st.ExecutionID, Status: "failed", FailureReason: f}); err != nil {
			t.Fatal(err)
		}
		h.fireTimers(time.Now())
		h.drain()
		c := h.completion()
		if c.Status != message.CompletionFailed || c.FailureReason == nil || c.FailureReason.Code != tc.want || c.FailureReason.Details["failure_reason"] == nil {
			t.Fatalf("child failed with %s at node %q: completion %+v, want failed with %s and the child's reason", tc.code, tc.node, c.FailureReason, tc.want)
		}
	}
}

// TestWorkflowNodeWithoutChildren: a runtime that cannot start children
// fails the node with UNSUPPORTED_NODE rather than waiting forever.
func TestWorkflowNodeWithoutChildren(t *testing.T) {
	h := newHarness(t, parentDef)
	h.start(map[string]any{"n": 1.0})
	h.drain()
	c := h.completion()
	if c.FailureReason == nil || c.FailureReason.Code != "UNSUPPORTED_NODE" || !strings.Contains(c.FailureReason.Message, "--workflows") {
		t.Fatalf("completion %+v, want UNSUPPORTED_NODE naming --workflows", c.FailureReason)
	}
}

// TestWorkflowNodeChecks: bad parameters are refused naming the field.
func TestWorkflowNodeChecks(t *testing.T) {
	h := childHarness(t)
	for params, want := range map[string]string{
		`{}`: "parameters.workflow_id", `{"workflow_id":"{{ $trigger.w }}"}`: "parameters.workflow_id",
		`{"workflow_id":"c","version":0}`: "parameters.version", `{"workflow_id":"c","input":3}`: "parameters.input",
		`{"workflow_id":"c","wait":"yes"}`: "parameters.wait", `{"workflow_id":"c","other":1}`: "parameters.other",
	} {
		def := `{"id":"p","nodes":[{"id":"start","type":"trigger","trigger":true},{"id":"call","type":"workflow","parameters":` + params + `}],
			"edges":[{"id":"e1","src":"start","dst":"call"}]}`
		_, err := h.eng.Compile([]byte(def))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a problem at %s", params, err, want)
		}
	}
}
