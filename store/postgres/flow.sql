-- Flow control by key (issue 35): flow.go. Every write of a key's slots
-- first takes the key's advisory lock (flow_lock, flow_try_lock), so the
-- counts two servers read and the slots they take agree. The lock's text is
-- the workflow id's length, ':', the id and the key: unambiguous (text
-- cannot hold chr(0), which PostgreSQL refuses).

-- name: flow_lock
SELECT pg_advisory_xact_lock(hashtextextended(length($1::text) || ':' || $1::text || $2::text, 35))

-- name: flow_try_lock
SELECT pg_try_advisory_xact_lock(hashtextextended(length($1::text) || ':' || $1::text || $2::text, 35))

-- name: flow_debounce_lock
SELECT pg_advisory_xact_lock(hashtextextended(length($1::text) || ':' || $1::text || $2::text, 36))

-- name: flow_slot_state
SELECT state FROM flow_slots WHERE execution_id = $1

-- name: flow_slot_delete
DELETE FROM flow_slots WHERE execution_id = $1

-- name: flow_running
-- The slots of a key held by executions that have not ended.
SELECT count(*) FROM flow_slots f JOIN executions e ON e.id = f.execution_id
WHERE f.workflow_id = $1 AND f.flow_key = $2 AND f.state = 'admitted'
  AND e.status IN ('enqueued', 'processing', 'waiting')

-- name: flow_queued_any
-- Whether executions of a key wait for a slot (0 or 1: a key with 20,000
-- queued costs one index probe, not a count).
SELECT count(*) FROM (SELECT 1 FROM flow_slots f JOIN executions e ON e.id = f.execution_id
WHERE f.workflow_id = $1 AND f.flow_key = $2 AND f.state = 'queued' AND e.status = 'enqueued' LIMIT 1) q

-- name: flow_slot_insert
INSERT INTO flow_slots (execution_id, workflow_id, flow_key, lim, priority, state, seq, due_at, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (execution_id) DO UPDATE SET state = excluded.state, lim = excluded.lim, due_at = excluded.due_at

-- name: flow_hold
-- A claimed execution queued for a slot goes back to enqueued, held.
UPDATE executions SET status = 'enqueued', available_at = $1, claimed_by = NULL, claim_until = NULL, updated_at = $2
WHERE id = $3 AND claimed_by = $4 AND dispatched_at IS NULL

-- name: flow_key_touch
INSERT INTO flow_keys (workflow_id, flow_key, turn_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING

-- name: flow_oldest
-- The oldest execution of a key waiting for or holding a slot (queued first).
SELECT f.execution_id FROM flow_slots f JOIN executions e ON e.id = f.execution_id
WHERE f.workflow_id = $1 AND f.flow_key = $2 AND f.execution_id <> $3
  AND e.status IN ('enqueued', 'processing', 'waiting') AND NOT e.cancel_requested
ORDER BY f.state = 'queued' DESC, f.seq, f.execution_id
LIMIT 1

-- name: flow_cleanup
-- Slots of ended (or pruned) executions are free.
DELETE FROM flow_slots f WHERE f.state = 'admitted' AND NOT EXISTS (
    SELECT 1 FROM executions e WHERE e.id = f.execution_id AND e.status IN ('enqueued', 'processing', 'waiting'))

-- name: flow_keys_due
SELECT workflow_id, flow_key FROM flow_keys ORDER BY turn_at, workflow_id, flow_key LIMIT $1

-- name: flow_key_turn
UPDATE flow_keys SET turn_at = $1 WHERE workflow_id = $2 AND flow_key = $3

-- name: flow_key_delete
DELETE FROM flow_keys WHERE workflow_id = $1 AND flow_key = $2

-- name: flow_admitted_count
SELECT count(*) FROM flow_slots WHERE workflow_id = $1 AND flow_key = $2 AND state = 'admitted'

-- name: flow_heads
-- The key's queue in priority and arrival order; rows of executions no
-- longer enqueued (cancelled) are dropped as they come up.
SELECT f.execution_id, f.lim, f.due_at, coalesce(e.status, '') FROM flow_slots f LEFT JOIN executions e ON e.id = f.execution_id
WHERE f.workflow_id = $1 AND f.flow_key = $2 AND f.state = 'queued'
ORDER BY f.priority DESC, f.seq, f.execution_id
LIMIT $3

-- name: flow_admit
UPDATE flow_slots SET state = 'admitted' WHERE execution_id = $1

-- name: flow_release
UPDATE executions SET available_at = $1, updated_at = $2 WHERE id = $3 AND status = 'enqueued'

-- name: flow_state
SELECT f.flow_key, f.lim, f.state, f.priority, f.seq, f.workflow_id FROM flow_slots f WHERE f.execution_id = $1

-- name: flow_position
SELECT count(*) FROM flow_slots f JOIN executions e ON e.id = f.execution_id
WHERE f.workflow_id = $1 AND f.flow_key = $2 AND f.state = 'queued' AND e.status = 'enqueued'
  AND (f.priority > $3 OR (f.priority = $3 AND (f.seq < $4 OR (f.seq = $4 AND f.execution_id < $5))))

-- name: flow_priority
SELECT priority FROM executions WHERE id = $1

-- name: flow_set_priority
UPDATE executions SET priority = $1 WHERE id = $2 AND status = 'enqueued'

-- name: flow_priorities
-- The executions of ids ($1) of another priority than 5.
SELECT id, priority FROM executions WHERE id = ANY($1) AND priority <> 5

-- name: flow_set_priority_many
UPDATE executions SET priority = $1 WHERE id = ANY($2) AND status = 'enqueued'

-- name: flow_debounce_get
SELECT execution_id, first_at FROM flow_debounce WHERE workflow_id = $1 AND debounce_key = $2

-- name: flow_debounce_put
INSERT INTO flow_debounce (workflow_id, debounce_key, execution_id, first_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (workflow_id, debounce_key) DO UPDATE SET execution_id = excluded.execution_id, first_at = excluded.first_at

-- name: flow_debounce_collapse
-- A later trigger: the last input wins and the start moves on, while the
-- execution is still enqueued and not held for a slot.
UPDATE executions SET input = $1::json, available_at = $2, updated_at = $3
WHERE id = $4 AND status = 'enqueued' AND available_at < $5

-- name: flow_debounce_of
SELECT d.debounce_key FROM flow_debounce d JOIN executions e ON e.id = d.execution_id
WHERE d.execution_id = $1 AND e.status = 'enqueued'

-- name: flow_queued_by_workflow
SELECT workflow_id, count(*) FROM executions WHERE status = 'enqueued' GROUP BY workflow_id
