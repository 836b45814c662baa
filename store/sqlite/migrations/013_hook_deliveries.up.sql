-- The last deliveries of each hook (issue 38): what each request to a
-- hook's URL was answered. No body, header value or signature is kept.
-- The store keeps the newest store.HookDeliveriesKept per hook.
CREATE TABLE hook_deliveries (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  hook_id TEXT NOT NULL REFERENCES hooks (id) ON DELETE CASCADE,
  received_at INTEGER NOT NULL,
  status INTEGER NOT NULL,
  code TEXT NOT NULL DEFAULT '',
  execution_id TEXT NOT NULL DEFAULT '',
  event_id TEXT NOT NULL DEFAULT '',
  size INTEGER NOT NULL
);
CREATE INDEX hook_deliveries_hook ON hook_deliveries (hook_id, seq);
