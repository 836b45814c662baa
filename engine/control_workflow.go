package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/rune-org/rune/expr"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/workflow"
)

// The workflow node (issue 34): the branch starts a child execution of
// another workflow and, with wait, waits for its end. It parks like a wait,
// on a timer due far away (or at once without wait); its waiting status
// carries the start request (message.ChildStart), which the runtime that
// records statuses carries out: the server's history consumer through its
// trigger path, `rune run` from its workflows directory. The child's id is
// derived from the parent's node message id, so a redelivered node asks
// for the same child again and the runtime starts nothing new. When the
// child ends, the runtime calls DeliverChild: the end is recorded in
// Config.ChildResults under the child's id and the parent's timer woken;
// the resumed node reads it.

// WorkflowType is the node type.
const WorkflowType = "workflow"

// Error codes of the workflow node (docs/dsl.md, "workflow").
const (
	// CodeChildFailed: the child execution ended failed; the error's
	// details hold its failure_reason and execution_id.
	CodeChildFailed = "CHILD_FAILED"
	// CodeChildCancelled: the child was cancelled or halted.
	CodeChildCancelled = "CHILD_CANCELLED"
	// CodeChildDepth: starting the child would nest executions deeper
	// than MaxChildDepth.
	CodeChildDepth = "CHILD_DEPTH"
	// CodeChildCycle: the child's workflow is already running above it
	// (the parent's workflow or one of its ancestors').
	CodeChildCycle = "CHILD_CYCLE"
	// CodeChildNotFound: the child's workflow (or version) does not exist.
	CodeChildNotFound = "CHILD_NOT_FOUND"
	// CodeChildTimeout: the child did not end within the longest wait
	// (366 days).
	CodeChildTimeout = "CHILD_TIMEOUT"
	// CodeChildUnsupported: the runtime cannot start children (no
	// ChildResults).
	CodeChildUnsupported = "UNSUPPORTED_NODE"
)

// MaxChildDepth bounds the nesting of child executions: a top-level
// execution is depth 0, its children 1, and a child at depth 16 cannot
// start another.
const MaxChildDepth = 16

// ChildIDPrefix starts the execution id of every child execution, so that
// runtimes can tell a child's completion from others without a look-up.
const ChildIDPrefix = "exec_child_"

// ChildExecutionID is the id of the child execution the workflow node of
// message m starts: the same for every delivery of m.
func ChildExecutionID(m *message.NodeExecution) string {
	return ChildIDPrefix + childID(m.ExecutionID+"/"+m.MessageID, "workflow")
}

// ChildEnd is how a child execution ended, as its parent's node sees it.
type ChildEnd struct {
	ExecutionID string `json:"execution_id"`
	// Status is the child's status as the API shows it: completed,
	// failed, cancelled, halted; or failed for a child that could not
	// start (FailureReason says why: CHILD_DEPTH, CHILD_CYCLE, …).
	Status        string           `json:"status"`
	FinalContext  map[string]any   `json:"final_context"`
	FailureReason *message.Failure `json:"failure_reason,omitempty"`
}

// childResultKey is the key of a child's end in Config.ChildResults.
func childResultKey(childID string) string { return "child-end:" + childID }

// ErrNoChildren is returned by DeliverChild when the engine has no
// Config.ChildResults or no Config.Timers.
var ErrNoChildren = errors.New("engine: this runtime has no child results store")

// DeliverChild records the end of child execution end.ExecutionID for the
// parent node parked under timer wake, and wakes that timer: the parent's
// node resumes with it. Delivering again is harmless (the first end stays).
func (e *Engine) DeliverChild(ctx context.Context, wake string, end ChildEnd) error {
	if e.cfg.ChildResults == nil || e.cfg.Timers == nil {
		return ErrNoChildren
	}
	body, err := json.Marshal(end)
	if err != nil {
		return fmt.Errorf("engine: encode the end of child %s: %w", end.ExecutionID, err)
	}
	if err := e.cfg.ChildResults.Record(ctx, childResultKey(end.ExecutionID), body); err != nil {
		return fmt.Errorf("engine: record the end of child %s: %w", end.ExecutionID, err)
	}
	if wake == "" {
		return nil
	}
	if err := e.cfg.Timers.Wake(ctx, e.cfg.Now(), wake); err != nil {
		return fmt.Errorf("engine: wake the parent of child %s: %w", end.ExecutionID, err)
	}
	return nil
}

// isChildWorkflow reports the workflow node type.
func isChildWorkflow(typ string) bool { return typ == WorkflowType }

type workflowType struct{}

func (workflowType) Check(c *workflow.NodeCheck) {
	p := node.CheckParams(c, "workflow_id", "version", "input", "wait")
	if id, ok := p.String("workflow_id", true); ok {
		switch {
		case node.IsTemplate(id):
			c.Report("parameters.workflow_id", "must be a workflow id, not a template: the child is known when the workflow is saved")
		case len(id) > 200:
			c.Report("parameters.workflow_id", "is %d bytes; a workflow id takes at most 200", len(id))
		}
	}
	if v, ok := p.Values["version"]; ok {
		f, isNum := v.(float64)
		if !isNum || f < 1 || f != math.Trunc(f) || f > 1<<30 {
			c.Report("parameters.version", "must be a whole number, at least 1, got %v", v)
		}
	}
	if v, ok := p.Values["input"]; ok {
		switch x := v.(type) {
		case map[string]any:
			p.Template("parameters.input", x)
		case string:
			if !node.IsTemplate(x) {
				c.Report("parameters.input", "must be an object (its strings may hold {{ }} expressions) or a {{ }} expression")
			} else {
				p.Template("parameters.input", x)
			}
		default:
			c.Report("parameters.input", "must be an object or a {{ }} expression, not %s", expr.TypeName(v))
		}
	}
	if v, ok := p.Values["wait"]; ok {
		if _, isBool := v.(bool); !isBool {
			c.Report("parameters.wait", "must be true or false, not %s", expr.TypeName(v))
		}
	}
}

func (workflowType) Compile(n *workflow.Node, c *expr.Compiler) (node.Runner, error) {
	r := &childRunner{wait: true}
	r.workflowID, _ = n.Parameters["workflow_id"].(string)
	if f, ok := n.Parameters["version"].(float64); ok {
		r.version = int(f)
	}
	if w, ok := n.Parameters["wait"].(bool); ok {
		r.wait = w
	}
	in, ok := n.Parameters["input"]
	if !ok {
		in = map[string]any{}
	}
	v, err := c.Value(in)
	if err != nil {
		return nil, node.CompileError(n, "input", err)
	}
	r.input = v
	return r, nil
}

// childRunner evaluates the child's input; the step starts the child
// (startChild).
type childRunner struct {
	workflowID string
	version    int
	wait       bool
	input      expr.Value
}

// childInputKey holds the evaluated input in the run's record, for
// startChild.
const childInputKey = "input"

func (r *childRunner) Run(_ context.Context, in *node.Input) (node.Result, error) {
	v, err := r.input.Eval(in.Env)
	if err != nil {
		return node.Result{}, node.ExprError("input", err)
	}
	if err := message.CheckValue("input", v); err != nil {
		return node.Result{}, node.InvalidParam("input", "%v", err)
	}
	return node.Result{Output: map[string]any{childInputKey: v}}, nil
}

// startChild parks the branch and asks the runtime, on the waiting status,
// to start the child. Like suspend, it does not Finish the message: the
// resumed node does (resumeChild). A redelivery parks again (the timer and
// the park are idempotent) and asks for the same child.
func (s *step) startChild(ctx context.Context, rec *record) error {
	r := s.wf.runners[s.node.ID].(*childRunner)
	if s.e.cfg.Timers == nil || s.e.cfg.ChildResults == nil {
		return s.settle(ctx, &record{StartedAt: rec.StartedAt, FinishedAt: s.e.cfg.Now(),
			Err: &message.Error{Code: CodeChildUnsupported, Message: fmt.Sprintf("node %q starts a child execution, but this runtime cannot (rune run needs --workflows DIR)", s.node.ID)}}, unverified{})
	}
	out, _ := rec.Output.(map[string]any)
	child := &message.ChildStart{ExecutionID: ChildExecutionID(s.m), WorkflowID: r.workflowID, Version: r.version,
		Input: out[childInputKey], Wait: r.wait, Wake: TimerID(s.m)}
	due := s.e.cfg.Now()
	if r.wait {
		due = due.Add(maxWait)
	}
	frozen, err := s.e.Freeze(ctx, s.m)
	if err != nil {
		return fmt.Errorf("engine: freeze message %s: %w", s.m.MessageID, err)
	}
	if err := s.e.cfg.Timers.Schedule(ctx, child.Wake, due, frozen); err != nil {
		return fmt.Errorf("engine: schedule timer of message %s: %w", s.m.MessageID, err)
	}
	wake, err := s.e.cfg.Coord.Park(ctx, s.m.ExecutionID, child.Wake, due)
	if err != nil {
		return fmt.Errorf("engine: park message %s: %w", s.m.MessageID, err)
	}
	if wake {
		if err := s.e.cfg.Timers.Wake(ctx, s.e.cfg.Now(), child.Wake); err != nil {
			return fmt.Errorf("engine: wake timer of message %s: %w", s.m.MessageID, err)
		}
	}
	st := s.status(message.StatusWaiting, s.e.cfg.Now())
	if r.wait {
		st.ResumeAt = &due
	}
	st.Details = map[string]any{"child_execution_id": child.ExecutionID, "workflow_id": child.WorkflowID}
	st.Child = child
	s.sink.Status(ctx, st)
	return nil
}

// resumeChild ends the node: with the child's end when it waits for it,
// else at once with the child's id.
func (s *step) resumeChild(ctx context.Context) error {
	r := s.wf.runners[s.node.ID].(*childRunner)
	now := s.e.cfg.Now()
	id := ChildExecutionID(s.m)
	rec := &record{StartedAt: now, FinishedAt: now}
	if !r.wait {
		rec.Output = map[string]any{"execution_id": id, "status": "enqueued", "final_context": nil}
		return s.settle(ctx, rec, unverified{})
	}
	got, err := s.e.cfg.ChildResults.Begin(ctx, childResultKey(id))
	if err != nil {
		return fmt.Errorf("engine: read the end of child %s: %w", id, err)
	}
	if !got.Done {
		rec.Err = &message.Error{Code: CodeChildTimeout, Message: fmt.Sprintf("child execution %s did not end within %s", id, maxWait),
			Details: map[string]any{"execution_id": id}}
		return s.settle(ctx, rec, unverified{})
	}
	var end ChildEnd
	if err := json.Unmarshal(got.Result, &end); err != nil {
		return fmt.Errorf("engine: decode the end of child %s: %w", id, err)
	}
	rec.Output, rec.Err = childOutcome(&end)
	return s.settle(ctx, rec, unverified{})
}

// childOutcome is the node's output, or its error, for a child's end.
func childOutcome(end *ChildEnd) (any, *message.Error) {
	if end.Status == message.CompletionCompleted {
		fc := end.FinalContext
		if fc == nil {
			fc = map[string]any{}
		}
		return map[string]any{"execution_id": end.ExecutionID, "status": end.Status, "final_context": fc}, nil
	}
	details := map[string]any{"execution_id": end.ExecutionID, "status": end.Status}
	code, msg := CodeChildFailed, fmt.Sprintf("child execution %s ended %s", end.ExecutionID, end.Status)
	if f := end.FailureReason; f != nil {
		details["failure_reason"] = f
		switch f.Code {
		case CodeChildDepth, CodeChildCycle, CodeChildNotFound, CodeChildUnsupported:
			if f.NodeID == "" {
				// Refused before it ran (no node failed): the parent's
				// node fails with the refusal's own code.
				return nil, &message.Error{Code: f.Code, Message: f.Message, Details: details}
			}
		}
		msg += ": " + f.Code + ": " + f.Message
	}
	if end.Status != message.CompletionFailed {
		code = CodeChildCancelled
	}
	return nil, &message.Error{Code: code, Message: msg, Details: details}
}
