-- Queries of store/sqlite for the last deliveries of hooks (issue 38), by name.

-- name: delivery_insert
INSERT INTO hook_deliveries (hook_id, received_at, status, code, execution_id, event_id, size)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
RETURNING seq

-- name: delivery_prune
DELETE FROM hook_deliveries WHERE hook_id = ?1 AND seq <= (
  SELECT seq FROM hook_deliveries WHERE hook_id = ?1 ORDER BY seq DESC LIMIT 1 OFFSET ?2)

-- name: delivery_list
SELECT seq, hook_id, received_at, status, code, execution_id, event_id, size
FROM hook_deliveries WHERE hook_id = ?1 ORDER BY seq DESC LIMIT ?2
