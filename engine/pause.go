package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/message"
)

// Pause and resume of one execution (issue 34). The pause flag lives in
// the coordinator (coord.Pauses). A branch of a paused execution parks at
// its next node boundary: before its node begins, or when its wait's timer
// comes due, the engine freezes its message in the timer store under a
// paused timer id, due maxPause ahead, records it with Coord.Park and
// reports the node paused. Resuming clears the flag and wakes those
// timers: the scheduler fires each once (timer claims), which runs the
// node (or ends the wait) as if it had never parked. A halt wakes them too
// (Coord.Parked lists them), and they are dropped.

// maxPause bounds a pause: a parked branch's timer comes due by itself
// after it, paused or not.
const maxPause = maxWait

// The prefixes of paused timer ids, before the message id (TimerID).
const (
	// pausedBegin: the message was parked before its node began; a
	// resume handles it (Handle).
	pausedBegin = "paused:"
	// pausedWait: a wait's timer came due while paused; a resume ends the
	// wait (Resume).
	pausedWait = "pausedwait:"
)

// ErrNoPause is returned by PauseExecution when the runtime's coordinator
// keeps no pause flags or it has no timer store.
var ErrNoPause = errors.New("engine: this runtime cannot pause executions")

// pausedTimer splits a timer id into its paused prefix ("" for a wait's
// own timer) and the message id the timer holds.
func pausedTimer(id string) (kind, msgID string) {
	for _, k := range []string{pausedWait, pausedBegin} {
		if rest, ok := strings.CutPrefix(id, k); ok {
			return k, rest
		}
	}
	return "", id
}

func (e *Engine) pauses() (coord.Pauses, bool) {
	p, ok := e.cfg.Coord.(coord.Pauses)
	return p, ok && e.cfg.Timers != nil
}

// PauseExecution pauses execution execID: its branches park at their next
// node boundary (a node already running finishes). Pausing twice is
// pausing once.
func (e *Engine) PauseExecution(ctx context.Context, execID string) error {
	p, ok := e.pauses()
	if !ok {
		return ErrNoPause
	}
	if err := p.SetPaused(ctx, execID, true); err != nil {
		return fmt.Errorf("engine: pause execution %s: %w", execID, err)
	}
	return nil
}

// ResumeExecution resumes execution execID: it clears the flag and wakes
// the branches that parked, which run once each (timers that came due
// while paused fire now). Resuming an execution that is not paused wakes
// nothing and is not an error.
func (e *Engine) ResumeExecution(ctx context.Context, execID string) error {
	p, ok := e.pauses()
	if !ok {
		return ErrNoPause
	}
	if err := p.SetPaused(ctx, execID, false); err != nil {
		return fmt.Errorf("engine: resume execution %s: %w", execID, err)
	}
	ids, err := e.cfg.Coord.Parked(ctx, execID)
	if err != nil {
		return fmt.Errorf("engine: resume execution %s: %w", execID, err)
	}
	paused := ids[:0]
	for _, id := range ids {
		if kind, _ := pausedTimer(id); kind != "" {
			paused = append(paused, id)
		}
	}
	if len(paused) == 0 {
		return nil
	}
	// A paused timer already fired or done is left alone by Wake.
	if err := e.cfg.Timers.Wake(ctx, e.cfg.Now(), paused...); err != nil {
		return fmt.Errorf("engine: resume execution %s: wake its parked branches: %w", execID, err)
	}
	return nil
}

// ResumeTimer fires timer id, whose frozen message is m (Thaw), due at
// due: a wait's own timer ends the wait (Resume); a paused branch's, woken
// by a resume or a halt, runs its node or ends its wait without parking
// again. The scheduler calls it for every timer.
func (e *Engine) ResumeTimer(ctx context.Context, d Delivery, id string, m *message.NodeExecution, due time.Time, sink Sink) error {
	switch kind, _ := pausedTimer(id); kind {
	case pausedBegin:
		d.unpaused = true
		return e.Handle(ctx, d, m, sink)
	case pausedWait:
		d.unpaused = true
	}
	return e.Resume(ctx, d, m, due, sink)
}

// pauseGate parks the step's branch when its execution is paused and the
// message is one to run (Begin says Run); otherwise the step goes on.
// Costs one coordinator read per node of a runtime that can pause.
func (s *step) pauseGate(ctx context.Context) (parked bool, err error) {
	if s.d.unpaused || s.mode == modeTimeout {
		return false, nil
	}
	p, ok := s.e.pauses()
	if !ok {
		return false, nil
	}
	paused, err := p.Paused(ctx, s.m.ExecutionID)
	if err != nil {
		return false, fmt.Errorf("engine: is execution %s paused: %w", s.m.ExecutionID, err)
	}
	if !paused {
		return false, nil
	}
	b, err := s.e.cfg.Coord.Begin(ctx, s.m.ExecutionID, s.m.MessageID)
	if err != nil {
		return false, fmt.Errorf("engine: begin message %s: %w", s.m.MessageID, err)
	}
	if b.State != coord.Run {
		return false, nil // halted or finished before: handled as usual
	}
	kind := pausedBegin
	if s.mode == modeResume {
		kind = pausedWait
	}
	return true, s.pausePark(ctx, p, kind+TimerID(s.m))
}

// pausePark freezes the message under timer id until a resume wakes it.
// The message is not finished: the branch stays live.
func (s *step) pausePark(ctx context.Context, p coord.Pauses, id string) error {
	frozen, err := s.e.Freeze(ctx, s.m)
	if err != nil {
		return fmt.Errorf("engine: freeze message %s: %w", s.m.MessageID, err)
	}
	now := s.e.cfg.Now()
	due := now.Add(maxPause)
	if err := s.e.cfg.Timers.Schedule(ctx, id, due, frozen); err != nil {
		return fmt.Errorf("engine: park message %s of paused execution %s: %w", s.m.MessageID, s.m.ExecutionID, err)
	}
	wake, err := s.e.cfg.Coord.Park(ctx, s.m.ExecutionID, id, due)
	if err != nil {
		return fmt.Errorf("engine: park message %s: %w", s.m.MessageID, err)
	}
	if !wake {
		// A resume that listed the parked branches before this Park did
		// not see it: then the flag is clear by now, and it wakes here.
		still, err := p.Paused(ctx, s.m.ExecutionID)
		if err != nil {
			return fmt.Errorf("engine: is execution %s paused: %w", s.m.ExecutionID, err)
		}
		wake = !still
	}
	if wake {
		if err := s.e.cfg.Timers.Wake(ctx, now, id); err != nil {
			return fmt.Errorf("engine: wake parked message %s: %w", s.m.MessageID, err)
		}
	}
	s.sink.Status(ctx, s.status(message.StatusPaused, now))
	return nil
}
