-- Webhooks and schedules (issue 15). Settings are the server's JSON,
-- opaque here; the store reads only what finding and firing need.

CREATE TABLE hooks (
    id             TEXT    PRIMARY KEY,
    workflow_id    TEXT    NOT NULL,
    name           TEXT    NOT NULL,
    -- SHA-256 of the URL's secret: the secret itself is never stored.
    secret_hash    BLOB    NOT NULL UNIQUE,
    settings       TEXT    NOT NULL,
    signing_key_id TEXT,
    signing_secret BLOB,
    disabled       INTEGER NOT NULL DEFAULT 0,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL
);
CREATE INDEX hooks_workflow ON hooks (workflow_id, created_at, id);

CREATE TABLE schedules (
    id          TEXT    PRIMARY KEY,
    workflow_id TEXT    NOT NULL,
    name        TEXT    NOT NULL,
    settings    TEXT    NOT NULL,
    paused      INTEGER NOT NULL DEFAULT 0,
    -- The next slot to fire (NULL once the schedule ended): replicas
    -- compare-and-set it to fire a slot exactly once.
    next_at     INTEGER,
    last_slot   INTEGER,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE INDEX schedules_workflow ON schedules (workflow_id, created_at, id);
CREATE INDEX schedules_due ON schedules (next_at) WHERE paused = 0 AND next_at IS NOT NULL;
