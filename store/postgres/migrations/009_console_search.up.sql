-- The executions list's filter on input values (issue 38: GET
-- /v1/executions?input.user_id=42 is input::jsonb @> '{"user_id": 42}').
-- jsonb_path_ops indexes every path-to-value of each input; the column
-- stays json (shown back as written), so the index is on the cast.
CREATE INDEX IF NOT EXISTS executions_input ON executions USING GIN ((input::jsonb) jsonb_path_ops);
-- IF NOT EXISTS: on a large table an operator may build it CONCURRENTLY
-- by hand first (docs/architecture.md, "Console search and management").
