package sqlite

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/store/internal/sqlstore"
	"github.com/rune-org/rune/store/sqlfile"
)

//go:embed triggers.sql
var triggersSQL string

var triggerQueries = sqlfile.MustParse(triggersSQL)

func scanHook(s scanner) (*store.Hook, error) {
	var h store.Hook
	var settings string
	var keyID sql.NullString
	var created, updated int64
	if err := s.Scan(&h.ID, &h.WorkflowID, &h.Name, &h.SecretHash, &settings, &keyID, &h.SigningSecret,
		&h.Disabled, &created, &updated); err != nil {
		return nil, err
	}
	h.Settings, h.SigningKeyID = []byte(settings), keyID.String
	h.CreatedAt, h.UpdatedAt = timeOf(created), timeOf(updated)
	return &h, nil
}

func scanSchedule(s scanner) (*store.Schedule, error) {
	var sc store.Schedule
	var settings string
	var next, last sql.NullInt64
	var created, updated int64
	if err := s.Scan(&sc.ID, &sc.WorkflowID, &sc.Name, &settings, &sc.Paused, &next, &last, &created, &updated); err != nil {
		return nil, err
	}
	sc.Settings = []byte(settings)
	sc.NextAt, sc.LastSlot = timePtrOf(next), timePtrOf(last)
	sc.CreatedAt, sc.UpdatedAt = timeOf(created), timeOf(updated)
	return &sc, nil
}

func settingsOf(b []byte) string {
	if len(b) == 0 {
		return "{}"
	}
	return string(b)
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// one returns the single row of query, or ErrNotFound naming what.
func one[T any](ctx context.Context, s *Store, scan func(scanner) (T, error), what, query string, args ...any) (T, error) {
	v, err := scan(s.r.QueryRowContext(ctx, query, args...))
	return v, got("get "+what, what, err)
}

// exec runs a write of one row: none (ErrNotFound, or ErrConflict for an
// insert) when it touched none.
func (s *Store) exec(ctx context.Context, what string, none error, query string, args ...any) error {
	return s.tx(ctx, what, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, query, args...)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("%s: %w", what, none)
		}
		return nil
	})
}

func (s *Store) CreateHook(ctx context.Context, h *store.Hook) error {
	if err := sqlstore.CheckHook(h); err != nil {
		return err
	}
	return s.exec(ctx, "hook "+h.ID, store.ErrConflict, triggerQueries["hook_insert"], h.ID, h.WorkflowID, h.Name,
		h.SecretHash, settingsOf(h.Settings), nullString(h.SigningKeyID), h.SigningSecret, h.Disabled,
		micros(h.CreatedAt), micros(h.UpdatedAt))
}

func (s *Store) GetHook(ctx context.Context, id string) (*store.Hook, error) {
	return one(ctx, s, scanHook, "hook "+id, triggerQueries["hook_get"], id)
}

func (s *Store) HookBySecret(ctx context.Context, hash []byte) (*store.Hook, error) {
	return one(ctx, s, scanHook, "hook", triggerQueries["hook_by_secret"], hash)
}

func (s *Store) ListHooks(ctx context.Context, workflowID string) ([]*store.Hook, error) {
	hs, err := queryAll(ctx, s.r, scanHook, triggerQueries["hook_list"], workflowID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list hooks of %s: %w", workflowID, err)
	}
	return hs, nil
}

func (s *Store) UpdateHook(ctx context.Context, h *store.Hook) error {
	if err := sqlstore.CheckHook(h); err != nil {
		return err
	}
	return s.exec(ctx, "hook "+h.ID, store.ErrNotFound, triggerQueries["hook_update"], h.ID, h.Name, h.SecretHash,
		settingsOf(h.Settings), nullString(h.SigningKeyID), h.SigningSecret, h.Disabled, micros(h.UpdatedAt))
}

func (s *Store) DeleteHook(ctx context.Context, id string) error {
	return s.exec(ctx, "hook "+id, store.ErrNotFound, triggerQueries["hook_delete"], id)
}

func (s *Store) CreateSchedule(ctx context.Context, sc *store.Schedule) error {
	if err := sqlstore.CheckSchedule(sc); err != nil {
		return err
	}
	return s.exec(ctx, "schedule "+sc.ID, store.ErrConflict, triggerQueries["schedule_insert"], sc.ID, sc.WorkflowID,
		sc.Name, settingsOf(sc.Settings), sc.Paused, microsPtr(sc.NextAt), microsPtr(sc.LastSlot),
		micros(sc.CreatedAt), micros(sc.UpdatedAt))
}

func (s *Store) GetSchedule(ctx context.Context, id string) (*store.Schedule, error) {
	return one(ctx, s, scanSchedule, "schedule "+id, triggerQueries["schedule_get"], id)
}

func (s *Store) ListSchedules(ctx context.Context, workflowID string) ([]*store.Schedule, error) {
	scs, err := queryAll(ctx, s.r, scanSchedule, triggerQueries["schedule_list"], workflowID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list schedules of %s: %w", workflowID, err)
	}
	return scs, nil
}

func (s *Store) UpdateSchedule(ctx context.Context, sc *store.Schedule) error {
	if err := sqlstore.CheckSchedule(sc); err != nil {
		return err
	}
	return s.exec(ctx, "schedule "+sc.ID, store.ErrNotFound, triggerQueries["schedule_update"], sc.ID, sc.Name,
		settingsOf(sc.Settings), sc.Paused, microsPtr(sc.NextAt), microsPtr(sc.LastSlot), micros(sc.UpdatedAt))
}

func (s *Store) DeleteSchedule(ctx context.Context, id string) error {
	return s.exec(ctx, "schedule "+id, store.ErrNotFound, triggerQueries["schedule_delete"], id)
}

func (s *Store) DueSchedules(ctx context.Context, now time.Time, limit int) ([]*store.Schedule, error) {
	scs, err := queryAll(ctx, s.r, scanSchedule, triggerQueries["schedule_due"], micros(orNow(now)), sqlstore.ListLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("sqlite: due schedules: %w", err)
	}
	return scs, nil
}

func (s *Store) FireSchedule(ctx context.Context, f store.Fire) ([]*store.Execution, error) {
	xs, err := sqlstore.CheckFire(&f)
	if err != nil {
		return nil, err
	}
	var created []*store.Execution
	// The write transaction is IMMEDIATE: it holds the file's write lock,
	// so the compare-and-set is atomic across processes too.
	err = s.tx(ctx, "fire schedule "+f.ScheduleID, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, triggerQueries["schedule_fire"], f.ScheduleID, micros(f.From), microsPtr(f.Next),
			micros(f.LastSlot), micros(f.At))
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return sqlstore.SlotTaken(f)
		}
		for _, x := range xs {
			x, ok, err := createExecution(ctx, tx, x)
			if errors.Is(err, store.ErrNotFound) || err == nil && !ok {
				continue // the slot's execution exists, or the workflow was deleted
			}
			if err != nil {
				return err
			}
			created = append(created, x)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return created, nil
}

func (s *Store) ClaimSignature(ctx context.Context, hookID string, sig []byte, executionID string, expires, now time.Time) (string, error) {
	owner := executionID
	err := s.tx(ctx, "claim hook signature", func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, triggerQueries["signature_prune"], hookID, micros(now)); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, triggerQueries["signature_claim"], hookID, sig, executionID, micros(expires), micros(now))
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n > 0 {
			return nil
		}
		return tx.QueryRowContext(ctx, triggerQueries["signature_owner"], hookID, sig).Scan(&owner)
	})
	return owner, err
}

func (s *Store) MoveSignature(ctx context.Context, hookID string, sig []byte, from, to string) error {
	q, args := triggerQueries["signature_move"], []any{hookID, sig, from, to}
	if to == "" {
		q, args = triggerQueries["signature_forget"], args[:3]
	}
	return s.tx(ctx, "move hook signature", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, q, args...)
		return err
	})
}
