package nodes

import (
	"fmt"
	"time"

	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/node"
)

// QuietHours is a subscriber's daily window, "HH:MM" to "HH:MM" in its
// timezone, in which non-critical sends wait (issue 36): From is in the
// window, To is not; From after To spans midnight; From equal to To is no
// window at all (the API refuses it).
type QuietHours struct {
	From, To string
}

// quietUntil returns when the quiet hours q end, if now falls in them as
// the wall clock of loc reads it. The end is the first instant after now
// at which that wall clock reaches To: on a day when To is skipped (a
// spring-forward gap) it is the moment the clock jumps past it, on a day
// when To occurs twice (fall back) its first occurrence after now.
func quietUntil(now time.Time, q QuietHours, loc *time.Location) (time.Time, bool, error) {
	from, err := minuteOfDay(q.From)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("quiet_hours.from: %w", err)
	}
	to, err := minuteOfDay(q.To)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("quiet_hours.to: %w", err)
	}
	if from == to {
		return time.Time{}, false, nil
	}
	t := now.In(loc)
	sec := t.Hour()*3600 + t.Minute()*60 + t.Second()
	f, e := from*60, to*60
	y, m, d := t.Date()
	switch {
	case f < e && sec >= f && sec < e:
	case f > e && sec < e:
	case f > e && sec >= f:
		d++ // ends tomorrow
	default:
		return time.Time{}, false, nil
	}
	return wallClock(now, y, m, d, to/60, to%60, loc), true, nil
}

// wallClock is the first instant after now at which loc's wall clock reads
// h:mi on y-m-d, or the instant it jumps past it when it never does.
func wallClock(now time.Time, y int, m time.Month, d, h, mi int, loc *time.Location) time.Time {
	c := time.Date(y, m, d, h, mi, 0, 0, loc)
	want := time.Date(y, m, d, h, mi, 0, 0, time.UTC) // the wall clock, normalized
	wall := func(x time.Time) time.Time {
		l := x.In(loc)
		return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), 0, time.UTC)
	}
	// An hour that occurs twice (fall back) is read at two offsets: the
	// earlier one still ahead is the end. Offsets differ by multiples of
	// 15 minutes, never by more than 2 hours.
	var best time.Time
	for k := -8; k <= 8; k++ {
		x := c.Add(time.Duration(k) * 15 * time.Minute)
		if wall(x).Equal(want) && x.After(now) && (best.IsZero() || x.Before(best)) {
			best = x
		}
	}
	if !best.IsZero() {
		return best
	}
	// A gap: the wall clock jumps over h:mi where c's zone starts or ends.
	start, end := c.ZoneBounds()
	if wall(c).Before(want) && !end.IsZero() {
		return end
	}
	if wall(c).After(want) && !start.IsZero() {
		return start
	}
	return c
}

// minuteOfDay parses "HH:MM".
func minuteOfDay(s string) (int, error) {
	t, err := time.Parse("15:04", s)
	if err != nil || len(s) != 5 {
		return 0, fmt.Errorf("%q is not a time of day HH:MM", s)
	}
	return t.Hour()*60 + t.Minute(), nil
}

// quietGate defers a send that falls in the subscriber's quiet hours
// (node.Defer with message.ReasonQuietHours); a critical send, one with no
// subscriber or no quiet hours goes on (nil).
func (a *audience) quietGate(rc recipient, in *node.Input) error {
	if a.critical || rc.sub == nil || rc.sub.QuietHours == nil {
		return nil
	}
	loc, err := time.LoadLocation(rc.sub.Timezone) // "" is UTC
	if err != nil {
		return &node.Error{Code: node.CodeInvalidParameter, Message: fmt.Sprintf("parameters.subscriber: subscriber %q has timezone %q, which is not an IANA time zone", rc.sub.ID, rc.sub.Timezone)}
	}
	now := in.Now
	if now.IsZero() {
		now = time.Now()
	}
	end, quiet, err := quietUntil(now, *rc.sub.QuietHours, loc)
	if err != nil {
		return &node.Error{Code: node.CodeInvalidParameter, Message: fmt.Sprintf("parameters.subscriber: subscriber %q: %v", rc.sub.ID, err)}
	}
	if !quiet {
		return nil
	}
	return &node.Defer{Until: end, Reason: message.ReasonQuietHours}
}
