-- Queries of store/postgres for message templates (issue 36), by name.

-- name: template_head
SELECT latest, deleted_at FROM template_heads WHERE name = $1

-- name: template_head_lock
SELECT latest, deleted_at FROM template_heads WHERE name = $1 FOR UPDATE

-- name: template_head_ensure
INSERT INTO template_heads (name, latest) VALUES ($1, 0) ON CONFLICT (name) DO NOTHING

-- name: template_head_put
UPDATE template_heads SET latest = $2, deleted_at = NULL WHERE name = $1

-- name: template_insert
INSERT INTO templates (name, version, subject, text, html, body, layout, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)

-- name: template_get
SELECT t.name, t.version, t.subject, t.text, t.html, t.body, t.layout, t.created_at, h.deleted_at
FROM templates t JOIN template_heads h ON h.name = t.name
WHERE t.name = $1 AND t.version = $2

-- name: template_at
SELECT t.name, t.version, t.subject, t.text, t.html, t.body, t.layout, t.created_at, d.deleted_at
FROM templates t
LEFT JOIN template_deletions d ON d.name = t.name AND d.after_version = t.version AND d.deleted_at <= $2
WHERE t.name = $1 AND t.created_at <= $2
ORDER BY t.version DESC LIMIT 1

-- name: template_list
SELECT t.name, t.version, t.subject, '', '', '', t.layout, t.created_at, h.deleted_at
FROM template_heads h JOIN templates t ON t.name = h.name AND t.version = h.latest
WHERE h.deleted_at IS NULL
ORDER BY h.name

-- name: template_versions
SELECT t.name, t.version, t.subject, '', '', '', t.layout, t.created_at, h.deleted_at
FROM templates t JOIN template_heads h ON h.name = t.name
WHERE t.name = $1
ORDER BY t.version DESC

-- name: template_delete
UPDATE template_heads SET deleted_at = $2 WHERE name = $1 AND deleted_at IS NULL
RETURNING latest

-- name: template_deletion_insert
INSERT INTO template_deletions (name, after_version, deleted_at) VALUES ($1, $2, $3)
