package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/message"
)

// The commit phase: coord.Finish records the message, and the case of its
// Outcome says what to publish (report): effects, and the completion when
// it ended the execution.

// commit finishes the message with rec and f and reports their effects as
// the Outcome's case says. When an unverified Finish is Replayed or Dropped,
// it reports nothing and returns Begin's verdict (with the stored record)
// for settle to go on.
func (s *step) commit(ctx context.Context, rec *record, f *effects, u unverified) (coord.State, []byte, error) {
	spawned := len(f.next)
	if s.mode == modeTimeout {
		// The live count never included this message: finishing it must not
		// remove it (see HandleTimeout).
		spawned++
	}
	fin := coord.Finish{Spawned: spawned, Record: rec, End: f.end, Halt: f.halt, Mode: coord.FinishBegun, Hold: f.hold(s.e.cfg.Now())}
	if u.yes {
		fin.Mode = coord.FinishOptimistic
	}
	early, finished, err := s.statusesFirst(ctx, f, fin, u)
	if err != nil || early == done {
		return coord.Run, nil, err
	}
	var out coord.Outcome
	if finished != nil {
		out = *finished
	} else if out, err = s.e.cfg.Coord.Finish(ctx, s.m.ExecutionID, s.m.MessageID, fin); err != nil {
		return coord.Run, nil, s.finishFailed(err)
	}
	switch out.Case {
	case coord.Replayed:
		return coord.Replay, out.Record, nil
	case coord.Dropped:
		return coord.Drop, nil, nil
	case coord.DuplicatePublished:
		return coord.Run, nil, s.reportPublished(ctx, f, out, early)
	case coord.Recorded, coord.Duplicate:
		return coord.Run, nil, s.report(ctx, rec, f, out, early, u.running)
	}
	return coord.Run, nil, fmt.Errorf("engine: finish message %s: unexpected outcome %s", s.m.MessageID, out.Case)
}

// statusTiming says what statusesFirst did.
type statusTiming int

const (
	none     statusTiming = iota // nothing: the statuses go out after Finish
	reported                     // the statuses are out and safe
	done                         // the message was handled another way (Drop, Replay)
)

// statusesFirst publishes f's statuses before the message's Finish when
// the message spawns nothing and is not the execution's last. Such a Finish
// may be the one that lets another branch's message end the execution:
// were the statuses published after it, that completion could reach
// followers before them (a follower stops reading at the completion and
// would miss them). A message that spawns successors cannot be overtaken
// so: the execution lives on at least until they finish, and they are
// published after its statuses.
//
// It asks first for a Finish that records the message only if it is the
// last live one (coord.FinishIfLast, or coord.FinishOptimisticIfLast in
// place of its Begin). When it is (the end of every linear chain), no
// other message can complete the execution: statusesFirst returns that Outcome, and the statuses go out
// after it with the completion, in one publish, in order. When it is not,
// nothing was recorded and the statuses are published and confirmed
// first, as above.
func (s *step) statusesFirst(ctx context.Context, f *effects, fin coord.Finish, u unverified) (statusTiming, *coord.Outcome, error) {
	if fin.Spawned > 0 || len(f.statuses) == 0 {
		return none, nil, nil
	}
	// A message run without Begin asks in place of its Begin, at no cost.
	// One that had its Begin pays a round trip to ask, unless it ends a
	// branch of a split, which is seldom the last.
	if u.yes || len(s.m.LineageStack) == 0 {
		fin.Mode = coord.FinishIfLast
		if u.yes {
			fin.Mode = coord.FinishOptimisticIfLast
		}
		out, err := s.e.cfg.Coord.Finish(ctx, s.m.ExecutionID, s.m.MessageID, fin)
		if err != nil {
			return done, nil, s.finishFailed(err)
		}
		if out.Case != coord.NotLast {
			return none, &out, nil
		}
	}
	if u.running != nil {
		s.sink.Status(ctx, u.running)
	}
	for _, st := range f.statuses {
		s.sink.Status(ctx, st)
	}
	if err := s.sink.Sync(ctx); err != nil {
		return done, nil, fmt.Errorf("engine: publish the statuses of message %s: %w", s.m.MessageID, err)
	}
	return reported, nil, nil
}

// reportPublished publishes what a duplicate Finish of an ended execution
// whose completion is out leaves to publish (coord.DuplicatePublished):
// every successor was delivered (it finished), and the completer's
// statuses went out with the completion. Only a non-completer's own
// statuses may never have been published.
func (s *step) reportPublished(ctx context.Context, f *effects, out coord.Outcome, early statusTiming) error {
	if !out.Last() && early == none {
		for _, st := range f.statuses {
			s.sink.Status(ctx, st)
		}
	}
	return nil
}

// report publishes the effects of a message whose Finish recorded it
// (coord.Recorded) or had before (coord.Duplicate), as out says.
func (s *step) report(ctx context.Context, rec *record, f *effects, out coord.Outcome, early statusTiming, running *message.NodeStatus) error {
	if f.halt != nil {
		if err := s.wakeParked(ctx); err != nil {
			return err
		}
	}
	s.observe(rec, f, out)
	if early == none {
		if running != nil {
			s.sink.Status(ctx, running)
		}
		for _, st := range f.statuses {
			s.sink.Status(ctx, st)
		}
	}
	// This Finish recorded the message (not a duplicate, not a replay):
	// no other handling publishes these successors but as replays.
	first := out.Case == coord.Recorded && !s.replaying
	for _, n := range f.next {
		s.sink.Execute(n, Publish{Delay: f.delay, First: first, Trace: s.trace})
	}
	now := s.e.cfg.Now()
	for _, t := range f.timeouts {
		s.sink.Timeout(t, Publish{Delay: max(0, t.Deadline.Sub(now)), Trace: s.trace})
	}
	at := rec.FinishedAt
	if out.Case == coord.Duplicate && out.Last() {
		// Another delivery of this message finished it first (they ran at
		// once): report its completion time, so both completions are equal.
		if b, err := s.e.cfg.Coord.Begin(ctx, s.m.ExecutionID, s.m.MessageID); err == nil && b.State == coord.Replay {
			var first record
			if json.Unmarshal(b.Record, &first) == nil {
				at = first.FinishedAt
			}
		}
		published := func() bool { // Finish again: a duplicate changes nothing
			o, err := s.e.cfg.Coord.Finish(ctx, s.m.ExecutionID, s.m.MessageID, coord.Finish{Record: rec})
			return err == nil && o.Case == coord.DuplicatePublished
		}
		if s.e.completionRouted(ctx, s.m.ExecutionID, at, published) {
			return nil
		}
		// The one window left (docs/dsl.md, "Delivery and idempotency"):
		// the first delivery may have published the completion without
		// living to record it. Logged, so that a fault test can tell these
		// copies from a bug.
		s.e.log.Info(RepublishLog, "execution_id", s.m.ExecutionID, "message_id", s.m.MessageID)
	}
	s.complete(ctx, out.Completion, at)
	return nil
}

// finishFailed is what commit returns when Coord.Finish failed with err.
func (s *step) finishFailed(err error) error {
	if !errors.Is(err, coord.ErrUnknownExecution) {
		return fmt.Errorf("engine: finish message %s: %w", s.m.MessageID, err)
	}
	if s.mode == modeTimeout {
		// A barrier's timeout outlives its execution when the barrier
		// completed in time: nothing is waiting for it.
		s.log().Debug("dropping the timeout of an ended execution")
		return nil
	}
	// Nothing Rune published leads here (a forged message, or one kept
	// past its execution's retention): dead-lettered, with the reason.
	return invalidf("message %s: execution %q is unknown, expired or has ended", s.m.MessageID, s.m.ExecutionID)
}

// complete reports the completion when end is set: this message ended the
// execution. at is when the message finished, from its record, so that a
// redelivery reports the very same completion.
func (s *step) complete(ctx context.Context, end *coord.Completion, at time.Time) {
	if end == nil {
		return
	}
	final := end.FinalContext
	if resolved, err := s.e.resolve(ctx, s.m.ExecutionID, final, nil); err == nil {
		final = resolved
	} else {
		s.log().Warn("final context keeps references it could not resolve", "err", err)
	}
	c := &message.Completion{
		WorkflowID:      s.m.WorkflowID,
		ExecutionID:     s.m.ExecutionID,
		Status:          completionStatus(end),
		FinalContext:    final,
		CompletedAt:     at.UTC(),
		TotalDurationMS: at.Sub(s.m.StartedAt).Milliseconds(),
		FailureReason:   end.Failure,
	}
	if c.FinalContext == nil {
		c.FinalContext = map[string]any{}
	}
	s.sink.Complete(c)
}

// completionStatus is the status of the completion end reports. The
// coordinators say only whether the execution was halted; the halt's
// failure says why: a halt from outside (Halt: a cancel) names no node and
// completes halted, while a node's failure under the halt strategy (retries
// exhausted or not retryable, an aggregator or merge timeout, a start that
// could not be published) names its node and completes failed, as RFC 001
// §9.1 and seed 003 §4.3 have it.
func completionStatus(end *coord.Completion) string {
	switch {
	case end.Status == "":
		return message.CompletionCompleted
	case end.Status == message.CompletionHalted && end.Failure != nil && end.Failure.NodeID != "":
		return message.CompletionFailed
	}
	return end.Status
}

// receiptHold is how long after the first delivery finished a redelivered
// completer waits before it asks the broker whether the first completion
// is out: a publisher that is alive but slow has then published it.
const receiptHold = time.Second

// completionRouted reports whether exec's completion, first published
// around finished by a delivery that did not live to record it, is out
// after all: recorded as published meanwhile (published), or found in the
// broker (Config.CompletionRouted), which it then records as Completed
// would have.
func (e *Engine) completionRouted(ctx context.Context, exec string, finished time.Time, published func() bool) bool {
	if e.cfg.CompletionRouted == nil {
		return false
	}
	if wait := receiptHold - e.cfg.Now().Sub(finished); wait > 0 {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
	}
	if published() {
		e.log.Debug("completion recorded as published while this redelivery waited", "execution_id", exec)
		return true
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	routed, err := e.cfg.CompletionRouted(rctx, exec)
	if err != nil {
		e.log.Warn("could not ask the broker whether the completion is out; publishing it again", "execution_id", exec, "err", err)
		return false
	}
	if !routed {
		return false
	}
	e.log.Info(RoutedLog, "execution_id", exec)
	e.Completed(ctx, &message.Completion{ExecutionID: exec})
	return true
}

// RoutedLog is what the engine logs when a redelivered completer finds the
// first completion in the broker and publishes none.
const RoutedLog = "completion not recorded as published, but the broker took it: not publishing it again"

// RepublishLog is what the engine logs when it publishes an execution's
// completion again because no record says the first was published.
const RepublishLog = "completion not recorded as published: publishing it again, identical"
