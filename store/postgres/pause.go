package postgres

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/store/sqlfile"
)

//go:embed pause.sql
var pauseSQL string

var pauseQueries = sqlfile.MustParse(pauseSQL)

// pausedAt inserts a pause with insert (a no-op when the row exists or its
// subject does not) and reads it back with get in one transaction.
func (s *Store) pausedAt(ctx context.Context, what, insert, get, id string, at time.Time) (string, time.Time, error) {
	var key string
	var t time.Time
	err := s.tx(ctx, "pause "+what, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, insert, id, orNow(at)); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, get, id).Scan(&key, &t)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%s: %w", what, store.ErrNotFound)
		}
		return err
	})
	return key, t.UTC(), err
}

// pauseOf reads a pause with get; "" when there is none.
func (s *Store) pauseOf(ctx context.Context, what, get, id string) (string, time.Time, error) {
	var key string
	var t time.Time
	err := s.pool.QueryRow(ctx, get, id).Scan(&key, &t)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", time.Time{}, nil
	}
	if err != nil {
		return "", time.Time{}, fmt.Errorf("postgres: pause of %s: %w", what, err)
	}
	return key, t.UTC(), nil
}

// unpause deletes a pause and reports whether there was one.
func (s *Store) unpause(ctx context.Context, what, del, id string) (bool, error) {
	tag, err := s.pool.Exec(ctx, del, id)
	if err != nil {
		return false, fmt.Errorf("postgres: resume %s: %w", what, err)
	}
	return tag.RowsAffected() > 0, nil
}

func (s *Store) PauseWorkflow(ctx context.Context, id string, at time.Time) (*store.WorkflowPause, error) {
	k, t, err := s.pausedAt(ctx, "workflow "+id, pauseQueries["workflow_pause_insert"], pauseQueries["workflow_pause_get"], id, at)
	if err != nil {
		return nil, err
	}
	return &store.WorkflowPause{WorkflowID: k, PausedAt: t}, nil
}

func (s *Store) ResumeWorkflow(ctx context.Context, id string) (bool, error) {
	return s.unpause(ctx, "workflow "+id, pauseQueries["workflow_pause_delete"], id)
}

func (s *Store) WorkflowPaused(ctx context.Context, id string) (*store.WorkflowPause, error) {
	k, t, err := s.pauseOf(ctx, "workflow "+id, pauseQueries["workflow_pause_get"], id)
	if err != nil || k == "" {
		return nil, err
	}
	return &store.WorkflowPause{WorkflowID: k, PausedAt: t}, nil
}

func (s *Store) PauseExecution(ctx context.Context, id string, at time.Time) (*store.ExecutionPause, error) {
	k, t, err := s.pausedAt(ctx, "execution "+id, pauseQueries["execution_pause_insert"], pauseQueries["execution_pause_get"], id, at)
	if err != nil {
		return nil, err
	}
	return &store.ExecutionPause{ExecutionID: k, PausedAt: t}, nil
}

func (s *Store) ResumeExecution(ctx context.Context, id string) (bool, error) {
	return s.unpause(ctx, "execution "+id, pauseQueries["execution_pause_delete"], id)
}

func (s *Store) ExecutionPaused(ctx context.Context, id string) (*store.ExecutionPause, error) {
	k, t, err := s.pauseOf(ctx, "execution "+id, pauseQueries["execution_pause_get"], id)
	if err != nil || k == "" {
		return nil, err
	}
	return &store.ExecutionPause{ExecutionID: k, PausedAt: t}, nil
}

func (s *Store) PutRerunStart(ctx context.Context, r *store.RerunStart) error {
	if r.ExecutionID == "" || r.FromNode == "" || len(r.Context) == 0 {
		return fmt.Errorf("rerun start: execution id, from node and context are required: %w", store.ErrInvalid)
	}
	return s.exec(ctx, "rerun start of "+r.ExecutionID, store.ErrConflict, pauseQueries["rerun_start_insert"],
		r.ExecutionID, r.SourceID, r.FromNode, []byte(r.Context), orNow(r.CreatedAt))
}

func (s *Store) GetRerunStart(ctx context.Context, id string) (*store.RerunStart, error) {
	return one(ctx, s, func(row pgx.CollectableRow) (*store.RerunStart, error) {
		var r store.RerunStart
		var c []byte
		if err := row.Scan(&r.ExecutionID, &r.SourceID, &r.FromNode, &c, &r.CreatedAt); err != nil {
			return nil, err
		}
		r.Context, r.CreatedAt = c, r.CreatedAt.UTC()
		return &r, nil
	}, "rerun start of "+id, pauseQueries["rerun_start_get"], id)
}
