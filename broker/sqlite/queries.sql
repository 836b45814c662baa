-- Queries of broker/sqlite, by name (see store/sqlfile). Every table is
-- prefixed broker_: the coordination seams share the file.

-- name: schema
-- One row per message not yet acked, on every topic: a dead letter is a row
-- moved to topic workflow.dlq with origin (the topic it was consumed from)
-- and reason set. claimed marks a row in a consumer's hand; deliveries
-- counts how often it was handed out (more than 1: Redelivered).
CREATE TABLE IF NOT EXISTS broker_messages (
	id           INTEGER PRIMARY KEY,
	topic        TEXT    NOT NULL,
	available_at INTEGER NOT NULL, -- unix ns: not delivered before
	claimed      INTEGER NOT NULL DEFAULT 0,
	deliveries   INTEGER NOT NULL DEFAULT 0,
	published_at INTEGER NOT NULL, -- unix ns
	msg_id       TEXT    NOT NULL,
	key          TEXT    NOT NULL,
	lane         TEXT    NOT NULL,
	trace        TEXT    NOT NULL,
	first        INTEGER NOT NULL,
	raw          INTEGER NOT NULL, -- published by PublishRaw: ID and Key come from the body
	origin       TEXT    NOT NULL DEFAULT '',
	reason       TEXT    NOT NULL DEFAULT '',
	body         BLOB    NOT NULL,
	priority     INTEGER NOT NULL DEFAULT 5 -- issue 35: workflow.execution rows, 1 … 10
);
-- The claim query's: rows ready to hand out, by topic, earliest due first,
-- then in insert order (the rowid ends every index entry). Claimed rows
-- leave the index.
CREATE INDEX IF NOT EXISTS broker_messages_ready ON broker_messages (topic, available_at) WHERE claimed = 0;
-- Dead letters are listed and replayed by message id.
CREATE INDEX IF NOT EXISTS broker_messages_dead ON broker_messages (msg_id) WHERE topic = 'workflow.dlq';

-- name: has_priority
-- A file made before issue 35 lacks the priority column (add_priority).
SELECT count(*) FROM pragma_table_info('broker_messages') WHERE name = 'priority'

-- name: add_priority
-- The rows already there get the default priority.
ALTER TABLE broker_messages ADD COLUMN priority INTEGER NOT NULL DEFAULT 5

-- name: schema_priority
-- The execution claim's (claim_execution): ready execution rows, highest
-- priority first, then earliest due and in insert order. Only execution
-- rows pay for this index.
CREATE INDEX IF NOT EXISTS broker_messages_ready_priority ON broker_messages (priority DESC, available_at)
WHERE claimed = 0 AND topic = 'workflow.execution';

-- name: release_all
-- At open: what the previous process held goes back (its deliveries count).
UPDATE broker_messages SET claimed = 0 WHERE claimed = 1

-- name: insert
-- Publish appends further "(...)" tuples to insert many rows at once.
INSERT INTO broker_messages (topic, available_at, published_at, msg_id, key, lane, trace, first, raw, body, priority)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)

-- name: claim
-- ?1 topic, ?2 now (unix ns), ?3 how many: the rows to claim, in due order.
-- +?n, not ?n: SQLite's planner reads a bare parameter's value (STAT4
-- ranges, LIMIT), and then prepares the statement again whenever that
-- value changes, on every claim.
SELECT id, available_at, deliveries, published_at, msg_id, key, lane, trace, first, raw, origin, reason, body
FROM broker_messages WHERE topic = +?1 AND claimed = 0 AND available_at <= +?2
ORDER BY available_at, id LIMIT +?3

-- name: claim_execution
-- claim on workflow.execution (?1 is that topic): the ready rows highest
-- priority first (issue 35), then in due order. One execution's messages
-- all have its priority, so their order is claim's.
SELECT id, available_at, deliveries, published_at, msg_id, key, lane, trace, first, raw, origin, reason, body
FROM broker_messages INDEXED BY broker_messages_ready_priority
WHERE topic = 'workflow.execution' AND +?1 = 'workflow.execution' AND claimed = 0 AND available_at <= +?2
ORDER BY priority DESC, available_at, id LIMIT +?3

-- name: mark_claimed
-- ?1 is a JSON array of the row ids claim returned.
UPDATE broker_messages SET claimed = 1, deliveries = deliveries + 1 WHERE id IN (SELECT value FROM json_each(?1))

-- name: next_due
-- ?1 topic, ?2 now: the earliest due time still to come (the rows due now
-- were all read, or are being claimed by another consumer).
SELECT min(available_at) FROM broker_messages WHERE topic = +?1 AND claimed = 0 AND available_at > +?2

-- name: ack
-- ?1 is a JSON array of row ids.
DELETE FROM broker_messages WHERE id IN (SELECT value FROM json_each(?1))

-- name: unclaim
-- ?1 is a JSON array of row ids claimed but never handed to a handler.
UPDATE broker_messages SET claimed = 0, deliveries = deliveries - 1 WHERE id IN (SELECT value FROM json_each(?1))

-- name: put_back
UPDATE broker_messages SET claimed = 0, available_at = ?2 WHERE id = ?1

-- name: dead_letter
UPDATE broker_messages
SET topic = 'workflow.dlq', origin = topic, reason = ?2, claimed = 0, deliveries = 0, first = 0, available_at = ?3
WHERE id = ?1

-- name: dead_letters
SELECT id, msg_id, key, origin, reason, published_at, body FROM broker_messages
WHERE topic = 'workflow.dlq' ORDER BY id LIMIT ?1

-- name: dead_letters_count
SELECT count(*) FROM broker_messages WHERE topic = 'workflow.dlq'

-- name: dead_letters_by_id
-- ?1 is a JSON array of message ids.
SELECT id, msg_id, key, lane, trace, origin, reason, published_at, body FROM broker_messages
WHERE topic = 'workflow.dlq' AND msg_id IN (SELECT value FROM json_each(?1)) ORDER BY id

-- name: delete
DELETE FROM broker_messages WHERE id = ?1

-- name: purge_dead_letters
DELETE FROM broker_messages WHERE topic = 'workflow.dlq'
