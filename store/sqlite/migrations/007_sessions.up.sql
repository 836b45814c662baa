-- Console sessions (docs/api.md, "Sessions"): the SHA-256 hash of each
-- session id (the browser's cookie, never stored itself) and the token it
-- acts as (tokens.id, or an "env:…" binding to RUNE_API_TOKEN, hence no
-- foreign key); times in Unix microseconds. Revoking a token deletes its
-- sessions; expired ones are pruned as new ones are made.
CREATE TABLE sessions (
  hash BLOB PRIMARY KEY,
  token_id TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL
);
CREATE INDEX sessions_token ON sessions (token_id);
CREATE INDEX sessions_expires ON sessions (expires_at);
