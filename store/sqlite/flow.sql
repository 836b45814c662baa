-- Flow control by key (issue 35): flow.go. Times in Unix microseconds.

-- name: flow_slot_state
SELECT state FROM flow_slots WHERE execution_id = ?

-- name: flow_slot_delete
DELETE FROM flow_slots WHERE execution_id = ?

-- name: flow_running
-- The slots of a key held by executions that have not ended.
SELECT count(*) FROM flow_slots f JOIN executions e ON e.id = f.execution_id
WHERE f.workflow_id = ? AND f.flow_key = ? AND f.state = 'admitted'
  AND e.status IN ('enqueued', 'processing', 'waiting')

-- name: flow_queued_any
-- Whether executions of a key wait for a slot (EXISTS: a key with 20,000
-- queued costs one index probe, not a count).
SELECT EXISTS (SELECT 1 FROM flow_slots f JOIN executions e ON e.id = f.execution_id
WHERE f.workflow_id = ? AND f.flow_key = ? AND f.state = 'queued' AND e.status = 'enqueued')

-- name: flow_slot_insert
INSERT INTO flow_slots (execution_id, workflow_id, flow_key, lim, priority, state, seq, due_at, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (execution_id) DO UPDATE SET state = excluded.state, lim = excluded.lim, due_at = excluded.due_at

-- name: flow_hold
-- A claimed execution queued for a slot goes back to enqueued, held.
UPDATE executions SET status = 'enqueued', available_at = ?, claimed_by = NULL, claim_until = NULL, updated_at = ?
WHERE id = ? AND claimed_by = ? AND dispatched_at IS NULL

-- name: flow_key_touch
INSERT INTO flow_keys (workflow_id, flow_key, turn_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING

-- name: flow_oldest
-- The oldest execution of a key waiting for or holding a slot (queued first).
SELECT f.execution_id FROM flow_slots f JOIN executions e ON e.id = f.execution_id
WHERE f.workflow_id = ? AND f.flow_key = ? AND f.execution_id <> ?
  AND e.status IN ('enqueued', 'processing', 'waiting') AND e.cancel_requested = 0
ORDER BY f.state = 'queued' DESC, f.seq, f.execution_id
LIMIT 1

-- name: flow_cleanup
-- Slots of ended (or pruned) executions are free.
DELETE FROM flow_slots WHERE state = 'admitted' AND NOT EXISTS (
    SELECT 1 FROM executions e WHERE e.id = flow_slots.execution_id AND e.status IN ('enqueued', 'processing', 'waiting'))

-- name: flow_keys_due
SELECT workflow_id, flow_key FROM flow_keys ORDER BY turn_at, workflow_id, flow_key LIMIT ?

-- name: flow_key_turn
UPDATE flow_keys SET turn_at = ? WHERE workflow_id = ? AND flow_key = ?

-- name: flow_key_delete
DELETE FROM flow_keys WHERE workflow_id = ? AND flow_key = ?

-- name: flow_admitted_count
SELECT count(*) FROM flow_slots WHERE workflow_id = ? AND flow_key = ? AND state = 'admitted'

-- name: flow_heads
-- The key's queue in priority and arrival order; rows of executions no
-- longer enqueued (cancelled) are dropped as they come up.
SELECT f.execution_id, f.lim, f.due_at, coalesce(e.status, '') FROM flow_slots f LEFT JOIN executions e ON e.id = f.execution_id
WHERE f.workflow_id = ? AND f.flow_key = ? AND f.state = 'queued'
ORDER BY f.priority DESC, f.seq, f.execution_id
LIMIT ?

-- name: flow_admit
UPDATE flow_slots SET state = 'admitted' WHERE execution_id = ?

-- name: flow_release
UPDATE executions SET available_at = ?, updated_at = ? WHERE id = ? AND status = 'enqueued'

-- name: flow_state
SELECT f.flow_key, f.lim, f.state, f.priority, f.seq, f.workflow_id FROM flow_slots f WHERE f.execution_id = ?

-- name: flow_position
SELECT count(*) FROM flow_slots f JOIN executions e ON e.id = f.execution_id
WHERE f.workflow_id = ?1 AND f.flow_key = ?2 AND f.state = 'queued' AND e.status = 'enqueued'
  AND (f.priority > ?3 OR (f.priority = ?3 AND (f.seq < ?4 OR (f.seq = ?4 AND f.execution_id < ?5))))

-- name: flow_priority
SELECT priority FROM executions WHERE id = ?

-- name: flow_priorities
-- ?1 is a JSON array of execution ids: those of another priority than 5.
SELECT id, priority FROM executions WHERE id IN (SELECT value FROM json_each(?1)) AND priority <> 5

-- name: flow_set_priority
UPDATE executions SET priority = ? WHERE id = ? AND status = 'enqueued'

-- name: flow_debounce_get
SELECT execution_id, first_at FROM flow_debounce WHERE workflow_id = ? AND debounce_key = ?

-- name: flow_debounce_put
INSERT INTO flow_debounce (workflow_id, debounce_key, execution_id, first_at) VALUES (?, ?, ?, ?)
ON CONFLICT (workflow_id, debounce_key) DO UPDATE SET execution_id = excluded.execution_id, first_at = excluded.first_at

-- name: flow_debounce_collapse
-- A later trigger: the last input wins and the start moves on, while the
-- execution is still enqueued and not held for a slot.
UPDATE executions SET input = ?, available_at = ?, updated_at = ?
WHERE id = ? AND status = 'enqueued' AND available_at < ?

-- name: flow_debounce_of
SELECT d.debounce_key FROM flow_debounce d JOIN executions e ON e.id = d.execution_id
WHERE d.execution_id = ? AND e.status = 'enqueued'

-- name: flow_queued_by_workflow
SELECT workflow_id, count(*) FROM executions WHERE status = 'enqueued' GROUP BY workflow_id
