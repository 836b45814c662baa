package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/rune-org/rune/store"
)

var _ store.Stats = (*Store)(nil)

func (s *Store) StatusCounts(ctx context.Context, since, recent time.Time) ([]store.StatusCount, error) {
	out, err := queryAll(ctx, s.r, func(sc scanner) (store.StatusCount, error) {
		var c store.StatusCount
		err := sc.Scan(&c.WorkflowID, &c.Status, &c.Count, &c.Recent)
		return c, err
	}, queries["stats_status_counts"], micros(recent), micros(since))
	if err != nil {
		return nil, fmt.Errorf("sqlite: status counts: %w", err)
	}
	return out, nil
}

func (s *Store) Durations(ctx context.Context, since time.Time, limit int) ([]store.Duration, error) {
	out, err := queryAll(ctx, s.r, func(sc scanner) (store.Duration, error) {
		var d store.Duration
		var us int64
		err := sc.Scan(&d.WorkflowID, &us)
		d.D = time.Duration(us) * time.Microsecond
		return d, err
	}, queries["stats_durations"], micros(since), limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: durations: %w", err)
	}
	return out, nil
}

func (s *Store) FailingNodes(ctx context.Context, since time.Time, limit int) ([]store.FailingNode, error) {
	out, err := queryAll(ctx, s.r, func(sc scanner) (store.FailingNode, error) {
		var f store.FailingNode
		var last int64
		err := sc.Scan(&f.WorkflowID, &f.NodeID, &f.Failed, &last)
		f.Last = timeOf(last)
		return f, err
	}, queries["stats_failing_nodes"], micros(since), limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: failing nodes: %w", err)
	}
	return out, nil
}
