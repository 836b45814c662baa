package server

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/rune-org/rune/store"
)

// Defaults of RetentionConfig.
const (
	RetentionEveryDefault = time.Minute
	RetentionBatchDefault = 500
)

// RetentionConfig configures retention. Every field has the default its
// comment states.
type RetentionConfig struct {
	// After, when positive, prunes the node runs and events of executions
	// finished longer ago than this, and audit entries older than that
	// (`rune server --retention`). Defaults to 0: history is kept forever
	// and retention does not run.
	After time.Duration
	// Every is the pause between pruning rounds. Defaults to
	// RetentionEveryDefault.
	Every time.Duration
	// Batch is how many executions (audit entries) one prune transaction
	// takes, so that none grows with the backlog. Defaults to
	// RetentionBatchDefault.
	Batch int
}

func (c RetentionConfig) withDefaults() RetentionConfig {
	c.Every = cmp.Or(c.Every, RetentionEveryDefault)
	c.Batch = cmp.Or(c.Batch, RetentionBatchDefault)
	return c
}

func (c RetentionConfig) validate() error {
	switch {
	case c.After < 0:
		return fmt.Errorf("server: Config.Retention.After is %v, want positive (or 0: keep history)", c.After)
	case c.Batch < 0:
		return fmt.Errorf("server: Config.Retention.Batch is %d, want positive", c.Batch)
	}
	return nil
}

// retention prunes old history (Run).
type retention struct {
	cfg   RetentionConfig
	store store.Store
	log   *slog.Logger
	now   func() time.Time
}

func newRetention(cfg RetentionConfig, st store.Store, log *slog.Logger, now func() time.Time) *retention {
	return &retention{cfg: cfg, store: st, log: log, now: now}
}

// Run deletes the history (node runs, events) of executions finished more
// than After ago, and audit entries older than that, every Every, in
// batches of Batch until ctx is done. Its errors are logged and retried
// next round: retention never stops the server.
func (r *retention) Run(ctx context.Context) error {
	return rounds(ctx, nil, func(ctx context.Context) time.Duration {
		total := r.drain(ctx, "", r.store.PruneHistory)
		if total > 0 {
			r.log.Info("retention: pruned the history of finished executions", "executions", total, "retention", r.cfg.After)
		}
		r.drain(ctx, " of the audit log", r.store.PruneAudit)
		return r.cfg.Every
	})
}

// drain calls prune in batches until it prunes nothing, and returns how
// many it pruned; what names the pruned in the log of a failure.
func (r *retention) drain(ctx context.Context, what string, prune func(ctx context.Context, before time.Time, limit int) (int, error)) int {
	total := 0
	for ctx.Err() == nil {
		n, err := prune(ctx, r.now().Add(-r.cfg.After), r.cfg.Batch)
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn("retention: prune"+what+" failed; retrying next round", "err", err)
			}
			break
		}
		total += n
		if n == 0 {
			break
		}
	}
	return total
}
