package coord

import (
	"context"
	"time"
)

// Timers is the durable timer store of RFC 006 (wait and delay nodes): a
// schedule of timer ids by due time plus the frozen payload of each.
//
// A timer is delivered at least once: Claim leases due timers to one caller
// until the lease passes; the caller publishes their effects and then calls
// Done. A caller that dies between Claim and Done loses nothing: once its
// lease has passed, the next Claim by anyone returns the timer again. Several
// schedulers may Claim at once; a timer is leased to one of them at a time.
//
// Leases are short and renewed (Extend) while their holder lives, so a dead
// holder's timers are claimed again within a lease. Each claim of a timer
// has its own Claims count, which fences a holder that was frozen past its
// lease: Extend tells it the timer is no longer its own, and it must not
// publish the timer's effects.
type Timers interface {
	// Schedule stores payload under id (not empty), due at due, kept to the
	// millisecond; a due time in the past is claimable at once. Scheduling an
	// id that is already scheduled or claimed changes nothing, the first
	// payload and due time stay (a redelivered suspend never doubles a
	// timer). Once Done, an id is forgotten and may be scheduled anew.
	Schedule(ctx context.Context, id string, due time.Time, payload []byte) error
	// Claim leases up to max (at least 1) timers until now+lease (lease
	// positive), chosen among those due at or before now and those claimed
	// earlier whose lease had passed by now, and returns them ordered by due
	// time, earliest first (so a timer whose claimer died is not starved by
	// newer due ones). It returns an empty slice when none is claimable.
	Claim(ctx context.Context, now time.Time, max int, lease time.Duration) ([]Timer, error)
	// Extend renews the leases of held timers (each as Claim returned it)
	// until now+lease (lease positive) and returns the ids among them that
	// the caller no longer holds: done, or claimed again since its claim
	// (their Claims count changed). A timer whose lease passed but that no
	// one claimed again is still held, and renewed. The caller must not
	// publish the effects of a timer it no longer holds: its new claimer
	// fires it.
	Extend(ctx context.Context, now time.Time, lease time.Duration, held ...Timer) (lost []string, err error)
	// Done removes timer id for good, claimed or still scheduled. Removing an
	// unknown id is not an error.
	Done(ctx context.Context, id string) error
	// Wake makes each waiting timer of ids due at now, unless it is due
	// earlier: a halted execution's suspended branches are woken so they end
	// now rather than at their due time. Claimed, done and unknown ids are
	// left alone.
	Wake(ctx context.Context, now time.Time, ids ...string) error
	// Stats counts the timers waiting and those claimed and not yet done.
	Stats(ctx context.Context) (TimerStats, error)
}

// Timer is a claimed timer.
type Timer struct {
	ID      string
	Due     time.Time
	Payload []byte
	// Claims is how many times this timer has been claimed, this one included;
	// more than 1 means an earlier claimer's lease ran out.
	Claims int
}

// TimerStats is a snapshot of a timer store.
type TimerStats struct {
	Scheduled int64
	Claimed   int64
	// NextDue is the due time of the earliest scheduled timer (zero when none).
	NextDue time.Time
}
