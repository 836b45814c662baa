package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/rune-org/rune/coord"
)

// Limiter implements coord.Limiter on the Store's file (coord_rate,
// coord_rate_res, coord_window): each call is one write in the group
// commit, so a reservation or admission that returned survives a kill -9.
// The sweep deletes rows past their until.
type Limiter struct{ s *Store }

var _ coord.Limiter = (*Limiter)(nil)

// Limiter is the store's coord.Limiter.
func (s *Store) Limiter() *Limiter { return &Limiter{s: s} }

// Reserve implements coord.Limiter.
func (l *Limiter) Reserve(ctx context.Context, key, id string, r coord.Rate, now time.Time) (time.Time, error) {
	if err := coord.CheckLimiterArgs(key, id, r, false); err != nil {
		return time.Time{}, fmt.Errorf("coord/sqlite: Limiter.Reserve: %w", err)
	}
	nowUs, keep := now.UnixMicro(), coord.LimiterRetain.Microseconds()
	var start int64
	err := l.s.write(ctx, func(tx *sql.Tx) error {
		err := l.s.stmt(tx, "rate_reserved").QueryRow(key, id, nowUs).Scan(&start)
		if err == nil || !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		var tat int64
		if err := l.s.stmt(tx, "rate_tat").QueryRow(key, nowUs).Scan(&tat); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		tat = max(tat, nowUs)
		start = max(nowUs, tat-r.Tolerance().Microseconds())
		ntat := tat + r.Interval().Microseconds()
		if _, err := l.s.stmt(tx, "rate_take").Exec(key, ntat, ntat+keep); err != nil {
			return err
		}
		_, err = l.s.stmt(tx, "rate_res_put").Exec(key, id, start, start+keep)
		return err
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("coord/sqlite: Limiter.Reserve %q: %w", key, err)
	}
	return time.UnixMicro(start).UTC(), nil
}

// Admit implements coord.Limiter.
func (l *Limiter) Admit(ctx context.Context, key, id string, r coord.Rate, now time.Time) (coord.Admission, error) {
	if err := coord.CheckLimiterArgs(key, id, r, true); err != nil {
		return coord.Admission{}, fmt.Errorf("coord/sqlite: Limiter.Admit: %w", err)
	}
	nowUs, per := now.UnixMicro(), r.Per.Microseconds()
	var a coord.Admission
	err := l.s.write(ctx, func(tx *sql.Tx) error {
		a = coord.Admission{}
		if _, err := l.s.stmt(tx, "window_trim").Exec(key, nowUs-per); err != nil {
			return err
		}
		var one int
		err := l.s.stmt(tx, "window_has").QueryRow(key, id).Scan(&one)
		if err == nil {
			a.OK = true
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		var n int
		if err := l.s.stmt(tx, "window_count").QueryRow(key).Scan(&n); err != nil {
			return err
		}
		if n >= r.Limit {
			var at int64
			if err := l.s.stmt(tx, "window_nth").QueryRow(key, n-r.Limit).Scan(&at); err != nil {
				return err
			}
			a.RetryAt = time.UnixMicro(at + per).UTC()
			return nil
		}
		a.OK = true
		_, err = l.s.stmt(tx, "window_add").Exec(key, id, nowUs, nowUs+per)
		return err
	})
	if err != nil {
		return coord.Admission{}, fmt.Errorf("coord/sqlite: Limiter.Admit %q: %w", key, err)
	}
	return a, nil
}
