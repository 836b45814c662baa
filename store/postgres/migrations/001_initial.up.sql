-- JSON that is shown back as it was written (definitions, inputs, outputs,
-- messages) is json, which keeps its text; bookkeeping is jsonb.

CREATE TABLE workflows (
    id         text        NOT NULL,
    version    integer     NOT NULL,
    name       text        NOT NULL,
    definition json        NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (id, version)
);

-- One row per workflow: its latest version and whether it was deleted.
CREATE TABLE workflow_heads (
    id         text        PRIMARY KEY,
    latest     integer     NOT NULL,
    deleted_at timestamptz
);

CREATE TABLE executions (
    id               text        PRIMARY KEY,
    workflow_id      text        NOT NULL,
    version          integer     NOT NULL,
    status           text        NOT NULL,
    input            json        NOT NULL,
    idempotency_key  text,
    trigger_source   text        NOT NULL,
    available_at     timestamptz NOT NULL,
    attempts         integer     NOT NULL,
    cursor           jsonb,
    vars             jsonb,
    unfinished       jsonb,
    completion       json,
    cancel_requested boolean     NOT NULL DEFAULT false,
    claimed_by       text,
    claim_until      timestamptz,
    dispatched_at    timestamptz,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    finished_at      timestamptz
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
    seq             bigserial   PRIMARY KEY,
    execution_id    text        NOT NULL REFERENCES executions (id),
    node_id         text        NOT NULL,
    branch          text        NOT NULL,
    lineage         jsonb,
    status          text        NOT NULL,
    attempt         integer     NOT NULL,
    output          json,
    error           json,
    details         json,
    started_at      timestamptz,
    finished_at     timestamptz,
    next_attempt_at timestamptz,
    resume_at       timestamptz,
    duration_ms     bigint      NOT NULL,
    reported_at     timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    UNIQUE (execution_id, node_id, branch)
);

-- The event log live streams replay. Ids ascend in commit order: writers
-- take an advisory lock (see queries.sql, event_lock) before inserting.
CREATE TABLE events (
    id           bigserial   PRIMARY KEY,
    execution_id text        NOT NULL,
    dedupe_key   text,
    kind         text        NOT NULL,
    body         json        NOT NULL,
    at           timestamptz NOT NULL
);
CREATE UNIQUE INDEX events_dedupe ON events (execution_id, dedupe_key) WHERE dedupe_key IS NOT NULL;
CREATE INDEX events_execution ON events (execution_id, id);

CREATE TABLE credentials (
    name       text        PRIMARY KEY,
    type       text        NOT NULL,
    key_id     text        NOT NULL,
    ciphertext bytea       NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);

CREATE TABLE tokens (
    id         text        PRIMARY KEY,
    name       text        NOT NULL UNIQUE,
    prefix     text        NOT NULL,
    hash       bytea       NOT NULL UNIQUE,
    created_at timestamptz NOT NULL,
    revoked_at timestamptz
);
