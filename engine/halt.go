package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/message"
)

// CodeCancelled is the failure code of an execution halted from outside
// (Halt): a user cancelled it.
const CodeCancelled = "CANCELLED"

// ErrEnded is returned by Halt for an execution that has already ended, was
// never started, or whose coordination state expired.
var ErrEnded = errors.New("execution has ended or is unknown")

// Halt stops execution execID from outside, as a halting node would: its
// other branches are dropped at their next node (reported skipped), its
// suspended waits are woken now and dropped, and the completion (halted, with
// failure reason f) comes when the last running branch ends. It is
// idempotent: a second Halt changes nothing (the first reason stays), and
// neither does a Halt after a node's failure halted the execution (that
// completion is failed, with the node's reason).
//
// A halt from outside is no node's failure: f.NodeID is cleared, which is
// how the completion tells it from a node's halt (completionStatus).
//
// It records a synthetic message "halt:<execID>" that spawns one and ends one
// message, so the live count is unchanged and the completion accounting is
// left to the branches still running.
func (e *Engine) Halt(ctx context.Context, execID string, f message.Failure) error {
	f.NodeID = ""
	_, err := e.cfg.Coord.Finish(ctx, execID, "halt:"+execID, coord.Finish{Spawned: 1, Halt: &f})
	if errors.Is(err, coord.ErrUnknownExecution) {
		return fmt.Errorf("engine: halt execution %s: %w", execID, ErrEnded)
	}
	if err != nil {
		return fmt.Errorf("engine: halt execution %s: %w", execID, err)
	}
	if e.cfg.Timers == nil {
		return nil
	}
	ids, err := e.cfg.Coord.Parked(ctx, execID)
	if err == nil && len(ids) > 0 {
		err = e.cfg.Timers.Wake(ctx, e.cfg.Now(), ids...)
	}
	if err != nil {
		return fmt.Errorf("engine: halt execution %s: wake its waiting branches: %w", execID, err)
	}
	return nil
}
