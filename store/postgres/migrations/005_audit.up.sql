-- The audit log (docs/api.md, "Audit log"): one row per state-changing API
-- request; objects holds the route's path values. Pruned by age with the
-- history (rune server --retention).
CREATE TABLE audit (
  id BIGSERIAL PRIMARY KEY,
  at TIMESTAMPTZ NOT NULL,
  actor TEXT NOT NULL,
  role TEXT NOT NULL,
  method TEXT NOT NULL,
  route TEXT NOT NULL,
  objects JSONB NOT NULL,
  status INTEGER NOT NULL
);
CREATE INDEX audit_at ON audit (at);
