-- The audit log (docs/api.md, "Audit log"): one row per state-changing API
-- request; objects is a JSON object of the route's path values. Pruned by
-- age with the history (rune server --retention).
CREATE TABLE audit (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  at INTEGER NOT NULL,
  actor TEXT NOT NULL,
  role TEXT NOT NULL,
  method TEXT NOT NULL,
  route TEXT NOT NULL,
  objects TEXT NOT NULL,
  status INTEGER NOT NULL
);
CREATE INDEX audit_at ON audit (at);
