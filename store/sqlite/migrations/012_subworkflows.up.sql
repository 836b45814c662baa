-- Child executions (issue 34, the workflow node): each child's parent
-- execution, the parent's node and the timer it is parked under, and the
-- workflow ids above it (a JSON array, the root first). The link is
-- written before the child execution (no foreign key): a child's
-- completion then always finds its parent.
CREATE TABLE execution_parents (
  child_id TEXT PRIMARY KEY,
  parent_execution_id TEXT NOT NULL,
  parent_node TEXT NOT NULL,
  wake TEXT NOT NULL,
  chain TEXT NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE INDEX execution_parents_parent ON execution_parents (parent_execution_id, created_at);
