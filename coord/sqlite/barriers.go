package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/rune-org/rune/coord"
)

// Barriers implements coord.Barriers on the Store's file: a barrier is a
// row of coord_bar (status, Total, Need, distinct arrivals, completing
// slot), its values rows of coord_barval by slot, written once each, and
// Open's state the row of slot -1.
//
// Unlike Redis, a barrier of an execution the Store's Coordinator knows
// does not expire while the execution lives, whatever its spec's TTL: a
// merge whose slow parent waits for weeks still completes. It goes with
// the execution's state, Options.Retain after the execution ended. Closed
// barriers stay as markers as long, so late arrivals cannot open them anew.
// A completed barrier's values and state are kept Options.BarrierRetain
// for its completer's repeat; a cancelled one's are deleted at once (by
// the sweep). Only a barrier of an execution the store does not know (the
// conformance suite's; never the engine's, which starts every execution
// first) lives its spec's TTL after its last arrival or its closing.
//
// The values of a completed Arrival are fresh copies, unshared.
type Barriers struct{ s *Store }

var _ coord.Barriers = (*Barriers)(nil)

// Barrier statuses in coord_bar.
const (
	barOpen      = 0
	barDone      = 1
	barCancelled = 2
)

// barRow is a barrier's coord_bar row.
type barRow struct {
	status, total, n, need int
	win                    sql.NullInt64
	valsUntil              sql.NullInt64
	orphan                 bool // expires is set: its execution is unknown
}

// get reads barrier key of exec; ok is false when it does not exist.
func (b *Barriers) get(tx *sql.Tx, exec, key string) (r barRow, ok bool, err error) {
	err = b.s.stmt(tx, "bar_get").QueryRow(exec, key).Scan(&r.status, &r.total, &r.n, &r.need, &r.win, &r.valsUntil, &r.orphan)
	if errNoRow(err) {
		return r, false, nil
	}
	return r, err == nil, err
}

// create inserts a barrier. Its expiry is NULL (it lives with its
// execution) when exec is started, else now+ttl.
func (b *Barriers) create(tx *sql.Tx, exec, key string, status, total, need int, ttl time.Duration, nowMs int64) (orphan bool, err error) {
	var known int
	if err := b.s.stmt(tx, "exec_known").QueryRow(exec).Scan(&known); err != nil {
		return false, err
	}
	var expires any
	if known == 0 {
		expires = nowMs + ttl.Milliseconds()
	}
	_, err = b.s.stmt(tx, "bar_insert").Exec(exec, key, status, total, need, ttl.Milliseconds(), expires)
	return known == 0, err
}

// Open implements coord.Barriers.
func (b *Barriers) Open(ctx context.Context, exec, key string, spec coord.BarrierSpec) error {
	ttl, err := spec.Check()
	if err != nil {
		return fmt.Errorf("coord/sqlite: Open barrier %q exec %q: %w", key, exec, err)
	}
	err = b.s.write(ctx, func(tx *sql.Tx) error {
		_, ok, err := b.get(tx, exec, key)
		if err != nil || ok {
			return err
		}
		if _, err := b.create(tx, exec, key, barOpen, spec.Total, spec.Need, ttl, b.s.nowMs()); err != nil {
			return err
		}
		if spec.State == nil {
			return nil
		}
		_, err = b.s.stmt(tx, "barval_insert").Exec(exec, key, -1, spec.State)
		return err
	})
	if err != nil {
		return fmt.Errorf("coord/sqlite: Open barrier %q exec %q: %w", key, exec, err)
	}
	return nil
}

// errSlotRange is an Arrive's slot outside its barrier's Total.
type errSlotRange struct{ slot, total int }

func (e errSlotRange) Error() string {
	return fmt.Sprintf("slot %d out of range 0..%d", e.slot, e.total-1)
}

// Arrive implements coord.Barriers.
func (b *Barriers) Arrive(ctx context.Context, exec, key string, spec coord.BarrierSpec, slot int, value []byte) (coord.Arrival, error) {
	where := func(err error) error {
		return fmt.Errorf("coord/sqlite: Arrive barrier %q exec %q slot %d: %w", key, exec, slot, err)
	}
	ttl, err := spec.Check()
	if err != nil {
		return coord.Arrival{}, where(err)
	}
	if value == nil {
		value = []byte{} // arrived, unlike a nil slot in Values
	}
	var a coord.Arrival
	err = b.s.write(ctx, func(tx *sql.Tx) error {
		var err error
		a, err = b.arrive(tx, exec, key, spec, ttl, slot, value)
		return err
	})
	if err != nil {
		return coord.Arrival{}, where(err)
	}
	return a, nil
}

// arrive is Arrive's write. A new slot of an open barrier takes two
// statements (its value, then the count); anything else reads the barrier
// first (arriveSlow).
func (b *Barriers) arrive(tx *sql.Tx, exec, key string, spec coord.BarrierSpec, ttl time.Duration, slot int, value []byte) (coord.Arrival, error) {
	nowMs := b.s.nowMs()
	expires := nowMs + ttl.Milliseconds() // only kept for an orphan
	n, err := affected(b.s.stmt(tx, "barval_arrive").Exec(exec, key, slot, value))
	if err != nil {
		return coord.Arrival{}, err
	}
	if n == 0 {
		return b.arriveSlow(tx, exec, key, spec, ttl, slot, value, nowMs)
	}
	var arrived, need, total int
	if err := b.s.stmt(tx, "bar_count").QueryRow(exec, key, ttl.Milliseconds(), expires).Scan(&arrived, &need, &total); err != nil {
		return coord.Arrival{}, err
	}
	if arrived < need {
		return coord.Arrival{Arrived: arrived}, nil
	}
	return b.complete(tx, exec, key, arrived, slot, total, ttl, nowMs)
}

// complete marks the barrier completed by slot and returns the completing
// Arrival.
func (b *Barriers) complete(tx *sql.Tx, exec, key string, arrived, slot, total int, ttl time.Duration, nowMs int64) (coord.Arrival, error) {
	valsUntil := nowMs + b.s.opts.BarrierRetain.Milliseconds()
	expires := nowMs + ttl.Milliseconds()
	if _, err := b.s.stmt(tx, "bar_complete").Exec(exec, key, arrived, slot, valsUntil, ttl.Milliseconds(), expires); err != nil {
		return coord.Arrival{}, err
	}
	return b.completed(tx, exec, key, total, coord.Arrival{Arrived: arrived, Complete: true})
}

// arriveSlow is an Arrive the fast path did not count: it reads the
// barrier and answers by the rules, creating it when missing.
func (b *Barriers) arriveSlow(tx *sql.Tx, exec, key string, spec coord.BarrierSpec, ttl time.Duration, slot int, value []byte, nowMs int64) (coord.Arrival, error) {
	r, ok, err := b.get(tx, exec, key)
	if err != nil {
		return coord.Arrival{}, err
	}
	if ok && r.status == barCancelled {
		return coord.Arrival{}, fmt.Errorf("%w: cancelled", coord.ErrBarrierClosed)
	}
	// The barrier's own Total decides, not the caller's spec.
	total := spec.Total
	if ok {
		total = r.total
	}
	if slot < 0 || slot >= total {
		return coord.Arrival{}, errSlotRange{slot, total}
	}
	if !ok {
		r = barRow{status: barOpen, total: spec.Total, need: spec.Need}
		if r.orphan, err = b.create(tx, exec, key, barOpen, spec.Total, spec.Need, ttl, nowMs); err != nil {
			return coord.Arrival{}, err
		}
	}
	if r.status == barDone {
		if int64(slot) == r.win.Int64 && r.valsUntil.Valid && r.valsUntil.Int64 > nowMs {
			return b.completed(tx, exec, key, r.total, coord.Arrival{Duplicate: true, Arrived: r.n, Complete: true})
		}
		return coord.Arrival{}, fmt.Errorf("%w: completed by slot %d", coord.ErrBarrierClosed, r.win.Int64)
	}
	expires := nowMs + ttl.Milliseconds() // only kept for an orphan (see bar_arrived)
	first, err := affected(b.s.stmt(tx, "barval_insert").Exec(exec, key, slot, value))
	if err != nil {
		return coord.Arrival{}, err
	}
	if first == 0 {
		if r.orphan {
			_, err = b.s.stmt(tx, "bar_arrived").Exec(exec, key, r.n, ttl.Milliseconds(), expires)
		}
		return coord.Arrival{Duplicate: true, Arrived: r.n}, err
	}
	n := r.n + 1
	if n < r.need {
		_, err = b.s.stmt(tx, "bar_arrived").Exec(exec, key, n, ttl.Milliseconds(), expires)
		return coord.Arrival{Arrived: n}, err
	}
	return b.complete(tx, exec, key, n, slot, r.total, ttl, nowMs)
}

// completed fills a's Values and State from the barrier's stored values.
func (b *Barriers) completed(tx *sql.Tx, exec, key string, total int, a coord.Arrival) (coord.Arrival, error) {
	rows, err := b.s.stmt(tx, "barval_all").Query(exec, key)
	if err != nil {
		return coord.Arrival{}, err
	}
	defer rows.Close()
	a.Values = make([][]byte, total)
	for rows.Next() {
		var (
			slot int
			v    []byte
		)
		if err := rows.Scan(&slot, &v); err != nil {
			return coord.Arrival{}, err
		}
		if v == nil {
			v = []byte{} // an empty value is an arrival
		}
		switch {
		case slot == -1:
			a.State = v
		case slot >= 0 && slot < total:
			a.Values[slot] = v
		default:
			return coord.Arrival{}, fmt.Errorf("stored value of slot %d, outside 0..%d", slot, total-1)
		}
	}
	return a, rows.Err()
}

// Cancel implements coord.Barriers.
func (b *Barriers) Cancel(ctx context.Context, exec, key string) (bool, error) {
	wasOpen := false
	err := b.s.write(ctx, func(tx *sql.Tx) error {
		nowMs := b.s.nowMs()
		r, ok, err := b.get(tx, exec, key)
		if err != nil {
			return err
		}
		if !ok {
			// Nobody arrived yet: a closed marker, so a late first arrival
			// cannot complete it.
			_, err := b.create(tx, exec, key, barCancelled, 1, 1, DefaultBarrierTTL, nowMs)
			wasOpen = err == nil
			return err
		}
		if r.status != barOpen {
			wasOpen = false
			return nil
		}
		_, err = b.s.stmt(tx, "bar_cancel").Exec(exec, key, nowMs)
		wasOpen = err == nil
		return err
	})
	if err != nil {
		return false, fmt.Errorf("coord/sqlite: Cancel barrier %q exec %q: %w", key, exec, err)
	}
	return wasOpen, nil
}
