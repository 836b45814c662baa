-- The notification platform (issue 36): sends and their delivery status
-- history, subscribers, their preferences, and templates.
CREATE TABLE notify_sends (
    credential   text        NOT NULL,
    message_id   text        NOT NULL,
    execution_id text        NOT NULL,
    workflow_id  text        NOT NULL DEFAULT '',
    node_id      text        NOT NULL,
    branch       text        NOT NULL DEFAULT '',
    channel      text        NOT NULL,
    -- The status recorded with the send: queued (sms) or sent (email).
    status       text        NOT NULL,
    sent_at      timestamptz NOT NULL,
    PRIMARY KEY (credential, message_id)
);
CREATE INDEX notify_sends_execution ON notify_sends (execution_id, sent_at);

-- Provider callbacks, kept whether or not their send is recorded yet.
CREATE TABLE notify_send_statuses (
    id              bigserial   PRIMARY KEY,
    credential      text        NOT NULL,
    message_id      text        NOT NULL,
    status          text        NOT NULL,
    provider_status text        NOT NULL DEFAULT '',
    at              timestamptz NOT NULL
);
CREATE INDEX notify_send_statuses_send ON notify_send_statuses (credential, message_id, id);

CREATE TABLE notify_subscribers (
    id         text        PRIMARY KEY,
    body       jsonb       NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);

CREATE TABLE notify_preferences (
    subscriber_id text        PRIMARY KEY,
    body          jsonb       NOT NULL,
    updated_at    timestamptz NOT NULL
);

CREATE TABLE notify_templates (
    name       text        NOT NULL,
    version    integer     NOT NULL,
    body       jsonb       NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (name, version)
);
