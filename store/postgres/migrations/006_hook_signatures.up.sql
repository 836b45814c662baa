-- Signatures of the webhook deliveries accepted (issue 31): a replay of
-- one is a duplicate, whatever its delivery id, until expires_at (the
-- signature's timestamp plus the hook's tolerance, or 24 h without one).
CREATE TABLE hook_signatures (
    hook_id      text        NOT NULL,
    -- SHA-256 of the signature as sent.
    signature    bytea       NOT NULL,
    execution_id text        NOT NULL,
    expires_at   timestamptz NOT NULL,
    PRIMARY KEY (hook_id, signature)
);
CREATE INDEX hook_signatures_expiry ON hook_signatures (hook_id, expires_at);
