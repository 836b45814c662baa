package engine

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rune-org/rune/message"
)

// A deferred node run (flow.go): the message is parked in the timer store
// until due, exactly as a wait suspends (durable, woken by a halt), and
// reported waiting with resume_at and a reason. When the timer fires the
// scheduler's Resume publishes the message again, unchanged, for a worker
// to run the node: its Begin says Run (it never finished), and its flow
// control finds its reservation.

// deferRun defers the step's node run until due, for reason.
func (s *step) deferRun(ctx context.Context, due time.Time, reason string) error {
	if s.e.cfg.Timers == nil {
		now := s.e.cfg.Now()
		return s.settle(ctx, &record{StartedAt: now, FinishedAt: now,
			Err: &message.Error{Code: "UNSUPPORTED_NODE", Message: fmt.Sprintf("node %q must wait (%s), but this runtime has no timer store", s.node.ID, reason)}}, unverified{})
	}
	// Each deferral has a timer of its own: a run deferred again (its
	// throttle's window filled once more) must not meet the timer that
	// brought it back, which the scheduler removes after the fact.
	if err := s.park(ctx, deferTimerID(s.m, due), due); err != nil {
		return err
	}
	now := s.e.cfg.Now()
	s.e.cfg.Metrics.NodeDeferred(s.m.WorkflowID, reason, due.Sub(now))
	st := s.status(message.StatusWaiting, now)
	st.ResumeAt = &due
	st.Reason = reason
	s.sink.Status(ctx, st)
	return nil
}

// deferTimerID is the timer of m's run deferred until due: the same for a
// redelivery that defers to the same time. It starts with m's id, which a
// frozen message does not keep (Thaw is given the timer id back):
// deferredMessageID recovers it.
func deferTimerID(m *message.NodeExecution, due time.Time) string {
	return m.MessageID + deferSep + strconv.FormatInt(due.UnixMilli(), 10)
}

const deferSep = "|deferred@"

// deferredMessageID is the message id in a deferred run's timer id (the id
// itself for any other timer).
func deferredMessageID(timerID string) string {
	id, _, _ := strings.Cut(timerID, deferSep)
	return id
}

// resumeDeferred publishes m, a deferred node run whose time has come, for a
// worker to run.
func (e *Engine) resumeDeferred(d Delivery, m *message.NodeExecution, sink Sink) error {
	sink.Execute(m, Publish{Trace: d.Trace})
	return nil
}
