package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"time"

	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/workflow"
)

// The run phase: the node runs once, on its context, within its deadline;
// its result (or failure) becomes a record.

// run executes the node once. It returns an error only when ctx is done: a
// shutdown is never reported as a node failure.
func (s *step) run(ctx context.Context, now time.Time) (*record, error) {
	rec := &record{StartedAt: now}
	runner := s.wf.runners[s.node.ID]
	if runner == nil {
		rec.Err = &message.Error{Code: "UNSUPPORTED_NODE", Message: fmt.Sprintf("node type %q is not supported by this runtime", s.node.Type)}
		return rec, nil
	}
	timeout := s.node.TimeoutDuration()
	if timeout <= 0 {
		timeout = s.e.cfg.DefaultNodeTimeout
	}
	var res node.Result
	var err error
	if _, pure := runner.(node.Pure); pure {
		res, err = s.call(ctx, runner, now)
	} else {
		rctx, cancel := context.WithTimeout(ctx, timeout)
		res, err = s.call(rctx, runner, now)
		cancel()
	}
	rec.FinishedAt = s.e.cfg.Now()
	rec.DurationMS = rec.FinishedAt.Sub(now).Milliseconds()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	defer s.redactRecord(rec)
	var ie *infraError
	if errors.As(err, &ie) || errors.Is(err, ErrInvalid) {
		return nil, err // the runtime failed, not the node
	}
	if err == nil {
		rec.Output, rec.Route = res.Output, res.Route
		s.items = res.Items
		return rec, nil
	}
	var ne *node.Error
	var nd *node.Defer
	switch {
	case errors.As(err, &nd):
		// handle defers the run; any other caller fails the node.
		rec.deferral = nd
		rec.Err = &message.Error{Code: "UNSUPPORTED_NODE", Message: fmt.Sprintf("node %q must wait (%s), but it cannot be deferred here", s.node.ID, nd.Reason)}
	case errors.As(err, &ne):
		rec.Err = &message.Error{Code: ne.Code, Message: ne.Message, Details: ne.Details}
		rec.Retryable = ne.Retryable
	case errors.Is(err, context.DeadlineExceeded):
		rec.Err = &message.Error{Code: "NODE_TIMEOUT", Message: fmt.Sprintf("node %q did not finish within %s", s.node.ID, timeout)}
		rec.Retryable = true
	default:
		rec.Err = &message.Error{Code: "NODE_ERROR", Message: err.Error()}
	}
	return rec, nil
}

// call runs the node, turning a panic into a failure of that node alone.
func (s *step) call(ctx context.Context, r node.Runner, now time.Time) (res node.Result, err error) {
	return s.callWith(ctx, s.node, r, now, s.m.AccumulatedContext)
}

// callWith runs r, the runner of n, on context acc.
func (s *step) callWith(ctx context.Context, n *workflow.Node, r node.Runner, now time.Time, acc map[string]any) (res node.Result, err error) {
	acc, err = s.e.resolve(ctx, s.m.ExecutionID, acc, s.wf.mentions(n.ID))
	var ie *infraError
	if errors.As(err, &ie) {
		return node.Result{}, err
	}
	if err != nil {
		return node.Result{}, &node.Error{Code: "CONTEXT_REFERENCE", Message: err.Error()}
	}
	defer func() {
		if p := recover(); p != nil {
			text := s.secrets.String(fmt.Sprint(p))
			s.log().Error("node panicked", "panic", text, "stack", string(debug.Stack()))
			err = &node.Error{Code: "NODE_PANIC", Message: fmt.Sprintf("node %q panicked: %s", s.node.ID, text)}
		}
	}()
	in := &node.Input{
		Env:            s.env(acc, now),
		NodeID:         s.node.ID,
		ExecutionID:    s.m.ExecutionID,
		WorkflowID:     s.m.WorkflowID,
		Attempt:        s.m.Attempt,
		IdempotencyKey: s.idempotencyKey(),
		Now:            now,
		StartedAt:      s.m.StartedAt,
		Logger:         s.log(),
	}
	if s.e.cfg.Secrets != nil {
		in.Secrets = stepSecrets{s}
		if _, pure := r.(node.Pure); !pure {
			// What the node logs passes through the same redaction.
			in.Logger = slog.New(s.secrets.Handler(in.Logger.Handler()))
		}
	}
	return r.Run(ctx, in)
}

// env is the expression environment of the node: the accumulated context plus
// $node, $execution and $now.
func (s *step) env(acc map[string]any, now time.Time) map[string]any {
	if !s.wf.usesNodeMap && !s.wf.usesExecution && !s.wf.usesNow {
		return acc // nothing to add: runners never modify Env
	}
	env := make(map[string]any, len(acc)+3)
	for k, v := range acc {
		env[k] = v
	}
	if s.wf.usesNodeMap {
		nodes := make(map[string]any, len(acc))
		for k, v := range acc {
			if len(k) > 1 {
				nodes[k[1:]] = v
			}
		}
		env["$node"] = nodes
	}
	if s.wf.usesExecution {
		env["$execution"] = map[string]any{
			"id":          s.m.ExecutionID,
			"workflow_id": s.m.WorkflowID,
			"started_at":  s.m.StartedAt.UTC().Format(time.RFC3339Nano),
			"attempt":     s.m.Attempt,
		}
	}
	if s.wf.usesNow {
		env["$now"] = now.UTC().Format(time.RFC3339Nano)
	}
	return env
}

// idempotencyKey is the same for every attempt and redelivery of this node on
// this branch.
func (s *step) idempotencyKey() string {
	k := s.m.ExecutionID + "/" + s.node.ID
	for _, f := range s.m.LineageStack {
		k += fmt.Sprintf("/%s.%d", f.SplitNodeID, f.ItemIndex)
	}
	return childID(k, "")
}

// maxDepth bounds the nesting of a node's output.
const maxDepth = 64

// checkJSON reports why v is not a JSON value: a type JSON cannot hold, a
// NaN or infinity, or nesting deeper than maxDepth. It walks v without
// encoding it, which keeps the embedded runtime free of encoding.
func checkJSON(v any, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("nested deeper than %d levels", maxDepth)
	}
	switch x := v.(type) {
	case nil, bool, string, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, json.Number:
		return nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("number %v", x)
		}
	case float32:
		return checkJSON(float64(x), depth)
	case []any:
		for i, e := range x {
			if err := checkJSON(e, depth+1); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
	case map[string]any:
		for k, e := range x {
			if err := checkJSON(e, depth+1); err != nil {
				return fmt.Errorf(".%s: %w", k, err)
			}
		}
	default:
		if _, err := json.Marshal(v); err != nil {
			return err
		}
	}
	return nil
}

// jsonOutput returns rec, or when its output is not JSON (which cannot
// travel) the node's failure saying so.
func (s *step) jsonOutput(rec *record) *record {
	if err := checkJSON(rec.Output, 0); err != nil {
		return &record{StartedAt: rec.StartedAt, FinishedAt: rec.FinishedAt, DurationMS: rec.DurationMS,
			Err: &message.Error{Code: "OUTPUT_NOT_JSON", Message: fmt.Sprintf("node %q produced output that is not JSON: %v", s.node.ID, err)}}
	}
	return rec
}
