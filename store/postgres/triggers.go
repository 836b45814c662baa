package postgres

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/store/internal/sqlstore"
	"github.com/rune-org/rune/store/sqlfile"
)

//go:embed triggers.sql
var triggersSQL string

var triggerQueries = sqlfile.MustParse(triggersSQL)

func scanHook(row pgx.CollectableRow) (*store.Hook, error) {
	var h store.Hook
	var settings []byte
	var keyID *string
	if err := row.Scan(&h.ID, &h.WorkflowID, &h.Name, &h.SecretHash, &settings, &keyID, &h.SigningSecret,
		&h.Disabled, &h.CreatedAt, &h.UpdatedAt); err != nil {
		return nil, err
	}
	h.Settings = raw(settings)
	if keyID != nil {
		h.SigningKeyID = *keyID
	}
	h.CreatedAt, h.UpdatedAt = h.CreatedAt.UTC(), h.UpdatedAt.UTC()
	return &h, nil
}

func scanSchedule(row pgx.CollectableRow) (*store.Schedule, error) {
	var sc store.Schedule
	var settings []byte
	if err := row.Scan(&sc.ID, &sc.WorkflowID, &sc.Name, &settings, &sc.Paused, &sc.NextAt, &sc.LastSlot,
		&sc.CreatedAt, &sc.UpdatedAt); err != nil {
		return nil, err
	}
	sc.Settings = raw(settings)
	sc.NextAt, sc.LastSlot = utc(sc.NextAt), utc(sc.LastSlot)
	sc.CreatedAt, sc.UpdatedAt = sc.CreatedAt.UTC(), sc.UpdatedAt.UTC()
	return &sc, nil
}

func settingsOf(b []byte) []byte {
	if len(b) == 0 {
		return []byte("{}")
	}
	return b
}

// one returns the single row of query as T, or ErrNotFound naming what.
func one[T any](ctx context.Context, s *Store, scan pgx.RowToFunc[T], what, query string, args ...any) (T, error) {
	rows, _ := s.pool.Query(ctx, query, args...)
	v, err := pgx.CollectExactlyOneRow(rows, scan)
	return v, got("get "+what, what, err)
}

// exec runs a write of one row: ErrNotFound (or ErrConflict for an insert)
// when it touched none.
func (s *Store) exec(ctx context.Context, what string, none error, query string, args ...any) error {
	tag, err := s.pool.Exec(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("postgres: %s: %w", what, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%s: %w", what, none)
	}
	return nil
}

func (s *Store) CreateHook(ctx context.Context, h *store.Hook) error {
	if err := sqlstore.CheckHook(h); err != nil {
		return err
	}
	return s.exec(ctx, "hook "+h.ID, store.ErrConflict, triggerQueries["hook_insert"], h.ID, h.WorkflowID, h.Name,
		h.SecretHash, settingsOf(h.Settings), nonEmpty(h.SigningKeyID), h.SigningSecret, h.Disabled, h.CreatedAt, h.UpdatedAt)
}

func (s *Store) GetHook(ctx context.Context, id string) (*store.Hook, error) {
	return one(ctx, s, scanHook, "hook "+id, triggerQueries["hook_get"], id)
}

func (s *Store) HookBySecret(ctx context.Context, hash []byte) (*store.Hook, error) {
	return one(ctx, s, scanHook, "hook", triggerQueries["hook_by_secret"], hash)
}

func (s *Store) ListHooks(ctx context.Context, workflowID string) ([]*store.Hook, error) {
	rows, _ := s.pool.Query(ctx, triggerQueries["hook_list"], workflowID)
	hs, err := pgx.CollectRows(rows, scanHook)
	if err != nil {
		return nil, fmt.Errorf("postgres: list hooks of %s: %w", workflowID, err)
	}
	return hs, nil
}

func (s *Store) UpdateHook(ctx context.Context, h *store.Hook) error {
	if err := sqlstore.CheckHook(h); err != nil {
		return err
	}
	return s.exec(ctx, "hook "+h.ID, store.ErrNotFound, triggerQueries["hook_update"], h.ID, h.Name, h.SecretHash,
		settingsOf(h.Settings), nonEmpty(h.SigningKeyID), h.SigningSecret, h.Disabled, h.UpdatedAt)
}

func (s *Store) DeleteHook(ctx context.Context, id string) error {
	return s.exec(ctx, "hook "+id, store.ErrNotFound, triggerQueries["hook_delete"], id)
}

func (s *Store) CreateSchedule(ctx context.Context, sc *store.Schedule) error {
	if err := sqlstore.CheckSchedule(sc); err != nil {
		return err
	}
	return s.exec(ctx, "schedule "+sc.ID, store.ErrConflict, triggerQueries["schedule_insert"], sc.ID, sc.WorkflowID,
		sc.Name, settingsOf(sc.Settings), sc.Paused, sc.NextAt, sc.LastSlot, sc.CreatedAt, sc.UpdatedAt)
}

func (s *Store) GetSchedule(ctx context.Context, id string) (*store.Schedule, error) {
	return one(ctx, s, scanSchedule, "schedule "+id, triggerQueries["schedule_get"], id)
}

func (s *Store) ListSchedules(ctx context.Context, workflowID string) ([]*store.Schedule, error) {
	rows, _ := s.pool.Query(ctx, triggerQueries["schedule_list"], workflowID)
	scs, err := pgx.CollectRows(rows, scanSchedule)
	if err != nil {
		return nil, fmt.Errorf("postgres: list schedules of %s: %w", workflowID, err)
	}
	return scs, nil
}

func (s *Store) UpdateSchedule(ctx context.Context, sc *store.Schedule) error {
	if err := sqlstore.CheckSchedule(sc); err != nil {
		return err
	}
	return s.exec(ctx, "schedule "+sc.ID, store.ErrNotFound, triggerQueries["schedule_update"], sc.ID, sc.Name,
		settingsOf(sc.Settings), sc.Paused, sc.NextAt, sc.LastSlot, sc.UpdatedAt)
}

func (s *Store) DeleteSchedule(ctx context.Context, id string) error {
	return s.exec(ctx, "schedule "+id, store.ErrNotFound, triggerQueries["schedule_delete"], id)
}

func (s *Store) DueSchedules(ctx context.Context, now time.Time, limit int) ([]*store.Schedule, error) {
	rows, _ := s.pool.Query(ctx, triggerQueries["schedule_due"], orNow(now), sqlstore.ListLimit(limit))
	scs, err := pgx.CollectRows(rows, scanSchedule)
	if err != nil {
		return nil, fmt.Errorf("postgres: due schedules: %w", err)
	}
	return scs, nil
}

func (s *Store) FireSchedule(ctx context.Context, f store.Fire) ([]*store.Execution, error) {
	xs, err := sqlstore.CheckFire(&f)
	if err != nil {
		return nil, err
	}
	var created []*store.Execution
	err = s.tx(ctx, "fire schedule "+f.ScheduleID, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, triggerQueries["schedule_fire"], f.ScheduleID, f.From, f.Next, f.LastSlot, f.At)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return sqlstore.SlotTaken(f)
		}
		for _, x := range xs {
			err := tx.QueryRow(ctx, queries["execution_create_many"], createManyArgs([]*store.Execution{x})...).Scan(new(string), &x.Version)
			if errors.Is(err, pgx.ErrNoRows) {
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
	err := s.tx(ctx, "claim hook signature", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, triggerQueries["signature_prune"], hookID, now); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, triggerQueries["signature_claim"], hookID, sig, executionID, expires, now)
		if err != nil {
			return err
		}
		if tag.RowsAffected() > 0 {
			return nil
		}
		return tx.QueryRow(ctx, triggerQueries["signature_owner"], hookID, sig).Scan(&owner)
	})
	return owner, err
}

func (s *Store) MoveSignature(ctx context.Context, hookID string, sig []byte, from, to string) error {
	q, args := triggerQueries["signature_move"], []any{hookID, sig, from, to}
	if to == "" {
		q, args = triggerQueries["signature_forget"], args[:3]
	}
	if _, err := s.pool.Exec(ctx, q, args...); err != nil {
		return fmt.Errorf("postgres: move hook signature: %w", err)
	}
	return nil
}
