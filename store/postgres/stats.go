package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rune-org/rune/store"
)

var _ store.Stats = (*Store)(nil)

func (s *Store) StatusCounts(ctx context.Context, since, recent time.Time) ([]store.StatusCount, error) {
	rows, _ := s.pool.Query(ctx, queries["stats_status_counts"], recent, since)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.StatusCount, error) {
		var c store.StatusCount
		err := r.Scan(&c.WorkflowID, &c.Status, &c.Count, &c.Recent)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: status counts: %w", err)
	}
	return out, nil
}

func (s *Store) Durations(ctx context.Context, since time.Time, limit int) ([]store.Duration, error) {
	rows, _ := s.pool.Query(ctx, queries["stats_durations"], since, limit)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Duration, error) {
		var d store.Duration
		var us int64
		err := r.Scan(&d.WorkflowID, &us)
		d.D = time.Duration(us) * time.Microsecond
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: durations: %w", err)
	}
	return out, nil
}

func (s *Store) FailingNodes(ctx context.Context, since time.Time, limit int) ([]store.FailingNode, error) {
	rows, _ := s.pool.Query(ctx, queries["stats_failing_nodes"], since, limit)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.FailingNode, error) {
		var f store.FailingNode
		err := r.Scan(&f.WorkflowID, &f.NodeID, &f.Failed, &f.Last)
		f.Last = f.Last.UTC()
		return f, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: failing nodes: %w", err)
	}
	return out, nil
}
