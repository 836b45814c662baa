// Package coord is the coordination seam: the small amount of state that the
// workers of one execution share (architecture.md). coord/redis implements it
// on Redis with Lua scripts, coord/memory in process; coord/coordtest is the
// conformance suite both pass.
package coord

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rune-org/rune/message"
)

// Coordinator does the completion accounting and cancellation of executions
// (RFC 001 §7, dsl.md "Completion").
//
// Accounting: an execution holds a count of live messages. Start sets it to the
// number of first messages; each Finish adds the messages that one spawned and
// removes itself. When the count reaches zero the execution has ended, and
// exactly one Finish call learns it (Outcome.Completion).
//
// Every method is safe for concurrent use by many processes, and idempotent
// per message id: a redelivered message never counts twice.
type Coordinator interface {
	// Start records a new execution with n (at least 1) first messages.
	// Starting an execution that already exists, or that has ended and is
	// still retained, changes nothing.
	Start(ctx context.Context, exec string, n int) error

	// Begin says what to do with message id of exec:
	//   Run: it has not finished; run it.
	//   Replay: it finished before (a redelivery); Record is what its Finish
	//     stored, so the caller can publish the same effects again without
	//     repeating the work.
	//   Drop: the execution was halted, has ended, or is unknown; do not run
	//     it, but still Finish it with Spawned 0 so the accounting closes
	//     (for an ended or unknown execution that Finish returns
	//     ErrUnknownExecution, and there is nothing more to do).
	// A message that finished always gets Replay while its execution's state
	// is kept, halted or not.
	Begin(ctx context.Context, exec, id string) (Begin, error)

	// Finish records, once per id, that message id ended having spawned
	// f.Spawned new messages. It stores f.Record for Replay, merges f.End
	// into the execution's final context, and with f.Halt marks the
	// execution halted so later Begins return Drop (the first Halt's Failure
	// is the one kept).
	//
	// Finish returns ErrUnknownExecution when exec is unknown, expired, or
	// has already ended and id is not one of its finished messages.
	//
	// A repeated Finish for the same id changes nothing and returns the first
	// call's completion (if it ended the execution) in an Outcome of case
	// Duplicate or DuplicatePublished, so a caller that crashed after Finish
	// and before publishing can publish again.
	//
	// f.Mode says what the caller knows of the message (see FinishMode):
	// whether it called Begin, and whether it asks Finish to record the
	// message only if that ends the execution. The Outcome's Case says which
	// of these answers it got.
	Finish(ctx context.Context, exec, id string, f Finish) (Outcome, error)

	// Park records that message id of exec waits in the timer store (a wait
	// or delay node suspended it) until its Finish, which forgets it. A halt
	// then wakes it (Parked) rather than leave the halted execution's
	// completion waiting for the timer's due time. Park reports whether exec
	// is halted, unknown or ended: then it records nothing, and the caller
	// wakes the timer itself. Parking an id twice records it once.
	//
	// due is when the timer fires. A coordinator whose state of a live
	// execution expires (coord/redis: its TTL after the last activity)
	// keeps every key of exec at least until due plus that TTL, so the
	// branch finds its execution when it resumes, however long it waited.
	Park(ctx context.Context, exec, id string, due time.Time) (wake bool, err error)

	// Parked returns the ids Park recorded for exec that have not finished
	// since, in no particular order (none for an unknown execution).
	Parked(ctx context.Context, exec string) ([]string, error)

	// Published records that exec's completion has been published: the
	// broker confirmed it. From then on a duplicate Finish of any of exec's
	// messages returns DuplicatePublished, and its caller publishes no
	// completion again (RFC 001 §6.3: one completion per execution). It
	// changes nothing for an execution that is unknown, expired or still
	// live, and recording it twice is recording it once.
	Published(ctx context.Context, exec string) error
}

// State is Begin's verdict.
type State int

const (
	Run State = iota
	Replay
	Drop
)

func (s State) String() string {
	switch s {
	case Run:
		return "run"
	case Replay:
		return "replay"
	case Drop:
		return "drop"
	}
	return "unknown"
}

// Begin is the answer to Coordinator.Begin.
type Begin struct {
	State State
	// Record is set with Replay.
	Record []byte
}

// Finish describes how one message ended.
type Finish struct {
	// Spawned is how many messages this one published (successors, a retry).
	Spawned int
	// Record is opaque to the coordinator; Begin returns its encoding on
	// Replay. It may be nil.
	Record Record
	// End, when the message ended its branch, holds that branch's context to
	// merge into the execution's final context: a top-level merge in which
	// the later Finish wins a key. Values are JSON values (as encoding/json
	// decodes them into any); coordinators that serialise return them so
	// (numbers as float64), in-process ones as given. The caller does not
	// modify End after the call.
	End map[string]any
	// Halt, when set, halts the execution with this reason.
	Halt *message.Failure
	// Mode says whether the caller called Begin and whether the message is
	// to be recorded only if it ends the execution; the zero value,
	// FinishBegun, is the usual Finish after Begin said Run.
	Mode FinishMode
	// Hold, when not zero, is the latest time something this message
	// leads to is held back until: a successor published with a delay (a
	// retry's backoff) or the deadline of a barrier's timeout it armed. A
	// coordinator whose state of a live execution expires keeps it at
	// least until Hold plus its TTL, as Park does for a due time.
	Hold time.Time
}

// FinishMode is what the caller of Finish knows of the message: whether it
// called Begin (which said Run), and whether it asks for the message to be
// recorded only if that ends the execution. Each mode's contract is its
// constant's; Outcome.Case is which answer a Finish in that mode got.
type FinishMode uint8

const (
	// FinishBegun: the caller called Begin, which said Run. Finish records
	// the message (Recorded) or, when id had finished before, changes
	// nothing (Duplicate, DuplicatePublished).
	FinishBegun FinishMode = iota
	// FinishOptimistic: the caller ran the message without Begin (one round
	// trip instead of two, for work that may be repeated). Finish then
	// makes Begin's checks first and, where Begin would not have said Run,
	// changes nothing and returns that verdict: Replayed with the stored
	// Record when id had finished, Dropped when the execution is halted.
	// The caller then goes on as after that Begin. Otherwise it is
	// FinishBegun (Recorded).
	FinishOptimistic
	// FinishIfLast: FinishBegun, but recording the message only if that
	// ends the execution: Spawned is 0 and no other message is live.
	// Otherwise Finish changes nothing and returns NotLast. A message that
	// finished before gets the answer of FinishBegun (Duplicate,
	// DuplicatePublished). A caller whose statuses must not be overtaken by
	// another message's completion asks so: as the completer it publishes
	// them with its completion, and only otherwise must it publish them
	// before its Finish.
	FinishIfLast
	// FinishOptimisticIfLast: FinishOptimistic's checks first (Replayed,
	// Dropped), then FinishIfLast's (NotLast); a message run without Begin
	// asks whether it is the last at no cost.
	FinishOptimisticIfLast
)

// Optimistic reports whether Finish in mode m makes Begin's checks first
// (FinishOptimistic, FinishOptimisticIfLast).
func (m FinishMode) Optimistic() bool {
	return m == FinishOptimistic || m == FinishOptimisticIfLast
}

// IfLast reports whether Finish in mode m records the message only if that
// ends the execution (FinishIfLast, FinishOptimisticIfLast).
func (m FinishMode) IfLast() bool {
	return m == FinishIfLast || m == FinishOptimisticIfLast
}

func (m FinishMode) String() string {
	switch m {
	case FinishBegun:
		return "begun"
	case FinishOptimistic:
		return "optimistic"
	case FinishIfLast:
		return "if-last"
	case FinishOptimisticIfLast:
		return "optimistic-if-last"
	}
	return "unknown"
}

// Encode checks f for a Finish of exec and encodes its Record (nil when it
// has none), for coordinators that serialise: a negative Spawned is an
// error, an empty exec ErrUnknownExecution.
func (f Finish) Encode(exec string) ([]byte, error) {
	if f.Spawned < 0 {
		return nil, fmt.Errorf("spawned is %d, want at least 0", f.Spawned)
	}
	if exec == "" {
		return nil, ErrUnknownExecution
	}
	if f.Record == nil {
		return nil, nil
	}
	rec, err := f.Record.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("encode Record: %w", err)
	}
	return rec, nil
}

// Record is what Finish stores for Replay. Coordinators that serialise
// encode it at Finish; in-process ones may keep the value and encode it only
// when Begin replays it, which keeps encoding off the embedded hot path.
type Record interface {
	MarshalBinary() ([]byte, error)
}

// Bytes is a Record already encoded.
type Bytes []byte

// MarshalBinary returns b.
func (b Bytes) MarshalBinary() ([]byte, error) { return b, nil }

// Outcome is the answer to Coordinator.Finish: which case it is, and what
// goes with that case.
type Outcome struct {
	Case Case
	// Record is what the message's first Finish stored, with Replayed.
	Record []byte
	// Completion is set when this Finish ended the execution (Recorded),
	// and again on its duplicates (Duplicate, DuplicatePublished): its
	// caller publishes the execution's completion. Exactly one message's
	// Finish gets it.
	Completion *Completion
}

// Last reports whether o's Finish is the one that ended the execution.
func (o Outcome) Last() bool { return o.Completion != nil }

func (o Outcome) String() string {
	s := o.Case.String()
	if o.Case == Replayed {
		s += fmt.Sprintf(" record %q", o.Record)
	}
	if c := o.Completion; c != nil {
		s += fmt.Sprintf(" last: %s failure %+v context %v", c.Status, c.Failure, c.FinalContext)
	}
	return s
}

// Case is which answer a Finish got.
type Case uint8

const (
	// Recorded: this Finish recorded the message (with Completion when it
	// ended the execution).
	Recorded Case = iota
	// Duplicate: id had finished before; nothing changed. Completion is set
	// when that first Finish ended the execution.
	Duplicate
	// DuplicatePublished: a Duplicate whose execution has ended and whose
	// completion was recorded published (Coordinator.Published). Then
	// every message of the execution has finished and its successors have
	// been delivered: the caller republishes nothing but the message's own
	// statuses, and for the completer (Completion set) not even those, as
	// they went out with the completion.
	DuplicatePublished
	// Replayed: an optimistic Finish (FinishOptimistic,
	// FinishOptimisticIfLast) of an id that had finished: nothing changed;
	// Record is what it stored. The caller goes on as after Begin's Replay.
	Replayed
	// Dropped: an optimistic Finish in a halted execution: nothing changed.
	// The caller goes on as after Begin's Drop.
	Dropped
	// NotLast: a FinishIfLast or FinishOptimisticIfLast whose message would
	// not have ended the execution: nothing changed.
	NotLast
)

func (c Case) String() string {
	switch c {
	case Recorded:
		return "recorded"
	case Duplicate:
		return "duplicate"
	case DuplicatePublished:
		return "duplicate-published"
	case Replayed:
		return "replayed"
	case Dropped:
		return "dropped"
	case NotLast:
		return "not-last"
	}
	return "unknown"
}

// Completion is how the execution ended, in the Outcome of the Finish that
// ended it.
type Completion struct {
	// Status is message.CompletionCompleted, or message.CompletionHalted
	// when any Finish carried Halt.
	Status string
	// Failure is why the execution halted (the first Halt).
	Failure *message.Failure
	// FinalContext is the union of every ended branch's End; never nil.
	// The caller owns it.
	FinalContext map[string]any
}

// ErrUnknownExecution is returned by Finish for an execution that was never
// started, whose state has expired, or that has already ended.
var ErrUnknownExecution = errors.New("unknown execution")
