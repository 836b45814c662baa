package coord

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Limiter is the flow control of node runs by key (issues 35 and 36): a
// rate limit that spaces the starts of the runs sharing a key (Reserve), and
// a throttle that admits at most a number of runs per window (Admit). Every
// worker of a runtime shares one Limiter, so a key's limit holds across
// them. Times are the callers' clocks: the workers' clocks must agree (as
// the timer store's due times already assume).
//
// Both calls are idempotent per id (a node run: its message id): a
// redelivered run, or a deferred run that comes back when its time has
// come, gets the answer its first call got and takes no second slot, for as
// long as the store keeps the id (at least a day after the slot).
//
// Keys and ids are not empty; a Limiter may bound their length.
type Limiter interface {
	// Reserve takes the next start slot of key under rate r for id and
	// returns the time the run may start, now or later. It is the GCRA
	// (generic cell rate algorithm) as a scheduler: with T = r.Per/r.Limit
	// and a tolerance of (r.Burst-1)·T, a key's reservations start no
	// closer than T apart once its burst is spent, so any span of r.Per
	// holds at most r.Limit+r.Burst-1 starts (r.Limit with Burst 1). An
	// id that holds a reservation of key gets its time again.
	Reserve(ctx context.Context, key, id string, r Rate, now time.Time) (time.Time, error)
	// Admit counts id in key's sliding window of r.Per ending at now, if
	// fewer than r.Limit ids are counted in it (or id already is): OK.
	// Otherwise it counts nothing and says when the window will have room
	// (RetryAt: the oldest counted id's time plus r.Per). r.Burst is
	// ignored.
	Admit(ctx context.Context, key, id string, r Rate, now time.Time) (Admission, error)
}

// Rate is a limit of Limit runs per Per; Burst (Reserve only; 0 means 1)
// is how many of them may start at once.
type Rate struct {
	Limit int
	Per   time.Duration
	Burst int
}

// Bounds of a Rate, which every Limiter accepts.
const (
	MaxRateLimit = 1_000_000
	// MaxThrottleLimit bounds Admit's limit: a window keeps one entry
	// per admitted id.
	MaxThrottleLimit = 10_000
	MinRatePer       = time.Millisecond
	MaxRatePer       = 366 * 24 * time.Hour
	// MaxLimiterKey bounds a key's length in bytes.
	MaxLimiterKey = 600 // a workflow's 512 and the engine's own prefixes
)

// Check reports why r cannot be used (throttle: by Admit).
func (r Rate) Check(throttle bool) error {
	max := MaxRateLimit
	if throttle {
		max = MaxThrottleLimit
	}
	switch {
	case r.Limit < 1 || r.Limit > max:
		return fmt.Errorf("limit %d is out of range: want 1 to %d", r.Limit, max)
	case r.Per < MinRatePer || r.Per > MaxRatePer:
		return fmt.Errorf("per %s is out of range: want %s to %s", r.Per, MinRatePer, MaxRatePer)
	case r.Burst < 0 || r.Burst > r.Limit:
		return fmt.Errorf("burst %d is out of range: want 1 to the limit, %d", r.Burst, r.Limit)
	}
	return nil
}

// Interval is the GCRA's emission interval, Per/Limit (at least 1 µs).
func (r Rate) Interval() time.Duration {
	return max(r.Per/time.Duration(r.Limit), time.Microsecond)
}

// Tolerance is the GCRA's burst tolerance, (Burst-1)·Interval.
func (r Rate) Tolerance() time.Duration {
	return time.Duration(max(r.Burst, 1)-1) * r.Interval()
}

// Admission is Admit's answer.
type Admission struct {
	OK bool
	// RetryAt, when not OK, is the first time the window has room.
	RetryAt time.Time
}

// LimiterRetain is how long a Limiter keeps an id after its slot (or, for
// Admit, after its window): long enough for a deferred run to come back.
const LimiterRetain = 24 * time.Hour

// CheckLimiterArgs is what every Limiter checks of its arguments.
func CheckLimiterArgs(key, id string, r Rate, throttle bool) error {
	switch {
	case key == "":
		return errors.New("empty key")
	case len(key) > MaxLimiterKey:
		return fmt.Errorf("key of %d bytes is longer than %d", len(key), MaxLimiterKey)
	case id == "":
		return errors.New("empty id")
	}
	return r.Check(throttle)
}
