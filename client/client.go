// Package client starts executions on a broker and follows them: what
// `rune run` does in process and `rune start --wait` does against RabbitMQ.
package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/publish"
)

// Start publishes the first messages of execution execID of wf and waits
// until the broker has accepted them.
func Start(ctx context.Context, b broker.Broker, e *engine.Engine, wf *engine.Workflow, execID string, input any) error {
	return StartWith(ctx, b, e, wf, execID, input, engine.StartOptions{})
}

// StartWith is Start with opts (the execution's priority).
func StartWith(ctx context.Context, b broker.Broker, e *engine.Engine, wf *engine.Workflow, execID string, input any, opts engine.StartOptions) error {
	started := false
	// Completed: a workflow may end at its trigger.
	err := publish.Handle(ctx, publish.Config{Broker: b, Completed: e.Completed}, func(s engine.Sink) error {
		if err := e.StartWith(ctx, wf, execID, input, opts, s); err != nil {
			return err
		}
		started = true
		return nil
	})
	if err != nil && !started {
		return err
	}
	if err != nil {
		// Do not leave a live execution behind that nothing will ever run
		// (issue 12: a refused publish left it for the state's whole TTL).
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if aerr := e.AbortStart(actx, wf, execID, err); aerr != nil {
			err = errors.Join(err, aerr)
		}
		return fmt.Errorf("start execution %s: publish first messages: %w", execID, err)
	}
	return nil
}

// Run starts execution execID of wf and follows it until its completion,
// calling onStatus (when not nil) for each node status as it arrives.
func Run(ctx context.Context, b broker.Broker, e *engine.Engine, wf *engine.Workflow, execID string, input any, onStatus func(*message.NodeStatus)) (*message.Completion, error) {
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Follow before starting, so no status is missed.
	events, err := b.Follow(fctx, execID)
	if err != nil {
		return nil, fmt.Errorf("follow execution %s: %w", execID, err)
	}
	if err := Start(ctx, b, e, wf, execID, input); err != nil {
		return nil, err
	}
	return Wait(ctx, events, onStatus)
}

// Wait reads followed events until a completion arrives.
func Wait(ctx context.Context, events <-chan broker.Message, onStatus func(*message.NodeStatus)) (*message.Completion, error) {
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case ev, ok := <-events:
			if !ok {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				return nil, errors.New("the broker stopped delivering this execution's events")
			}
			switch body := ev.Body.(type) {
			case *message.NodeStatus:
				if onStatus != nil {
					onStatus(body)
				}
				if body.Status == message.StatusFailed && body.Error != nil && body.Error.Code == message.CodeDeadLettered {
					// Its message can never run: no completion will come.
					return nil, &DeadLetteredError{ExecutionID: body.ExecutionID, NodeID: body.NodeID, Reason: body.Error.Message}
				}
			case *message.Completion:
				return body, nil
			}
		}
	}
}

// DeadLetteredError is returned by Wait when a message of the execution was
// dead-lettered: the execution cannot complete.
type DeadLetteredError struct {
	ExecutionID, NodeID, Reason string
}

func (e *DeadLetteredError) Error() string {
	return fmt.Sprintf("execution %s cannot complete: the message of node %s was dead-lettered: %s", e.ExecutionID, e.NodeID, e.Reason)
}
