-- The last deliveries of each hook (issue 38): what each request to a
-- hook's URL was answered. No body, header value or signature is kept.
-- The store keeps the newest store.HookDeliveriesKept per hook.
CREATE TABLE hook_deliveries (
  seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  hook_id text NOT NULL REFERENCES hooks (id) ON DELETE CASCADE,
  received_at timestamptz NOT NULL,
  status integer NOT NULL,
  code text NOT NULL DEFAULT '',
  execution_id text NOT NULL DEFAULT '',
  event_id text NOT NULL DEFAULT '',
  size bigint NOT NULL
);
CREATE INDEX hook_deliveries_hook ON hook_deliveries (hook_id, seq);
