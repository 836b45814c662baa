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
