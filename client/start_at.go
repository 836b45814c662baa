package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/publish"
)

// StartAt publishes the first message of execution execID of wf, begun at
// node from with context acc (a re-run from a node: engine.StartAt), and
// waits until the broker has accepted it.
func StartAt(ctx context.Context, b broker.Broker, e *engine.Engine, wf *engine.Workflow, execID, from string, acc map[string]any) error {
	started := false
	err := publish.Handle(ctx, publish.Config{Broker: b, Completed: e.Completed}, func(s engine.Sink) error {
		if err := e.StartAt(ctx, wf, execID, from, acc, s); err != nil {
			return err
		}
		started = true
		return nil
	})
	if err != nil && !started {
		return err
	}
	if err != nil {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if aerr := e.AbortStartAt(actx, wf, execID, from, err); aerr != nil {
			err = errors.Join(err, aerr)
		}
		return fmt.Errorf("start execution %s at node %s: publish its first message: %w", execID, from, err)
	}
	return nil
}
