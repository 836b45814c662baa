-- Queries of store/postgres for the notification platform (issue 36), by name.

-- name: send_insert
INSERT INTO notify_sends (credential, message_id, execution_id, node_id, branch, channel, status, sent_at, workflow_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT DO NOTHING

-- name: send_get
SELECT credential, message_id, execution_id, node_id, branch, channel, status, sent_at, workflow_id
FROM notify_sends WHERE credential = $1 AND message_id = $2

-- name: send_list
SELECT credential, message_id, execution_id, node_id, branch, channel, status, sent_at, workflow_id
FROM notify_sends WHERE execution_id = $1 ORDER BY sent_at, node_id, branch

-- name: send_status_insert
INSERT INTO notify_send_statuses (credential, message_id, status, provider_status, at) VALUES ($1, $2, $3, $4, $5)

-- name: send_status_list
SELECT status, provider_status, at FROM notify_send_statuses
WHERE credential = $1 AND message_id = $2 ORDER BY id

-- name: subscriber_put
INSERT INTO notify_subscribers (id, body, created_at, updated_at) VALUES ($1, $2, $3, $3)
ON CONFLICT (id) DO UPDATE SET body = excluded.body, updated_at = excluded.updated_at
RETURNING (xmax = 0)

-- name: subscriber_get
SELECT s.body, s.created_at, s.updated_at, p.body, p.updated_at
FROM notify_subscribers s LEFT JOIN notify_preferences p ON p.subscriber_id = s.id
WHERE s.id = $1

-- name: subscriber_delete
DELETE FROM notify_subscribers WHERE id = $1

-- name: preferences_delete
DELETE FROM notify_preferences WHERE subscriber_id = $1

-- name: subscriber_lock
SELECT 1 FROM notify_subscribers WHERE id = $1 FOR UPDATE

-- name: preferences_get
SELECT body FROM notify_preferences WHERE subscriber_id = $1 FOR UPDATE

-- name: preferences_put
INSERT INTO notify_preferences (subscriber_id, body, updated_at) VALUES ($1, $2, $3)
ON CONFLICT (subscriber_id) DO UPDATE SET body = excluded.body, updated_at = excluded.updated_at
