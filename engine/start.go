package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/tracing"
)

// NewExecutionID returns a fresh execution id: "exec_" + time + randomness,
// sortable by start time.
func NewExecutionID(now time.Time) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "exec_" + now.UTC().Format("20060102T150405") + "_" + hex.EncodeToString(b[:])
}

// Start begins execution execID of wf with trigger payload input (decoded
// JSON). It registers the execution with the coordinator, reports the
// trigger's success and one first message per successor of the trigger to
// sink (or the completion, when the trigger has no successor).
func (e *Engine) Start(ctx context.Context, wf *Workflow, execID string, input any, sink Sink) error {
	return e.StartWith(ctx, wf, execID, input, StartOptions{}, sink)
}

// StartOptions are what an execution's start may add to its trigger payload.
type StartOptions struct {
	// Priority is the execution's priority, 1 (lowest) to 10 (highest); 0
	// is the default 5. Every node message of the execution carries it
	// (message.NodeExecution.Priority), so brokers with priorities hand
	// them out first under a backlog (issue 35).
	Priority int
}

// StartWith is Start with opts.
func (e *Engine) StartWith(ctx context.Context, wf *Workflow, execID string, input any, opts StartOptions, sink Sink) error {
	// The input policy, for callers that decoded the input themselves (an
	// API): refused here, the input never becomes a message.
	if err := message.CheckValue("input", input); err != nil {
		return fmt.Errorf("%w: execution %s: %w", ErrInvalid, execID, err) // a *message.PolicyError
	}
	trig := wf.Graph.Trigger()
	if trig == nil {
		return invalidf("workflow %q has no trigger", wf.Def.ID)
	}
	edges := wf.Graph.Outgoing(trig.ID)
	// The definition is stored before anything refers to it.
	first := &message.NodeExecution{WorkflowDefinition: wf.Raw}
	ref, err := e.refFor(ctx, wf, first)
	if err != nil {
		return err
	}
	if opts.Priority != 5 {
		first.Priority = opts.Priority // 5 is the default: omitted
	}
	if len(edges) > 0 {
		if err := e.cfg.Coord.Start(ctx, execID, len(edges)); err != nil {
			return fmt.Errorf("engine: start execution %s: %w", execID, err)
		}
	}
	now := e.cfg.Now().UTC()
	acc := map[string]any{"$trigger": input}
	// Started under a span of the execution's trace (the server's
	// dispatch), the first nodes' spans are its children.
	trace := tracing.ExecutionTraceparent(ctx, execID)
	sink.Status(ctx, &message.NodeStatus{
		WorkflowID: wf.Def.ID, ExecutionID: execID, NodeID: trig.ID,
		Status: message.StatusSuccess, Output: input, ExecutedAt: now, Attempt: 1,
	})
	if len(edges) == 0 {
		sink.Complete(&message.Completion{
			WorkflowID: wf.Def.ID, ExecutionID: execID, Status: message.CompletionCompleted,
			FinalContext: acc, CompletedAt: now,
		})
		return nil
	}
	for _, edge := range edges {
		m := &message.NodeExecution{
			MessageID:          childID(execID, edge.ID),
			WorkflowID:         wf.Def.ID,
			ExecutionID:        execID,
			CurrentNode:        edge.Dst,
			FromNode:           trig.ID,
			Attempt:            1,
			StartedAt:          now,
			AccumulatedContext: acc,
		}
		definitionOf(m, first, ref)
		sink.Execute(m, Publish{Trace: trace})
	}
	return nil
}

// Effects records what handling produced; it implements Sink (Sync does
// nothing: what it records is its caller's at once). Tests and simple
// callers use it.
type Effects struct {
	Statuses   []*message.NodeStatus
	Next       []Delayed
	Timeouts   []*message.Timeout
	Completion *message.Completion
}

// Delayed is a message to run a node, held back for Delay.
type Delayed struct {
	Msg   *message.NodeExecution
	Delay time.Duration
}

func (f *Effects) Status(_ context.Context, s *message.NodeStatus) {
	f.Statuses = append(f.Statuses, s)
}
func (f *Effects) Execute(m *message.NodeExecution, how Publish) {
	f.Next = append(f.Next, Delayed{Msg: m, Delay: how.Delay})
}
func (f *Effects) Complete(c *message.Completion) { f.Completion = c }
func (f *Effects) Timeout(t *message.Timeout, _ Publish) {
	f.Timeouts = append(f.Timeouts, t)
}
func (f *Effects) Sync(context.Context) error { return nil }

// AbortStart ends execution execID of wf after Start succeeded but its
// first messages could not all be published: it halts the execution and
// finishes each first message as if it had run and spawned nothing, so the
// coordinator's state ends (kept only for its short retention) rather than
// staying live until its TTL. A first message that was published after all
// is dropped by the worker that gets it.
func (e *Engine) AbortStart(ctx context.Context, wf *Workflow, execID string, cause error) error {
	trig := wf.Graph.Trigger()
	if trig == nil {
		return nil
	}
	now := e.cfg.Now()
	halt := &message.Failure{NodeID: trig.ID, Error: message.Error{Code: "START_FAILED",
		Message: "the execution's first messages could not be published: " + cause.Error()}}
	var errs []error
	for _, edge := range wf.Graph.Outgoing(trig.ID) {
		_, err := e.cfg.Coord.Finish(ctx, execID, childID(execID, edge.ID), coord.Finish{
			Record: &record{Noop: true, StartedAt: now, FinishedAt: now}, Halt: halt,
		})
		if err != nil && !errors.Is(err, coord.ErrUnknownExecution) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("engine: abort the start of execution %s: %w", execID, err)
	}
	return nil
}
