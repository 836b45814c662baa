-- Queries of store/sqlite for child executions (issue 34), by name.

-- name: child_link
INSERT INTO execution_parents (child_id, parent_execution_id, parent_node, wake, chain, created_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6)
ON CONFLICT DO NOTHING

-- name: child_parent
SELECT child_id, parent_execution_id, parent_node, wake, chain, created_at
FROM execution_parents WHERE child_id = ?1

-- name: child_children
SELECT child_id, parent_execution_id, parent_node, wake, chain, created_at
FROM execution_parents WHERE parent_execution_id = ?1 ORDER BY created_at, child_id LIMIT ?2
