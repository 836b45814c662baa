package server

import (
	"context"
	"time"
)

// prune deletes the history (node runs, events) of executions finished
// more than Config.Retention ago, and audit entries older than that, every RetentionEvery, in batches of
// RetentionBatchDefault executions so no transaction grows with the
// backlog. Its errors are logged and retried next round: retention never
// stops the server.
func (s *Server) prune(ctx context.Context) error {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		total := 0
		for ctx.Err() == nil {
			n, err := s.store.PruneHistory(ctx, s.cfg.Now().Add(-s.cfg.Retention), RetentionBatchDefault)
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("retention: prune failed; retrying next round", "err", err)
				}
				break
			}
			total += n
			if n == 0 {
				break
			}
		}
		if total > 0 {
			s.log.Info("retention: pruned the history of finished executions", "executions", total, "retention", s.cfg.Retention)
		}
		for ctx.Err() == nil {
			n, err := s.store.PruneAudit(ctx, s.cfg.Now().Add(-s.cfg.Retention), RetentionBatchDefault)
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("retention: prune of the audit log failed; retrying next round", "err", err)
				}
				break
			}
			if n == 0 {
				break
			}
		}
		t.Reset(s.cfg.RetentionEvery)
	}
}
