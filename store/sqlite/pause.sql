-- Queries of store/sqlite for pauses and re-run starts (issue 34), by name.

-- name: workflow_pause_insert
INSERT INTO workflow_pauses (workflow_id, paused_at)
SELECT id, ?2 FROM workflow_heads WHERE id = ?1 AND deleted_at IS NULL
ON CONFLICT (workflow_id) DO NOTHING

-- name: workflow_pause_get
SELECT workflow_id, paused_at FROM workflow_pauses WHERE workflow_id = ?1

-- name: workflow_pause_delete
DELETE FROM workflow_pauses WHERE workflow_id = ?1

-- name: execution_pause_insert
INSERT INTO execution_pauses (execution_id, paused_at)
SELECT id, ?2 FROM executions WHERE id = ?1
ON CONFLICT (execution_id) DO NOTHING

-- name: execution_pause_get
SELECT execution_id, paused_at FROM execution_pauses WHERE execution_id = ?1

-- name: execution_pause_delete
DELETE FROM execution_pauses WHERE execution_id = ?1

-- name: rerun_start_insert
INSERT INTO rerun_starts (execution_id, source_id, from_node, context, created_at)
VALUES (?1, ?2, ?3, ?4, ?5)
ON CONFLICT DO NOTHING

-- name: rerun_start_get
SELECT execution_id, source_id, from_node, context, created_at FROM rerun_starts WHERE execution_id = ?1
