-- Queries of store/sqlite, by name (see store/sqlfile). Times are INTEGER
-- microseconds since the Unix epoch; JSON is TEXT.

-- name: migrations_table
CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)

-- name: migrations_applied
SELECT version FROM schema_migrations ORDER BY version

-- name: migration_count
SELECT count(*) FROM schema_migrations WHERE version = ?

-- name: migration_record
INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)

-- name: workflow_head
SELECT latest, deleted_at FROM workflow_heads WHERE id = ?

-- name: workflow_insert
INSERT INTO workflows (id, version, name, definition, created_at) VALUES (?, ?, ?, ?, ?)

-- name: workflow_head_insert
INSERT INTO workflow_heads (id, latest) VALUES (?, 1) ON CONFLICT DO NOTHING

-- name: workflow_head_update
UPDATE workflow_heads SET latest = ? WHERE id = ?

-- name: workflow_get
SELECT w.id, w.version, w.name, w.definition, w.created_at, h.deleted_at
FROM workflows w JOIN workflow_heads h ON h.id = w.id
WHERE w.id = ? AND w.version = ?

-- name: workflow_list
SELECT w.id, w.version, w.name, w.definition, w.created_at, h.deleted_at
FROM workflow_heads h JOIN workflows w ON w.id = h.id AND w.version = h.latest
WHERE h.deleted_at IS NULL AND h.id > ?
ORDER BY h.id
LIMIT ?

-- name: workflow_versions
SELECT w.id, w.version, w.name, '', w.created_at, h.deleted_at
FROM workflows w JOIN workflow_heads h ON h.id = w.id
WHERE w.id = ? AND w.version < ?
ORDER BY w.version DESC
LIMIT ?

-- name: workflow_delete
UPDATE workflow_heads SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL

-- name: execution_insert
INSERT INTO executions (id, workflow_id, version, status, input, idempotency_key, trigger_source, available_at,
    attempts, cursor, vars, unfinished, completion, cancel_requested, claimed_by, claim_until, dispatched_at,
    created_at, updated_at, finished_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT DO NOTHING

-- name: execution_get
SELECT id, workflow_id, version, status, input, idempotency_key, trigger_source, available_at, attempts, cursor,
    vars, unfinished, completion, cancel_requested, claimed_by, claim_until, dispatched_at, created_at, updated_at,
    finished_at
FROM executions WHERE id = ?

-- name: execution_by_key
SELECT id, workflow_id, version, status, input, idempotency_key, trigger_source, available_at, attempts, cursor,
    vars, unfinished, completion, cancel_requested, claimed_by, claim_until, dispatched_at, created_at, updated_at,
    finished_at
FROM executions WHERE workflow_id = ? AND idempotency_key = ?

-- name: execution_list
-- Parameters: workflow id, status, idempotency key, created after, created
-- before (each: the empty value selects all), then the cursor (created_at,
-- id; 0 for the first page), the limit, the trigger (?9 whole, ?10 a kind's
-- prefix) and ?11 the input's conditions (issue 38: a JSON array of
-- {"p": path, "v": scalar}, each compared as JSON text; no index, every
-- row of the other conditions is read).
SELECT id, workflow_id, version, status, input, idempotency_key, trigger_source, available_at, attempts, cursor,
    vars, unfinished, completion, cancel_requested, claimed_by, claim_until, dispatched_at, created_at, updated_at,
    finished_at
FROM executions
WHERE (?1 = '' OR workflow_id = ?1)
  AND (?2 = '' OR status = ?2)
  AND (?3 = '' OR idempotency_key = ?3)
  AND (?4 = 0 OR created_at > ?4)
  AND (?5 = 0 OR created_at < ?5)
  AND (?6 = 0 OR created_at < ?6 OR (created_at = ?6 AND id < ?7))
  AND (?9 = '' OR trigger_source = ?9 OR (?10 <> '' AND substr(trigger_source, 1, length(?10)) = ?10))
  AND (?11 = '' OR NOT EXISTS (SELECT 1 FROM json_each(?11) m
        WHERE (executions.input -> (m.value ->> 'p')) IS NOT (m.value -> 'v')))
ORDER BY created_at DESC, id DESC
LIMIT ?8

-- name: execution_claim
-- Due enqueued executions and claimed ones whose claim ended undispatched,
-- oldest available_at first, each kind read on its own partial index up to
-- the limit (without INDEXED BY, an unanalysed file uses executions_status
-- and sorts every due row). One writer connection makes this atomic.
UPDATE executions
SET status = 'processing', claimed_by = ?1, claim_until = ?2, updated_at = ?3
WHERE id IN (
    SELECT id FROM (
        SELECT * FROM (
            -- A paused workflow's executions stay enqueued (issue 34).
            -- Priority (issue 35): each priority on its own range of
            -- executions_enqueued_priority, highest first; rows held for a
            -- concurrency slot (available_at far ahead) are never read.
            SELECT * FROM (SELECT id, available_at, priority FROM executions INDEXED BY executions_enqueued_priority
                WHERE status = 'enqueued' AND priority = 10 AND available_at <= ?3
                    AND NOT EXISTS (SELECT 1 FROM workflow_pauses wp WHERE wp.workflow_id = executions.workflow_id) ORDER BY available_at LIMIT ?4)
            UNION ALL SELECT * FROM (SELECT id, available_at, priority FROM executions INDEXED BY executions_enqueued_priority
                WHERE status = 'enqueued' AND priority = 9 AND available_at <= ?3
                    AND NOT EXISTS (SELECT 1 FROM workflow_pauses wp WHERE wp.workflow_id = executions.workflow_id) ORDER BY available_at LIMIT ?4)
            UNION ALL SELECT * FROM (SELECT id, available_at, priority FROM executions INDEXED BY executions_enqueued_priority
                WHERE status = 'enqueued' AND priority = 8 AND available_at <= ?3
                    AND NOT EXISTS (SELECT 1 FROM workflow_pauses wp WHERE wp.workflow_id = executions.workflow_id) ORDER BY available_at LIMIT ?4)
            UNION ALL SELECT * FROM (SELECT id, available_at, priority FROM executions INDEXED BY executions_enqueued_priority
                WHERE status = 'enqueued' AND priority = 7 AND available_at <= ?3
                    AND NOT EXISTS (SELECT 1 FROM workflow_pauses wp WHERE wp.workflow_id = executions.workflow_id) ORDER BY available_at LIMIT ?4)
            UNION ALL SELECT * FROM (SELECT id, available_at, priority FROM executions INDEXED BY executions_enqueued_priority
                WHERE status = 'enqueued' AND priority = 6 AND available_at <= ?3
                    AND NOT EXISTS (SELECT 1 FROM workflow_pauses wp WHERE wp.workflow_id = executions.workflow_id) ORDER BY available_at LIMIT ?4)
            UNION ALL SELECT * FROM (SELECT id, available_at, priority FROM executions INDEXED BY executions_enqueued_priority
                WHERE status = 'enqueued' AND priority = 5 AND available_at <= ?3
                    AND NOT EXISTS (SELECT 1 FROM workflow_pauses wp WHERE wp.workflow_id = executions.workflow_id) ORDER BY available_at LIMIT ?4)
            UNION ALL SELECT * FROM (SELECT id, available_at, priority FROM executions INDEXED BY executions_enqueued_priority
                WHERE status = 'enqueued' AND priority = 4 AND available_at <= ?3
                    AND NOT EXISTS (SELECT 1 FROM workflow_pauses wp WHERE wp.workflow_id = executions.workflow_id) ORDER BY available_at LIMIT ?4)
            UNION ALL SELECT * FROM (SELECT id, available_at, priority FROM executions INDEXED BY executions_enqueued_priority
                WHERE status = 'enqueued' AND priority = 3 AND available_at <= ?3
                    AND NOT EXISTS (SELECT 1 FROM workflow_pauses wp WHERE wp.workflow_id = executions.workflow_id) ORDER BY available_at LIMIT ?4)
            UNION ALL SELECT * FROM (SELECT id, available_at, priority FROM executions INDEXED BY executions_enqueued_priority
                WHERE status = 'enqueued' AND priority = 2 AND available_at <= ?3
                    AND NOT EXISTS (SELECT 1 FROM workflow_pauses wp WHERE wp.workflow_id = executions.workflow_id) ORDER BY available_at LIMIT ?4)
            UNION ALL SELECT * FROM (SELECT id, available_at, priority FROM executions INDEXED BY executions_enqueued_priority
                WHERE status = 'enqueued' AND priority = 1 AND available_at <= ?3
                    AND NOT EXISTS (SELECT 1 FROM workflow_pauses wp WHERE wp.workflow_id = executions.workflow_id) ORDER BY available_at LIMIT ?4))
        UNION ALL
        SELECT * FROM (
            SELECT id, available_at, priority FROM executions INDEXED BY executions_undispatched
            WHERE status = 'processing' AND dispatched_at IS NULL AND claim_until <= ?3
            ORDER BY claim_until LIMIT ?4))
    ORDER BY priority DESC, available_at
    LIMIT ?4)
RETURNING id, workflow_id, version, status, input, idempotency_key, trigger_source, available_at, attempts, cursor,
    vars, unfinished, completion, cancel_requested, claimed_by, claim_until, dispatched_at, created_at, updated_at,
    finished_at

-- name: execution_dispatched
UPDATE executions SET dispatched_at = ?, updated_at = ? WHERE id = ?

-- name: execution_cancel
UPDATE executions SET status = ?, cancel_requested = 1, updated_at = ?, finished_at = ? WHERE id = ?

-- name: execution_history
-- What AppendHistory changes.
UPDATE executions
SET status = ?, available_at = ?, attempts = ?, cursor = ?, vars = ?, unfinished = ?, completion = ?,
    updated_at = ?, finished_at = ?
WHERE id = ?

-- name: run_list
SELECT execution_id, node_id, branch, lineage, status, attempt, output, error, details, started_at, finished_at,
    next_attempt_at, resume_at, duration_ms, reported_at, updated_at
FROM node_runs WHERE execution_id = ? ORDER BY seq

-- name: run_upsert
INSERT INTO node_runs (execution_id, node_id, branch, lineage, status, attempt, output, error, details, started_at,
    finished_at, next_attempt_at, resume_at, duration_ms, reported_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (execution_id, node_id, branch) DO UPDATE SET
    status = excluded.status, attempt = excluded.attempt, output = excluded.output, error = excluded.error,
    details = excluded.details, started_at = excluded.started_at, finished_at = excluded.finished_at,
    next_attempt_at = excluded.next_attempt_at, resume_at = excluded.resume_at,
    duration_ms = excluded.duration_ms, reported_at = excluded.reported_at, updated_at = excluded.updated_at

-- name: history_executions
-- AppendHistory's reads, one statement each for a whole batch (a JSON array
-- of keys) instead of one per execution, run or event: a statement's round
-- through database/sql and the driver cost about as much as SQLite's lookup
-- (issue 33). CROSS JOIN keeps the keys outermost, each a lookup on its
-- index.
SELECT x.id, x.workflow_id, x.version, x.status, x.input, x.idempotency_key, x.trigger_source, x.available_at,
    x.attempts, x.cursor, x.vars, x.unfinished, x.completion, x.cancel_requested, x.claimed_by, x.claim_until,
    x.dispatched_at, x.created_at, x.updated_at, x.finished_at
FROM json_each(?) AS k CROSS JOIN executions x ON x.id = k.value

-- name: history_runs
-- The stored runs among a batch's [execution, node, branch] keys.
SELECT r.execution_id, r.node_id, r.branch, r.lineage, r.status, r.attempt, r.output, r.error, r.details,
    r.started_at, r.finished_at, r.next_attempt_at, r.resume_at, r.duration_ms, r.reported_at, r.updated_at
FROM json_each(?) AS k CROSS JOIN node_runs r
  ON r.execution_id = k.value ->> 0 AND r.node_id = k.value ->> 1 AND r.branch = k.value ->> 2

-- name: history_recorded
-- The recorded events among a batch's [execution, dedupe key] pairs, on
-- events_dedupe.
SELECT e.execution_id, e.dedupe_key
FROM json_each(?) AS k CROSS JOIN events e
  ON e.execution_id = k.value ->> 0 AND e.dedupe_key = k.value ->> 1

-- name: event_insert
INSERT INTO events (execution_id, dedupe_key, kind, body, at) VALUES (?, ?, ?, ?, ?) RETURNING id

-- name: events_all
SELECT id, execution_id, kind, body, at FROM events WHERE id > ? ORDER BY id LIMIT ?

-- name: events_execution
SELECT id, execution_id, kind, body, at FROM events WHERE execution_id = ? AND id > ? ORDER BY id LIMIT ?

-- name: credential_put
INSERT INTO credentials (name, type, key_id, ciphertext, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (name) DO UPDATE SET
    type = excluded.type, key_id = excluded.key_id, ciphertext = excluded.ciphertext, updated_at = excluded.updated_at

-- name: credential_get
SELECT name, type, key_id, ciphertext, created_at, updated_at FROM credentials WHERE name = ?

-- name: credential_list
SELECT name, type, key_id, NULL, created_at, updated_at FROM credentials ORDER BY name

-- name: credential_delete
DELETE FROM credentials WHERE name = ?

-- name: token_insert
INSERT INTO tokens (id, name, prefix, hash, created_at, revoked_at, role, workflows, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING

-- name: token_by_hash
SELECT id, name, prefix, hash, created_at, revoked_at, role, workflows, expires_at FROM tokens WHERE hash = ? AND revoked_at IS NULL

-- name: token_list
SELECT id, name, prefix, NULL, created_at, revoked_at, role, workflows, expires_at FROM tokens ORDER BY name

-- name: token_by_id
SELECT id, name, prefix, hash, created_at, revoked_at, role, workflows, expires_at FROM tokens WHERE id = ? AND revoked_at IS NULL

-- name: token_revoke
UPDATE tokens SET revoked_at = COALESCE(revoked_at, ?) WHERE name = ?

-- name: token_sessions_delete
DELETE FROM sessions WHERE token_id IN (SELECT id FROM tokens WHERE name = ?)

-- name: session_insert
INSERT INTO sessions (hash, token_id, created_at, expires_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING

-- name: session_by_hash
SELECT hash, token_id, created_at, expires_at FROM sessions WHERE hash = ?

-- name: session_delete
DELETE FROM sessions WHERE hash = ?

-- name: session_prune
DELETE FROM sessions WHERE expires_at < ?

-- name: prune_pick
-- Retention: the oldest finished executions not pruned yet (executions_prunable).
SELECT id FROM executions
WHERE finished_at IS NOT NULL AND pruned_at IS NULL AND finished_at < ?
ORDER BY finished_at
LIMIT ?

-- name: prune_events
DELETE FROM events WHERE execution_id = ?

-- name: prune_runs
DELETE FROM node_runs WHERE execution_id = ?

-- name: prune_mark
UPDATE executions SET pruned_at = ? WHERE id = ?

-- name: audit_insert
INSERT INTO audit (at, actor, role, method, route, objects, status) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id

-- name: audit_list
SELECT id, at, actor, role, method, route, objects, status FROM audit WHERE id < ? ORDER BY id DESC LIMIT ?

-- name: audit_prune
DELETE FROM audit WHERE id IN (SELECT id FROM audit WHERE at < ? ORDER BY id LIMIT ?)

-- name: stats_status_counts
-- The dashboard (store.Stats). Parameters: recent, since. Executions created
-- since, per workflow and status, and of them those created since recent.
SELECT workflow_id, status, count(*), coalesce(sum(CASE WHEN created_at >= ? THEN 1 ELSE 0 END), 0)
FROM executions
WHERE created_at >= ?
GROUP BY workflow_id, status

-- name: stats_durations
SELECT workflow_id, finished_at - coalesce(dispatched_at, created_at)
FROM executions
WHERE created_at >= ? AND finished_at IS NOT NULL
ORDER BY created_at DESC
LIMIT ?

-- name: stats_failing_nodes
-- Failed node runs of the executions created since, per workflow and node
-- (node_runs by its (execution_id, node_id, branch) key).
SELECT x.workflow_id, r.node_id, count(*), max(coalesce(r.finished_at, r.reported_at))
FROM executions x JOIN node_runs r ON r.execution_id = x.id
WHERE x.created_at >= ? AND r.status = 'failed'
GROUP BY x.workflow_id, r.node_id
ORDER BY count(*) DESC, x.workflow_id, r.node_id
LIMIT ?
