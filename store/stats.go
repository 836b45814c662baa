package store

import (
	"context"
	"slices"
	"time"
)

// Stats is what the console's dashboard reads: aggregates over the
// executions created in a window, computed by the store from its own
// tables (both stores implement it; no metrics system is needed).
type Stats interface {
	// StatusCounts counts the executions created at or after since, per
	// workflow and status; Recent counts those created at or after recent
	// (a later time: the last hour of the last day).
	StatusCounts(ctx context.Context, since, recent time.Time) ([]StatusCount, error)
	// Durations returns the run time (finished_at minus dispatched_at, or
	// created_at when it was never dispatched) of up to limit executions
	// created at or after since and finished, newest first.
	Durations(ctx context.Context, since time.Time, limit int) ([]Duration, error)
	// FailingNodes ranks the nodes of executions created at or after since
	// by how many of their runs failed, most first, at most limit.
	FailingNodes(ctx context.Context, since time.Time, limit int) ([]FailingNode, error)
}

// StatusCount is one row of Stats.StatusCounts.
type StatusCount struct {
	WorkflowID, Status string
	Count, Recent      int
}

// Duration is one finished execution's run time.
type Duration struct {
	WorkflowID string
	D          time.Duration
}

// FailingNode is one row of Stats.FailingNodes: how many runs of a node
// failed, and the newest failure.
type FailingNode struct {
	WorkflowID, NodeID string
	Failed             int
	Last               time.Time
}

// Percentile is the p-th percentile (0 < p ≤ 100) of ds by the nearest
// rank; 0 for none. It sorts ds.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	rank := int(float64(len(ds))*p/100+0.999999) - 1
	return ds[min(max(rank, 0), len(ds)-1)]
}
