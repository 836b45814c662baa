-- Webhooks and schedules (issue 15). Settings are the server's JSON,
-- opaque here; the store reads only what finding and firing need.

CREATE TABLE hooks (
    id             text        PRIMARY KEY,
    workflow_id    text        NOT NULL,
    name           text        NOT NULL,
    -- SHA-256 of the URL's secret: the secret itself is never stored.
    secret_hash    bytea       NOT NULL UNIQUE,
    settings       json        NOT NULL,
    signing_key_id text,
    signing_secret bytea,
    disabled       boolean     NOT NULL DEFAULT false,
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL
);
CREATE INDEX hooks_workflow ON hooks (workflow_id, created_at, id);

CREATE TABLE schedules (
    id          text        PRIMARY KEY,
    workflow_id text        NOT NULL,
    name        text        NOT NULL,
    settings    json        NOT NULL,
    paused      boolean     NOT NULL DEFAULT false,
    -- The next slot to fire (NULL once the schedule ended): replicas
    -- compare-and-set it to fire a slot exactly once.
    next_at     timestamptz,
    last_slot   timestamptz,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);
CREATE INDEX schedules_workflow ON schedules (workflow_id, created_at, id);
CREATE INDEX schedules_due ON schedules (next_at) WHERE NOT paused AND next_at IS NOT NULL;
