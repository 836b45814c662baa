-- Times are INTEGER microseconds since the Unix epoch (UTC); JSON is TEXT.

CREATE TABLE workflows (
    id         TEXT    NOT NULL,
    version    INTEGER NOT NULL,
    name       TEXT    NOT NULL,
    definition TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (id, version)
);

-- One row per workflow: its latest version and whether it was deleted.
CREATE TABLE workflow_heads (
    id         TEXT    PRIMARY KEY,
    latest     INTEGER NOT NULL,
    deleted_at INTEGER
);

CREATE TABLE executions (
    id               TEXT    PRIMARY KEY,
    workflow_id      TEXT    NOT NULL,
    version          INTEGER NOT NULL,
    status           TEXT    NOT NULL,
    input            TEXT    NOT NULL,
    idempotency_key  TEXT,
    trigger_source   TEXT    NOT NULL,
    available_at     INTEGER NOT NULL,
    attempts         INTEGER NOT NULL,
    cursor           TEXT,
    vars             TEXT,
    unfinished       TEXT,
    completion       TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    claimed_by       TEXT,
    claim_until      INTEGER,
    dispatched_at    INTEGER,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    finished_at      INTEGER
);
CREATE UNIQUE INDEX executions_idempotency ON executions (workflow_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
-- The claim: due enqueued executions, and claimed ones never dispatched.
CREATE INDEX executions_enqueued ON executions (available_at) WHERE status = 'enqueued';
CREATE INDEX executions_undispatched ON executions (claim_until) WHERE status = 'processing' AND dispatched_at IS NULL;
-- The list, newest first, alone or by workflow or status.
CREATE INDEX executions_created ON executions (created_at DESC, id DESC);
CREATE INDEX executions_workflow ON executions (workflow_id, created_at DESC, id DESC);
CREATE INDEX executions_status ON executions (status, created_at DESC, id DESC);

CREATE TABLE node_runs (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    execution_id    TEXT    NOT NULL REFERENCES executions (id),
    node_id         TEXT    NOT NULL,
    branch          TEXT    NOT NULL,
    lineage         TEXT,
    status          TEXT    NOT NULL,
    attempt         INTEGER NOT NULL,
    output          TEXT,
    error           TEXT,
    details         TEXT,
    started_at      INTEGER,
    finished_at     INTEGER,
    next_attempt_at INTEGER,
    resume_at       INTEGER,
    duration_ms     INTEGER NOT NULL,
    reported_at     INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    UNIQUE (execution_id, node_id, branch)
);

CREATE TABLE events (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    execution_id TEXT    NOT NULL,
    dedupe_key   TEXT,
    kind         TEXT    NOT NULL,
    body         TEXT    NOT NULL,
    at           INTEGER NOT NULL
);
CREATE UNIQUE INDEX events_dedupe ON events (execution_id, dedupe_key) WHERE dedupe_key IS NOT NULL;
CREATE INDEX events_execution ON events (execution_id, id);

CREATE TABLE credentials (
    name       TEXT    PRIMARY KEY,
    type       TEXT    NOT NULL,
    key_id     TEXT    NOT NULL,
    ciphertext BLOB    NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);

CREATE TABLE tokens (
    id         TEXT    PRIMARY KEY,
    name       TEXT    NOT NULL UNIQUE,
    prefix     TEXT    NOT NULL,
    hash       BLOB    NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
);
