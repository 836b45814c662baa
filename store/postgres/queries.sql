-- Queries of store/postgres, by name (see store/sqlfile). Tables are found
-- through the connection's search_path (the store's schema).

-- name: migrate_lock
-- One migration run per schema at a time, across processes.
SELECT pg_advisory_lock(hashtext('rune.migrate.' || $1))

-- name: migrate_unlock
SELECT pg_advisory_unlock(hashtext('rune.migrate.' || $1))

-- name: migrations_table
CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())

-- name: migrations_applied
SELECT version FROM schema_migrations ORDER BY version

-- name: migration_record
INSERT INTO schema_migrations (version) VALUES ($1)

-- name: workflow_head
SELECT latest, deleted_at FROM workflow_heads WHERE id = $1

-- name: workflow_head_lock
SELECT latest, deleted_at FROM workflow_heads WHERE id = $1 FOR UPDATE

-- name: workflow_head_insert
INSERT INTO workflow_heads (id, latest) VALUES ($1, 1) ON CONFLICT DO NOTHING

-- name: workflow_head_update
UPDATE workflow_heads SET latest = $1 WHERE id = $2

-- name: workflow_insert
INSERT INTO workflows (id, version, name, definition, created_at) VALUES ($1, $2, $3, $4, $5)

-- name: workflow_get
SELECT w.id, w.version, w.name, w.definition, w.created_at, h.deleted_at
FROM workflows w JOIN workflow_heads h ON h.id = w.id
WHERE w.id = $1 AND w.version = $2

-- name: workflow_list
SELECT w.id, w.version, w.name, w.definition, w.created_at, h.deleted_at
FROM workflow_heads h JOIN workflows w ON w.id = h.id AND w.version = h.latest
WHERE h.deleted_at IS NULL AND h.id > $1
ORDER BY h.id
LIMIT $2

-- name: workflow_versions
SELECT w.id, w.version, w.name, ''::bytea, w.created_at, h.deleted_at
FROM workflows w JOIN workflow_heads h ON h.id = w.id
WHERE w.id = $1 AND w.version < $2
ORDER BY w.version DESC
LIMIT $3

-- name: workflow_delete
UPDATE workflow_heads SET deleted_at = $1 WHERE id = $2 AND deleted_at IS NULL

-- name: execution_create_many
-- Group commit (groupcommit.go): new executions as column arrays, inserted
-- in one statement (one round trip, one commit) in the arrays' order, each
-- with the version asked for (0: the workflow's latest). Rows whose workflow is missing,
-- deleted or lacks the version, or whose id or key is taken, are skipped and
-- not returned.
INSERT INTO executions (id, workflow_id, version, status, input, idempotency_key, trigger_source, available_at,
    attempts, created_at, updated_at)
SELECT r.id, h.id, CASE WHEN r.version = 0 THEN h.latest ELSE r.version END, r.status, r.input::json,
    r.idempotency_key, r.trigger_source, r.available_at, r.attempts, r.created_at, r.created_at
FROM unnest($1::text[], $2::text[], $3::integer[], $4::text[], $5::text[], $6::text[], $7::text[],
    $8::timestamptz[], $9::integer[], $10::timestamptz[]) WITH ORDINALITY
    AS r(id, workflow_id, version, status, input, idempotency_key, trigger_source, available_at, attempts,
         created_at, n)
JOIN workflow_heads h ON h.id = r.workflow_id AND h.deleted_at IS NULL AND r.version <= h.latest
ORDER BY r.n
ON CONFLICT DO NOTHING
RETURNING id, version

-- name: execution_get
SELECT id, workflow_id, version, status, input, idempotency_key, trigger_source, available_at, attempts, cursor,
    vars, unfinished, completion, cancel_requested, claimed_by, claim_until, dispatched_at, created_at, updated_at,
    finished_at
FROM executions WHERE id = $1

-- name: execution_lock
SELECT id, workflow_id, version, status, input, idempotency_key, trigger_source, available_at, attempts, cursor,
    vars, unfinished, completion, cancel_requested, claimed_by, claim_until, dispatched_at, created_at, updated_at,
    finished_at
FROM executions WHERE id = $1 FOR UPDATE

-- name: execution_lock_many
-- Locked in id order, so two batches touching the same executions cannot deadlock.
SELECT id, workflow_id, version, status, input, idempotency_key, trigger_source, available_at, attempts, cursor,
    vars, unfinished, completion, cancel_requested, claimed_by, claim_until, dispatched_at, created_at, updated_at,
    finished_at
FROM executions WHERE id = ANY($1) ORDER BY id FOR UPDATE

-- name: execution_by_key
SELECT id, workflow_id, version, status, input, idempotency_key, trigger_source, available_at, attempts, cursor,
    vars, unfinished, completion, cancel_requested, claimed_by, claim_until, dispatched_at, created_at, updated_at,
    finished_at
FROM executions WHERE workflow_id = $1 AND idempotency_key = $2

-- name: execution_list
-- Parameters: workflow id, status, idempotency key (each '' for all),
-- created after, created before (NULL for all), the cursor (created_at, id;
-- NULL for the first page), the limit, and the trigger: $9 whole, $10 a
-- kind's prefix ("hook:"; '' for none).
SELECT id, workflow_id, version, status, input, idempotency_key, trigger_source, available_at, attempts, cursor,
    vars, unfinished, completion, cancel_requested, claimed_by, claim_until, dispatched_at, created_at, updated_at,
    finished_at
FROM executions
WHERE ($1 = '' OR workflow_id = $1)
  AND ($2 = '' OR status = $2)
  AND ($3 = '' OR idempotency_key = $3)
  AND ($4::timestamptz IS NULL OR created_at > $4)
  AND ($5::timestamptz IS NULL OR created_at < $5)
  AND ($6::timestamptz IS NULL OR (created_at, id) < ($6, $7))
  AND ($9 = '' OR trigger_source = $9 OR ($10 <> '' AND starts_with(trigger_source, $10)))
ORDER BY created_at DESC, id DESC
LIMIT $8

-- name: execution_list_input
-- execution_list with a filter on the input (issue 38): $11 is a JSON
-- object the input must contain (each condition's scalar at its path), on
-- the executions_input GIN index (migration 009). A query of its own, so
-- that its plan, generic or not, always has the condition.
SELECT id, workflow_id, version, status, input, idempotency_key, trigger_source, available_at, attempts, cursor,
    vars, unfinished, completion, cancel_requested, claimed_by, claim_until, dispatched_at, created_at, updated_at,
    finished_at
FROM executions
WHERE input::jsonb @> $11::jsonb
  AND ($1 = '' OR workflow_id = $1)
  AND ($2 = '' OR status = $2)
  AND ($3 = '' OR idempotency_key = $3)
  AND ($4::timestamptz IS NULL OR created_at > $4)
  AND ($5::timestamptz IS NULL OR created_at < $5)
  AND ($6::timestamptz IS NULL OR (created_at, id) < ($6, $7))
  AND ($9 = '' OR trigger_source = $9 OR ($10 <> '' AND starts_with(trigger_source, $10)))
ORDER BY created_at DESC, id DESC
LIMIT $8

-- name: execution_claim
-- One statement: due enqueued executions and claimed ones whose claim ended
-- undispatched, oldest available_at first. Each kind is read on its own
-- partial index, up to the limit (an OR of both sorted a whole backlog: 236
-- against 0.9 ms with 200,000 due); SKIP LOCKED lets concurrent claimers
-- (other servers) take other rows instead of waiting. Rows locked beyond the
-- limit are released when the statement's transaction ends.
-- Priority (issue 35): each priority is read on its own range of
-- executions_enqueued_priority, highest first, so rows held for a concurrency
-- slot (available_at far ahead) are never read.
WITH enqueued AS (
    SELECT q.id, q.available_at, q.priority FROM generate_series(10, 1, -1) p(n), LATERAL (
        SELECT id, available_at, priority FROM executions
        WHERE status = 'enqueued' AND priority = p.n AND available_at <= $3
              AND NOT EXISTS (SELECT 1 FROM workflow_pauses wp WHERE wp.workflow_id = executions.workflow_id)
        ORDER BY available_at
        LIMIT $4
        FOR UPDATE SKIP LOCKED) q
), expired AS (
    SELECT id, available_at, priority FROM executions
    WHERE status = 'processing' AND dispatched_at IS NULL AND claim_until <= $3
    ORDER BY claim_until
    LIMIT $4
    FOR UPDATE SKIP LOCKED
)
UPDATE executions e
SET status = 'processing', claimed_by = $1, claim_until = $2, updated_at = $3
FROM (
    SELECT id FROM (SELECT * FROM enqueued UNION ALL SELECT * FROM expired) due
    ORDER BY priority DESC, available_at
    LIMIT $4) due
WHERE e.id = due.id
RETURNING e.id, e.workflow_id, e.version, e.status, e.input, e.idempotency_key, e.trigger_source, e.available_at,
    e.attempts, e.cursor, e.vars, e.unfinished, e.completion, e.cancel_requested, e.claimed_by, e.claim_until,
    e.dispatched_at, e.created_at, e.updated_at, e.finished_at

-- name: execution_dispatched
UPDATE executions SET dispatched_at = $1, updated_at = $1 WHERE id = $2

-- name: execution_dispatched_many
-- Rows locked in id order, as history batches lock them (execution_lock_many),
-- so the two never deadlock. Rows dispatched already keep their time; rows
-- claimed by another owner are left alone and not returned.
WITH mine AS (
    SELECT id FROM executions WHERE id = ANY($2) AND claimed_by = $3 ORDER BY id FOR UPDATE
)
UPDATE executions e
SET dispatched_at = COALESCE(e.dispatched_at, $1),
    updated_at = CASE WHEN e.dispatched_at IS NULL THEN $1 ELSE e.updated_at END
FROM mine
WHERE e.id = mine.id
RETURNING e.id

-- name: execution_cancel
UPDATE executions SET status = $1, cancel_requested = true, updated_at = $2, finished_at = $3 WHERE id = $4

-- name: execution_history
-- What AppendHistory changes, for a batch of executions: one array per
-- column, element i of each for execution i. e.id = ANY($1) gives the
-- planner the rows on executions_pkey: joined on e.id = x.id alone, a freshly
-- planned statement hashed the arrays and scanned the whole table (each
-- connection's first batches, before pgx's cached plan; issue 33).
UPDATE executions e
SET status = x.status, available_at = x.available_at, attempts = x.attempts, cursor = x.cursor, vars = x.vars,
    unfinished = x.unfinished, completion = x.completion, updated_at = x.updated_at, finished_at = x.finished_at
FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::integer[], $5::jsonb[], $6::jsonb[], $7::jsonb[],
    $8::json[], $9::timestamptz[], $10::timestamptz[])
    AS x(id, status, available_at, attempts, cursor, vars, unfinished, completion, updated_at, finished_at)
WHERE e.id = ANY($1) AND e.id = x.id

-- name: run_get_many
-- The stored runs among those a batch names ($1, $2, $3: execution, node and
-- branch of each).
SELECT r.execution_id, r.node_id, r.branch, r.lineage, r.status, r.attempt, r.output, r.error, r.details,
    r.started_at, r.finished_at, r.next_attempt_at, r.resume_at, r.duration_ms, r.reported_at, r.updated_at
FROM node_runs r
JOIN unnest($1::text[], $2::text[], $3::text[]) AS k(execution_id, node_id, branch)
  ON r.execution_id = k.execution_id AND r.node_id = k.node_id AND r.branch = k.branch

-- name: run_list
SELECT execution_id, node_id, branch, lineage, status, attempt, output, error, details, started_at, finished_at,
    next_attempt_at, resume_at, duration_ms, reported_at, updated_at
FROM node_runs WHERE execution_id = $1 ORDER BY seq

-- name: run_upsert_many
-- A batch's new and changed runs: one array per column, in order.
INSERT INTO node_runs (execution_id, node_id, branch, lineage, status, attempt, output, error, details, started_at,
    finished_at, next_attempt_at, resume_at, duration_ms, reported_at, updated_at)
SELECT execution_id, node_id, branch, lineage, status, attempt, output, error, details, started_at,
    finished_at, next_attempt_at, resume_at, duration_ms, reported_at, updated_at
FROM unnest($1::text[], $2::text[], $3::text[], $4::jsonb[], $5::text[], $6::integer[], $7::json[], $8::json[],
    $9::json[], $10::timestamptz[], $11::timestamptz[], $12::timestamptz[], $13::timestamptz[], $14::bigint[],
    $15::timestamptz[], $16::timestamptz[]) WITH ORDINALITY
    AS x(execution_id, node_id, branch, lineage, status, attempt, output, error, details, started_at, finished_at,
    next_attempt_at, resume_at, duration_ms, reported_at, updated_at, ord)
ORDER BY ord
ON CONFLICT (execution_id, node_id, branch) DO UPDATE SET
    status = excluded.status, attempt = excluded.attempt, output = excluded.output, error = excluded.error,
    details = excluded.details, started_at = excluded.started_at, finished_at = excluded.finished_at,
    next_attempt_at = excluded.next_attempt_at, resume_at = excluded.resume_at,
    duration_ms = excluded.duration_ms, reported_at = excluded.reported_at, updated_at = excluded.updated_at

-- name: events_recorded
SELECT e.execution_id, e.dedupe_key
FROM events e
JOIN unnest($1::text[], $2::text[]) AS k(execution_id, dedupe_key)
  ON e.execution_id = k.execution_id AND e.dedupe_key = k.dedupe_key

-- name: event_lock
-- Held to commit by every transaction that inserts events: ids are drawn in
-- lock order, so they ascend in commit order and a reader after id N never
-- misses a lower id committed later.
SELECT pg_advisory_xact_lock(hashtext('rune.events.' || current_schema()))

-- name: event_insert_many
-- Events: one array per column; ids are drawn in array order.
INSERT INTO events (execution_id, dedupe_key, kind, body, at)
SELECT execution_id, dedupe_key, kind, body, at
FROM unnest($1::text[], $2::text[], $3::text[], $4::json[], $5::timestamptz[]) WITH ORDINALITY
    AS x(execution_id, dedupe_key, kind, body, at, ord)
ORDER BY ord
RETURNING id

-- name: events_all
SELECT id, execution_id, kind, body, at FROM events WHERE id > $1 ORDER BY id LIMIT $2

-- name: events_execution
SELECT id, execution_id, kind, body, at FROM events WHERE execution_id = $1 AND id > $2 ORDER BY id LIMIT $3

-- name: credential_put
INSERT INTO credentials (name, type, key_id, ciphertext, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (name) DO UPDATE SET
    type = excluded.type, key_id = excluded.key_id, ciphertext = excluded.ciphertext, updated_at = excluded.updated_at

-- name: credential_get
SELECT name, type, key_id, ciphertext, created_at, updated_at FROM credentials WHERE name = $1

-- name: credential_list
SELECT name, type, key_id, NULL::bytea, created_at, updated_at FROM credentials ORDER BY name

-- name: credential_delete
DELETE FROM credentials WHERE name = $1

-- name: token_insert
INSERT INTO tokens (id, name, prefix, hash, created_at, revoked_at, role, workflows, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING

-- name: token_by_hash
SELECT id, name, prefix, hash, created_at, revoked_at, role, workflows, expires_at FROM tokens WHERE hash = $1 AND revoked_at IS NULL

-- name: token_list
SELECT id, name, prefix, NULL::bytea, created_at, revoked_at, role, workflows, expires_at FROM tokens ORDER BY name

-- name: token_by_id
SELECT id, name, prefix, hash, created_at, revoked_at, role, workflows, expires_at FROM tokens WHERE id = $1 AND revoked_at IS NULL

-- name: token_revoke
UPDATE tokens SET revoked_at = COALESCE(revoked_at, $1) WHERE name = $2

-- name: token_sessions_delete
DELETE FROM sessions WHERE token_id IN (SELECT id FROM tokens WHERE name = $1)

-- name: session_insert
INSERT INTO sessions (hash, token_id, created_at, expires_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING

-- name: session_by_hash
SELECT hash, token_id, created_at, expires_at FROM sessions WHERE hash = $1

-- name: session_delete
DELETE FROM sessions WHERE hash = $1

-- name: session_prune
DELETE FROM sessions WHERE expires_at < $1

-- name: prune_pick
-- Retention: the oldest finished executions not pruned yet, on the partial
-- index executions_prunable; SKIP LOCKED lets servers prune side by side.
SELECT id FROM executions
WHERE finished_at IS NOT NULL AND pruned_at IS NULL AND finished_at < $1
ORDER BY finished_at
LIMIT $2
FOR UPDATE SKIP LOCKED

-- name: prune_events
DELETE FROM events WHERE execution_id = ANY($1)

-- name: prune_runs
DELETE FROM node_runs WHERE execution_id = ANY($1)

-- name: prune_mark
UPDATE executions SET pruned_at = $2 WHERE id = ANY($1)

-- name: audit_insert
INSERT INTO audit (at, actor, role, method, route, objects, status) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id

-- name: audit_list
SELECT id, at, actor, role, method, route, objects, status FROM audit WHERE id < $1 ORDER BY id DESC LIMIT $2

-- name: audit_prune
DELETE FROM audit WHERE id IN (SELECT id FROM audit WHERE at < $1 ORDER BY id LIMIT $2)

-- name: stats_status_counts
-- The dashboard (store.Stats). Parameters: recent, since. Executions created
-- since, per workflow and status, and of them those created since recent.
SELECT workflow_id, status, count(*)::bigint, count(*) FILTER (WHERE created_at >= $1)::bigint
FROM executions
WHERE created_at >= $2
GROUP BY workflow_id, status

-- name: stats_durations
SELECT workflow_id, (extract(epoch FROM finished_at - coalesce(dispatched_at, created_at)) * 1000000)::bigint
FROM executions
WHERE created_at >= $1 AND finished_at IS NOT NULL
ORDER BY created_at DESC
LIMIT $2

-- name: stats_failing_nodes
-- Failed node runs of the executions created since, per workflow and node
-- (node_runs by its (execution_id, node_id, branch) key).
SELECT x.workflow_id, r.node_id, count(*)::bigint, max(coalesce(r.finished_at, r.reported_at))
FROM executions x JOIN node_runs r ON r.execution_id = x.id
WHERE x.created_at >= $1 AND r.status = 'failed'
GROUP BY x.workflow_id, r.node_id
ORDER BY count(*) DESC, x.workflow_id, r.node_id
LIMIT $2
