-- Child executions (issue 34, the workflow node): each child's parent
-- execution, the parent's node and the timer it is parked under, and the
-- workflow ids above it (a JSON array, the root first). The link is
-- written before the child execution (no foreign key): a child's
-- completion then always finds its parent.
CREATE TABLE execution_parents (
  child_id text PRIMARY KEY,
  parent_execution_id text NOT NULL,
  parent_node text NOT NULL,
  wake text NOT NULL,
  chain jsonb NOT NULL,
  created_at timestamptz NOT NULL
);
CREATE INDEX execution_parents_parent ON execution_parents (parent_execution_id, created_at);
