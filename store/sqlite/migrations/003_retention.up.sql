-- Retention (rune server --retention): the node runs and events of finished
-- executions are pruned in batches; pruned_at (Unix microseconds, as every
-- time here) marks an execution whose history is gone, so the next batch
-- takes others. The partial index serves the pruner's scan.
ALTER TABLE executions ADD COLUMN pruned_at INTEGER;
CREATE INDEX executions_prunable ON executions (finished_at) WHERE finished_at IS NOT NULL AND pruned_at IS NULL;
