-- The notification platform (issue 36): sends and their delivery status
-- history, subscribers, their preferences, and templates.
CREATE TABLE notify_sends (
    credential   TEXT    NOT NULL,
    message_id   TEXT    NOT NULL,
    execution_id TEXT    NOT NULL,
    workflow_id  TEXT    NOT NULL DEFAULT '',
    node_id      TEXT    NOT NULL,
    branch       TEXT    NOT NULL DEFAULT '',
    channel      TEXT    NOT NULL,
    -- The status recorded with the send: queued (sms) or sent (email).
    status       TEXT    NOT NULL,
    sent_at      INTEGER NOT NULL,
    PRIMARY KEY (credential, message_id)
);
CREATE INDEX notify_sends_execution ON notify_sends (execution_id, sent_at);

-- Provider callbacks, kept whether or not their send is recorded yet.
CREATE TABLE notify_send_statuses (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    credential      TEXT    NOT NULL,
    message_id      TEXT    NOT NULL,
    status          TEXT    NOT NULL,
    provider_status TEXT    NOT NULL DEFAULT '',
    at              INTEGER NOT NULL
);
CREATE INDEX notify_send_statuses_send ON notify_send_statuses (credential, message_id, id);

CREATE TABLE notify_subscribers (
    id         TEXT    PRIMARY KEY,
    body       TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);

CREATE TABLE notify_preferences (
    subscriber_id TEXT    PRIMARY KEY,
    body          TEXT    NOT NULL,
    updated_at    INTEGER NOT NULL
);

CREATE TABLE notify_templates (
    name       TEXT    NOT NULL,
    version    INTEGER NOT NULL,
    body       TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (name, version)
);
