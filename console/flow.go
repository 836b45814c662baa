package console

import (
	"context"
	"fmt"
	"time"

	"github.com/rune-org/rune/store"
)

// queueReason says why an enqueued execution has not started (flow control,
// issue 35; docs/dsl.md "Flow control"), "" when it is not enqueued or the
// store keeps no flow state.
func queueReason(ctx context.Context, st store.Store, x *store.Execution, now time.Time) (string, error) {
	fs, ok := st.(store.FlowStore)
	if !ok || x.Status != store.StatusEnqueued {
		return "", nil
	}
	f, err := fs.FlowState(ctx, x.ID)
	if err != nil {
		return "", err
	}
	switch {
	case f.Queued:
		return fmt.Sprintf("for a slot of concurrency key %q (%d of %d running), number %d in line, priority %d",
			f.Key, f.Running, f.Limit, f.Position, f.Priority), nil
	case f.Debounced && x.AvailableAt.After(now):
		return fmt.Sprintf("debounced by key %q: starts %s unless another trigger of the key comes first",
			f.DebounceKey, x.AvailableAt.UTC().Format(time.RFC3339)), nil
	case x.AvailableAt.After(now):
		return "until its start time, " + x.AvailableAt.UTC().Format(time.RFC3339), nil
	}
	return fmt.Sprintf("due: the dispatcher takes it next (priority %d)", f.Priority), nil
}
