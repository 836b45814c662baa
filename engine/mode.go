package engine

import (
	"context"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/node"
)

// The step as a state machine. A handling has one mode, computed once
// (modeOf, or given by Resume and HandleTimeout), which says how it starts:
//
//	modeBegin       Begin ─▶ Run: run the node (or arrive at a barrier, or
//	                suspend a wait) ─▶ settle; Replay ─▶ settle(stored);
//	                Drop ─▶ settle(dropped)
//	modeOptimistic  run the pure node ─▶ settle, unverified (its Finish makes
//	                Begin's checks; its running status waits for the verdict)
//	modeEager       running status ─▶ run the eager node ─▶ settle, unverified
//	modeResume      the wait succeeds ─▶ settle, unverified (Resume; an
//	                event wait, child workflow or digest: Begin first)
//	modeTimeout     Begin ─▶ the barrier fails or was closed ─▶ settle
//	                (HandleTimeout; outside the live count)
//
// settle then goes through its phases: plan the effects of the record,
// commit (coord.Finish), report. An unverified Finish may say the message
// must not run (Drop) or ran before (Replay, with its stored record): settle
// goes round once more, as dropped or with the stored record, verified.
type mode uint8

const (
	modeBegin mode = iota
	modeOptimistic
	modeEager
	modeResume
	modeTimeout
)

func (m mode) String() string {
	return [...]string{"begin", "optimistic", "eager", "resume", "timeout"}[m]
}

// modeOf is the mode of a message handled by Handle. A pure node runs
// without Begin (a redelivery repeats nothing), unless it is a wait, which
// suspends instead of finishing; an eager node does on a first copy's
// first delivery, unless it is a barrier, which arrives instead of running.
func (s *step) modeOf() mode {
	r := s.wf.runners[s.node.ID]
	if s.wf.flow[s.node.ID] != nil {
		return modeBegin // its flow control comes before the run (flow.go)
	}
	if _, pure := r.(node.Pure); pure && !isWait(s.node.Type) {
		return modeOptimistic
	}
	if _, eager := r.(node.Eager); eager && !isWait(s.node.Type) && !isBarrier(s.node.Type) && s.d.firstCopy() {
		return modeEager
	}
	return modeBegin
}

// unverified is set on the first Finish of a message run without Begin
// (coord.FinishOptimistic): running is its running status when it waits
// for the verdict, reported only if the verdict is Run.
type unverified struct {
	yes     bool
	running *message.NodeStatus
}

// settle finishes the message with rec (nil: dropped, the execution was
// halted): it plans the effects, commits them and reports them. When the
// verdict of an unverified Finish is Replay or Drop, it goes round once
// more with the stored record or as dropped, verified: a loop, never a
// recursion.
func (s *step) settle(ctx context.Context, rec *record, u unverified) error {
	for {
		var f effects // on the stack: plan and commit only borrow it
		if rec == nil {
			// Dropped: close the accounting, report skipped.
			now := s.e.cfg.Now()
			rec = &record{Noop: true, StartedAt: now, FinishedAt: now}
			f.statuses = []*message.NodeStatus{s.status(message.StatusSkipped, now)}
		} else {
			rec = s.jsonOutput(rec)
			if err := s.plan(ctx, rec, &f); err != nil {
				return err
			}
		}
		verdict, stored, err := s.commit(ctx, rec, &f, u)
		if err != nil {
			return err
		}
		switch verdict {
		case coord.Run:
			return nil
		case coord.Replay:
			if rec, err = s.stored(stored); err != nil {
				return err
			}
		default: // coord.Drop
			rec = nil
		}
		u = unverified{}
	}
}
