package coord

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"
)

// Events matches the events users send (POST /v1/events) to the branches
// waiting for them (the wait_for_event node, issue 34). A waiting branch is
// a timer in Timers, due at the wait's timeout; its wait is registered here
// under the timer's id for one (name, key) pair. Delivering an event matches
// every wait registered for its pair, and the caller wakes their timers
// (Timers.Wake): the branch resumes through the timer path like a wait's,
// and Take tells it which event it got (or none: the timeout).
//
// Events are retained until their Keep time, matched or not, so that a
// branch registering its wait after the event arrived (the event was sent
// after its execution started but before the branch reached the node) still
// gets it: Register matches it to the earliest retained event of its pair
// received at or after its Since (the execution's start).
//
// Every method is safe for concurrent use by many processes and idempotent:
// a redelivered suspend, a repeated delivery (an Idempotency-Key) or a
// resumed timer claimed again changes nothing twice.
type Events interface {
	// Register records that timer w.Timer waits for w's pair until w.Due.
	// When an event of the pair received at or after w.Since is retained
	// (its Keep after now), the wait is matched to the earliest such event
	// at once and Register returns it: the caller then wakes the timer.
	// Registering a timer already registered, matched or taken changes
	// nothing and returns its match (nil when it has none).
	Register(ctx context.Context, now time.Time, w EventWait) (*Event, error)
	// Deliver records ev (ID, Name and Key not empty), retained until
	// ev.Keep, and matches every wait registered for its pair that it can
	// (those whose Since is not after ev.At): each is matched to ev and no
	// longer registered. It returns the timers it matched, for the caller
	// to wake. Delivering an ID of the pair delivered before changes nothing
	// and returns the timers the first delivery matched (a caller that
	// crashed before waking them wakes them again).
	Deliver(ctx context.Context, ev Event) (matched []string, err error)
	// Take ends wait w (its Timer, Name and Key as registered) and returns
	// the event it was matched to, or nil when it had none: then no later
	// Deliver or Register matches it (its branch timed out). Taking again
	// returns the same answer; taking an unknown wait returns nil.
	Take(ctx context.Context, w EventWait) (*Event, error)
	// Forget drops what is kept of wait w once its branch has resumed for
	// good. Waits are also dropped a week after their Due
	// (EventWaitGrace), so a lost Forget costs only memory for a while.
	Forget(ctx context.Context, w EventWait) error
}

// Event is one event sent to the waiting branches.
type Event struct {
	// ID names the event within its pair: a repeated delivery of an ID is
	// recognised.
	ID string `json:"id"`
	// Name and Key are the pair waits register for.
	Name string `json:"event"`
	Key  string `json:"key"`
	// Data is the event's JSON value (nil: none).
	Data []byte `json:"data,omitempty"`
	// At is when the event was received.
	At time.Time `json:"received_at"`
	// Keep is until when the event is retained for waits registered later.
	Keep time.Time `json:"keep"`
}

// EventWait is a branch's wait for one pair.
type EventWait struct {
	// Timer is the id of the waiting branch's timer.
	Timer string
	// Name and Key are the pair waited for.
	Name, Key string
	// Since is the earliest receipt time of an event this wait takes: the
	// execution's start (zero: any retained event).
	Since time.Time
	// Due is the wait's timeout.
	Due time.Time
}

// EventWaitGrace is how long after its Due a wait is kept at least, for a
// timer whose scheduler was late to claim it.
const EventWaitGrace = 7 * 24 * time.Hour

// ErrInvalidEvent is returned for an event or wait missing a field.
var ErrInvalidEvent = errors.New("invalid event")

// CheckEvent checks the fields every store needs of ev.
func CheckEvent(ev Event) error {
	switch {
	case ev.ID == "":
		return errors.Join(ErrInvalidEvent, errors.New("event id is empty"))
	case ev.Name == "":
		return errors.Join(ErrInvalidEvent, errors.New("event name is empty"))
	case ev.Key == "":
		return errors.Join(ErrInvalidEvent, errors.New("event key is empty"))
	}
	return nil
}

// CheckEventWait checks the fields every store needs of w.
func CheckEventWait(w EventWait) error {
	switch {
	case w.Timer == "":
		return errors.Join(ErrInvalidEvent, errors.New("wait's timer id is empty"))
	case w.Name == "":
		return errors.Join(ErrInvalidEvent, errors.New("wait's event name is empty"))
	case w.Key == "":
		return errors.Join(ErrInvalidEvent, errors.New("wait's event key is empty"))
	}
	return nil
}

// EventPair is a short, fixed-size name of the pair (name, key): 32 hex
// digits of a SHA-256 of both, which keys of any length and content map to
// (a Redis hash tag, an index column).
func EventPair(name, key string) string {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write([]byte(key))
	var b [sha256.Size]byte
	return hex.EncodeToString(h.Sum(b[:0])[:16])
}
