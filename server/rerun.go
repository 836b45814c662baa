package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/rune-org/rune/client"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/workflow"
)

// Re-run from a node (issue 34): POST /v1/executions/{id}/rerun with
// {"from_node": …, "context": …?} enqueues a new execution (trigger
// rerun:<id>) that the dispatcher starts at from_node (engine.StartAt)
// with the context that node saw in the original run, or the one given.

// rerunRequest is the body of a re-run; an empty body re-runs from the trigger.
type rerunRequest struct {
	FromNode string          `json:"from_node"`
	Context  json.RawMessage `json:"context,omitempty"`
}

// rerunFrom reads a re-run's body; ok is false for a re-run from the start
// (no body, or no from_node).
func (s *Server) rerunFrom(r *http.Request) (req rerunRequest, ok bool, err error) {
	body, err := readBody(r, s.cfg.MaxTrigger)
	if err != nil || len(strings.TrimSpace(string(body))) == 0 {
		return req, false, err
	}
	if err := decodeJSON(body, &req); err != nil {
		return req, false, err
	}
	if req.FromNode == "" {
		if len(req.Context) > 0 {
			return req, false, unprocessableAt("context", "context goes with from_node: a re-run from the start takes the original input")
		}
		return req, false, nil
	}
	return req, true, nil
}

func unprocessableAt(path, format string, args ...any) *apiError {
	msg := fmt.Sprintf(format, args...)
	return &apiError{Status: http.StatusUnprocessableEntity, Code: CodeInvalidRequest, Message: msg,
		Problems: []workflow.Problem{{Path: path, Message: msg}}}
}

// rerunFromNode enqueues the re-run of finished execution x from req.FromNode.
func (s *Server) rerunFromNode(w http.ResponseWriter, r *http.Request, x *store.Execution, req rerunRequest) error {
	ctx := r.Context()
	wf, err := s.compiledVersion(ctx, x.WorkflowID, x.Version)
	if err != nil {
		return err
	}
	if err := wf.CheckStartAt(req.FromNode); err != nil {
		return unprocessableAt("from_node", "%v", err)
	}
	acc, err := s.rerunContext(ctx, x, wf, req)
	if err != nil {
		return err
	}
	body, err := json.Marshal(acc)
	if err != nil {
		return err
	}
	now := s.cfg.Now()
	id := engine.NewExecutionID(now)
	// The start is stored before its execution, so a dispatcher that claims
	// the execution always finds it.
	if err := s.store.PutRerunStart(ctx, &store.RerunStart{ExecutionID: id, SourceID: x.ID, FromNode: req.FromNode,
		Context: body, CreatedAt: now}); err != nil {
		return err
	}
	input := x.Input
	if t, ok := acc["$trigger"]; ok {
		if input, err = json.Marshal(t); err != nil {
			return err
		}
	}
	nx, _, err := s.store.CreateExecution(ctx, store.ExecutionInput{
		ID: id, WorkflowID: x.WorkflowID, Version: x.Version, Input: input, Trigger: "rerun:" + x.ID, At: now,
	})
	if err != nil {
		return err
	}
	s.wakeDispatcher()
	writeCreated(w, "/v1/executions/"+url.PathEscape(nx.ID), viewExecution(nx))
	return nil
}

// compiledVersion compiles a stored workflow version.
func (s *Server) compiledVersion(ctx context.Context, id string, version int) (*engine.Workflow, error) {
	stored, err := s.store.GetWorkflow(ctx, id, version)
	if errors.Is(err, store.ErrNotFound) {
		return nil, workflowNotFound(id, version)
	}
	if err != nil {
		return nil, err
	}
	wf, err := s.cfg.Engine.Compile(stored.Definition)
	if err != nil {
		return nil, errorf(http.StatusUnprocessableEntity, CodeInvalidWorkflow, "workflow %s version %d does not compile on this server: %v", id, version, err)
	}
	return wf, nil
}

// rerunContext is the context a re-run starts with: req.Context when given
// (a JSON object within the input policy), else the one req.FromNode saw
// in x, rebuilt from x's history.
func (s *Server) rerunContext(ctx context.Context, x *store.Execution, wf *engine.Workflow, req rerunRequest) (map[string]any, error) {
	if len(req.Context) > 0 {
		if err := message.CheckJSON("context", req.Context); err != nil {
			var pe *message.PolicyError
			if errors.As(err, &pe) {
				return nil, unprocessableAt(pe.Path, "the context breaks the input policy: %s", pe.Error())
			}
			return nil, err
		}
		var acc map[string]any
		if err := json.Unmarshal(req.Context, &acc); err != nil || acc == nil {
			return nil, unprocessableAt("context", "context must be a JSON object of context keys (\"$trigger\", \"$<node id>\")")
		}
		return acc, nil
	}
	acc, err := s.recordedContext(ctx, x, wf, req.FromNode)
	if err != nil {
		return nil, err
	}
	return acc, nil
}

// recordedContext rebuilds the context node from saw in execution x: its
// trigger payload and its upstream nodes' recorded outputs. A node that
// never ran in x has no recorded context (422: give one).
func (s *Server) recordedContext(ctx context.Context, x *store.Execution, wf *engine.Workflow, from string) (map[string]any, error) {
	runs, err := s.store.NodeRuns(ctx, x.ID)
	if err != nil {
		return nil, err
	}
	ran := false
	outputs := map[string]any{}
	for _, n := range runs {
		if n.Branch != "" {
			continue // inside a split: not a context of a node outside it
		}
		if n.NodeID == from {
			ran = true
		}
		if n.Status == message.StatusSuccess && len(n.Output) > 0 {
			var v any
			if err := json.Unmarshal(n.Output, &v); err != nil {
				return nil, fmt.Errorf("execution %s: recorded output of node %s: %w", x.ID, n.NodeID, err)
			}
			outputs[n.NodeID] = v
		}
	}
	if !ran {
		return nil, unprocessableAt("from_node", "from_node %q did not run in execution %s (or its history was pruned), so there is no context to start it with: give one in \"context\"", from, x.ID)
	}
	var input any
	if len(x.Input) > 0 {
		if err := json.Unmarshal(x.Input, &input); err != nil {
			return nil, fmt.Errorf("execution %s: stored input: %w", x.ID, err)
		}
	}
	return wf.ContextAt(from, input, outputs), nil
}

// RecordedContext is the context node from saw in execution id, as a re-run
// from it would start with (for the console's form).
func (s *Server) RecordedContext(ctx context.Context, id, from string) (map[string]any, error) {
	x, err := s.store.GetExecution(ctx, id)
	if err != nil {
		return nil, err
	}
	wf, err := s.compiledVersion(ctx, x.WorkflowID, x.Version)
	if err != nil {
		return nil, err
	}
	if err := wf.CheckStartAt(from); err != nil {
		return nil, err
	}
	return s.recordedContext(ctx, x, wf, from)
}

// dispatchRerun publishes the first message of a re-run from a node; handled
// is false when x starts at its trigger (no re-run start is stored).
func (d *dispatcher) dispatchRerun(ctx context.Context, x *store.Execution, wf *engine.Workflow) (handled, ok bool, err error) {
	rs, err := d.store.GetRerunStart(ctx, x.ID)
	if errors.Is(err, store.ErrNotFound) {
		return false, false, nil
	}
	if err != nil {
		return true, false, err
	}
	var acc map[string]any
	if err := json.Unmarshal(rs.Context, &acc); err != nil {
		return true, false, d.endUndispatched(ctx, x, message.CompletionFailed, message.Failure{Error: message.Error{Code: CodeStartRefused,
			Message: "the stored re-run context is not a JSON object"}})
	}
	err = client.StartAt(ctx, d.broker, d.engine, wf, x.ID, rs.FromNode, acc)
	if errors.Is(err, engine.ErrInvalid) {
		return true, false, d.endUndispatched(ctx, x, message.CompletionFailed, refusedStart(err))
	}
	return true, err == nil, err
}
