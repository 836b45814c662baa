package store

import "context"

// EventReader reads the event log (a Store does).
type EventReader interface {
	// Events returns events after f.AfterID, oldest first.
	Events(ctx context.Context, f EventFilter) ([]Event, error)
}

// LatestEventID finds the id of the newest event (of execution execID, or
// of all) without a store method for it: "is there an event after x" is
// monotone in x, so a doubling then a bisection of one-row reads finds it
// in about 2·log2(id) reads.
func LatestEventID(ctx context.Context, st EventReader, execID string) (int64, error) {
	exists := func(after int64) (bool, error) {
		evs, err := st.Events(ctx, EventFilter{ExecutionID: execID, AfterID: after, Limit: 1})
		return len(evs) > 0, err
	}
	lo, hi := int64(0), int64(1) // an event exists after lo; none after hi, once found
	if ok, err := exists(0); err != nil || !ok {
		return 0, err
	}
	for {
		ok, err := exists(hi)
		if err != nil {
			return 0, err
		}
		if !ok {
			break
		}
		lo, hi = hi, hi*2
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		ok, err := exists(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi, nil
}
