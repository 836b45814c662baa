-- Queries of store/sqlite for webhooks and schedules (issue 15), by name.

-- name: hook_insert
INSERT INTO hooks (id, workflow_id, name, secret_hash, settings, signing_key_id, signing_secret, disabled,
    created_at, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
ON CONFLICT DO NOTHING

-- name: hook_get
SELECT id, workflow_id, name, secret_hash, settings, signing_key_id, signing_secret, disabled, created_at, updated_at
FROM hooks WHERE id = ?1

-- name: hook_by_secret
SELECT id, workflow_id, name, secret_hash, settings, signing_key_id, signing_secret, disabled, created_at, updated_at
FROM hooks WHERE secret_hash = ?1

-- name: hook_list
SELECT id, workflow_id, name, secret_hash, settings, signing_key_id, signing_secret, disabled, created_at, updated_at
FROM hooks WHERE workflow_id = ?1 ORDER BY created_at, id

-- name: hook_update
UPDATE hooks SET name = ?2, secret_hash = ?3, settings = ?4, signing_key_id = ?5, signing_secret = ?6,
    disabled = ?7, updated_at = ?8
WHERE id = ?1

-- name: hook_delete
DELETE FROM hooks WHERE id = ?1

-- name: schedule_insert
INSERT INTO schedules (id, workflow_id, name, settings, paused, next_at, last_slot, created_at, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
ON CONFLICT DO NOTHING

-- name: schedule_get
SELECT id, workflow_id, name, settings, paused, next_at, last_slot, created_at, updated_at
FROM schedules WHERE id = ?1

-- name: schedule_list
SELECT id, workflow_id, name, settings, paused, next_at, last_slot, created_at, updated_at
FROM schedules WHERE workflow_id = ?1 ORDER BY created_at, id

-- name: schedule_update
UPDATE schedules SET name = ?2, settings = ?3, paused = ?4, next_at = ?5, last_slot = ?6, updated_at = ?7
WHERE id = ?1

-- name: schedule_delete
DELETE FROM schedules WHERE id = ?1

-- name: schedule_due
SELECT s.id, s.workflow_id, s.name, s.settings, s.paused, s.next_at, s.last_slot, s.created_at, s.updated_at
FROM schedules s JOIN workflow_heads h ON h.id = s.workflow_id AND h.deleted_at IS NULL
WHERE s.paused = 0 AND s.next_at IS NOT NULL AND s.next_at <= ?1
ORDER BY s.next_at
LIMIT ?2

-- name: schedule_fire
-- The slot's claim: a compare-and-set on next_at, in an IMMEDIATE transaction
-- (the file's write lock), so a concurrent fire of the same slot then
-- matches nothing.
UPDATE schedules SET next_at = ?3, last_slot = ?4, updated_at = ?5
WHERE id = ?1 AND next_at = ?2 AND paused = 0

-- name: signature_prune
DELETE FROM hook_signatures WHERE hook_id = ?1 AND expires_at <= ?2

-- name: signature_claim
-- Inserted, or taken over when expired: a row affected is a claim.
INSERT INTO hook_signatures (hook_id, signature, execution_id, expires_at) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (hook_id, signature) DO UPDATE SET execution_id = excluded.execution_id, expires_at = excluded.expires_at
WHERE hook_signatures.expires_at <= ?5

-- name: signature_owner
SELECT execution_id FROM hook_signatures WHERE hook_id = ?1 AND signature = ?2

-- name: signature_move
UPDATE hook_signatures SET execution_id = ?4 WHERE hook_id = ?1 AND signature = ?2 AND execution_id = ?3

-- name: signature_forget
DELETE FROM hook_signatures WHERE hook_id = ?1 AND signature = ?2 AND execution_id = ?3
