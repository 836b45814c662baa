-- Roles and scopes on tokens (docs/api.md, "Roles"): tokens made before
-- roles existed keep every right (admin). workflows is a comma-separated list
-- of glob patterns ('' for every workflow).
ALTER TABLE tokens ADD COLUMN role TEXT NOT NULL DEFAULT 'admin';
ALTER TABLE tokens ADD COLUMN workflows TEXT NOT NULL DEFAULT '';
ALTER TABLE tokens ADD COLUMN expires_at TIMESTAMPTZ;
