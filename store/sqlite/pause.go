package sqlite

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/store/sqlfile"
)

//go:embed pause.sql
var pauseSQL string

var pauseQueries = sqlfile.MustParse(pauseSQL)

func (s *Store) PauseWorkflow(ctx context.Context, id string, at time.Time) (*store.WorkflowPause, error) {
	var p store.WorkflowPause
	err := s.tx(ctx, "pause workflow "+id, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, pauseQueries["workflow_pause_insert"], id, micros(orNow(at))); err != nil {
			return err
		}
		var t int64
		err := tx.QueryRowContext(ctx, pauseQueries["workflow_pause_get"], id).Scan(&p.WorkflowID, &t)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("workflow %s: %w", id, store.ErrNotFound)
		}
		p.PausedAt = timeOf(t)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &p, nil
}

func (s *Store) ResumeWorkflow(ctx context.Context, id string) (bool, error) {
	err := s.exec(ctx, "workflow pause "+id, store.ErrNotFound, pauseQueries["workflow_pause_delete"], id)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

func (s *Store) WorkflowPaused(ctx context.Context, id string) (*store.WorkflowPause, error) {
	var p store.WorkflowPause
	var t int64
	err := s.r.QueryRowContext(ctx, pauseQueries["workflow_pause_get"], id).Scan(&p.WorkflowID, &t)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: workflow pause of %s: %w", id, err)
	}
	p.PausedAt = timeOf(t)
	return &p, nil
}

func (s *Store) PauseExecution(ctx context.Context, id string, at time.Time) (*store.ExecutionPause, error) {
	var p store.ExecutionPause
	err := s.tx(ctx, "pause execution "+id, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, pauseQueries["execution_pause_insert"], id, micros(orNow(at))); err != nil {
			return err
		}
		var t int64
		err := tx.QueryRowContext(ctx, pauseQueries["execution_pause_get"], id).Scan(&p.ExecutionID, &t)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("execution %s: %w", id, store.ErrNotFound)
		}
		p.PausedAt = timeOf(t)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &p, nil
}

func (s *Store) ResumeExecution(ctx context.Context, id string) (bool, error) {
	err := s.exec(ctx, "execution pause "+id, store.ErrNotFound, pauseQueries["execution_pause_delete"], id)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

func (s *Store) ExecutionPaused(ctx context.Context, id string) (*store.ExecutionPause, error) {
	var p store.ExecutionPause
	var t int64
	err := s.r.QueryRowContext(ctx, pauseQueries["execution_pause_get"], id).Scan(&p.ExecutionID, &t)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: execution pause of %s: %w", id, err)
	}
	p.PausedAt = timeOf(t)
	return &p, nil
}

func (s *Store) PutRerunStart(ctx context.Context, r *store.RerunStart) error {
	if r.ExecutionID == "" || r.FromNode == "" || len(r.Context) == 0 {
		return fmt.Errorf("rerun start: execution id, from node and context are required: %w", store.ErrInvalid)
	}
	return s.exec(ctx, "rerun start of "+r.ExecutionID, store.ErrConflict, pauseQueries["rerun_start_insert"],
		r.ExecutionID, r.SourceID, r.FromNode, string(r.Context), micros(orNow(r.CreatedAt)))
}

func (s *Store) GetRerunStart(ctx context.Context, id string) (*store.RerunStart, error) {
	return one(ctx, s, func(sc scanner) (*store.RerunStart, error) {
		var r store.RerunStart
		var c string
		var t int64
		if err := sc.Scan(&r.ExecutionID, &r.SourceID, &r.FromNode, &c, &t); err != nil {
			return nil, err
		}
		r.Context, r.CreatedAt = []byte(c), timeOf(t)
		return &r, nil
	}, "rerun start of "+id, pauseQueries["rerun_start_get"], id)
}
