package main

import (
	"context"
	"errors"
	"slices"

	"github.com/rune-org/rune/console"
	"github.com/rune-org/rune/distributed"
)

// distributedDepths reads the distributed server's RabbitMQ queue depths
// and its Redis timer store's counts for the console's dashboard (issue
// 38), as the metrics sample them.
func distributedDepths(rt *distributed.Runtime) func(ctx context.Context) ([]console.Depth, error) {
	return func(ctx context.Context) ([]console.Depth, error) {
		var out []console.Depth
		qs, qerr := rt.Broker.QueueDepths(ctx)
		names := make([]string, 0, len(qs))
		for q := range qs {
			names = append(names, q)
		}
		slices.Sort(names)
		for _, q := range names {
			out = append(out, console.Depth{Name: q, Count: qs[q], Note: "ready messages"})
		}
		ts, terr := rt.Timers.Stats(ctx)
		if terr == nil {
			next := "none due"
			if !ts.NextDue.IsZero() {
				next = "next due " + ts.NextDue.UTC().Format("2006-01-02 15:04:05 UTC")
			}
			out = append(out, console.Depth{Name: "timers scheduled", Count: int(ts.Scheduled), Note: next},
				console.Depth{Name: "timers claimed", Count: int(ts.Claimed), Note: "being fired by a scheduler"})
		}
		return out, errors.Join(qerr, terr)
	}
}
