package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rune-org/rune/coord"
)

// Timers implements coord.Timers on the Store's file: a row of coord_timer
// per timer (due time in Unix ms, claims, lease deadline, payload), with a
// partial index of the waiting ones by due time and one of the claimed ones
// by lease deadline, so Claim reads only what it takes. A claim is one
// UPDATE … RETURNING. Timers never expire: Done removes them.
//
// Claim first asks the reader pool whether anything is claimable, so an
// idle scheduler's polls never queue on the writer.
type Timers struct{ s *Store }

var _ coord.Timers = (*Timers)(nil)

// Schedule implements coord.Timers.
func (t *Timers) Schedule(ctx context.Context, id string, due time.Time, payload []byte) error {
	if id == "" {
		return errors.New("coord/sqlite: Timers.Schedule: empty timer id")
	}
	if payload == nil {
		payload = []byte{} // NOT NULL
	}
	err := t.s.write(ctx, func(tx *sql.Tx) error {
		_, err := t.s.stmt(tx, "timer_schedule").Exec(id, due.UnixMilli(), payload)
		return err
	})
	if err != nil {
		return fmt.Errorf("coord/sqlite: Timers.Schedule %q: %w", id, err)
	}
	return nil
}

// Claim implements coord.Timers.
func (t *Timers) Claim(ctx context.Context, now time.Time, limit int, lease time.Duration) ([]coord.Timer, error) {
	if limit < 1 || lease <= 0 {
		return nil, fmt.Errorf("coord/sqlite: Timers.Claim: max %d and lease %v, want max at least 1 and a positive lease", limit, lease)
	}
	nowMs := now.UnixMilli()
	deadline := nowMs + max(lease.Milliseconds(), 1)
	var claimable bool
	if err := t.s.read("r_timer_claimable").QueryRowContext(ctx, nowMs).Scan(&claimable); err != nil {
		return nil, fmt.Errorf("coord/sqlite: Timers.Claim: %w", err)
	}
	if !claimable {
		return []coord.Timer{}, nil
	}
	var out []coord.Timer
	err := t.s.write(ctx, func(tx *sql.Tx) error {
		out = out[:0]
		rows, err := t.s.stmt(tx, "timer_claim").Query(nowMs, limit, deadline)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				tm  coord.Timer
				due int64
			)
			if err := rows.Scan(&tm.ID, &due, &tm.Claims, &tm.Payload); err != nil {
				return err
			}
			tm.Due = time.UnixMilli(due)
			if tm.Payload == nil {
				tm.Payload = []byte{}
			}
			out = append(out, tm)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("coord/sqlite: Timers.Claim: %w", err)
	}
	// RETURNING has no order. A re-claimed timer before a first claim of
	// the same due time, as the query chose them.
	slices.SortFunc(out, func(a, b coord.Timer) int {
		if c := a.Due.Compare(b.Due); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Claims, a.Claims); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	if out == nil {
		out = []coord.Timer{}
	}
	return out, nil
}

// Extend implements coord.Timers: a claim is fenced by its Claims count.
func (t *Timers) Extend(ctx context.Context, now time.Time, lease time.Duration, held ...coord.Timer) ([]string, error) {
	if lease <= 0 {
		return nil, fmt.Errorf("coord/sqlite: Timers.Extend: lease %v, want a positive lease", lease)
	}
	if len(held) == 0 {
		return nil, nil
	}
	deadline := now.UnixMilli() + max(lease.Milliseconds(), 1)
	var lost []string
	err := t.s.write(ctx, func(tx *sql.Tx) error {
		lost = lost[:0]
		st := t.s.stmt(tx, "timer_extend")
		for _, h := range held {
			n, err := affected(st.Exec(h.ID, deadline, h.Claims))
			if err != nil {
				return err
			}
			if n == 0 {
				lost = append(lost, h.ID)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("coord/sqlite: Timers.Extend: %w", err)
	}
	return lost, nil
}

// Done implements coord.Timers.
func (t *Timers) Done(ctx context.Context, id string) error {
	err := t.s.write(ctx, func(tx *sql.Tx) error {
		_, err := t.s.stmt(tx, "timer_done").Exec(id)
		return err
	})
	if err != nil {
		return fmt.Errorf("coord/sqlite: Timers.Done %q: %w", id, err)
	}
	return nil
}

// Wake implements coord.Timers: a claimed or done timer is untouched.
func (t *Timers) Wake(ctx context.Context, now time.Time, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	at := now.UnixMilli()
	err := t.s.write(ctx, func(tx *sql.Tx) error {
		st := t.s.stmt(tx, "timer_wake")
		for _, id := range ids {
			if _, err := st.Exec(id, at); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("coord/sqlite: Timers.Wake: %w", err)
	}
	return nil
}

// Stats implements coord.Timers. It counts rows: O(timers), for
// monitoring rather than a hot path.
func (t *Timers) Stats(ctx context.Context) (coord.TimerStats, error) {
	var (
		s    coord.TimerStats
		next sql.NullInt64
	)
	if err := t.s.read("r_timer_stats").QueryRowContext(ctx).Scan(&s.Scheduled, &s.Claimed, &next); err != nil {
		return coord.TimerStats{}, fmt.Errorf("coord/sqlite: Timers.Stats: %w", err)
	}
	if next.Valid {
		s.NextDue = time.UnixMilli(next.Int64)
	}
	return s, nil
}
