-- Flow control by key (issue 35; docs/dsl.md "Flow control"). Times in Unix
-- microseconds.
--
-- priority: 1 (lowest) … 10 (highest); the claim takes the highest first,
-- each priority read on its own range of this index (no scan of executions
-- held for a slot, whose available_at is far in the future).
ALTER TABLE executions ADD COLUMN priority INTEGER NOT NULL DEFAULT 5;
CREATE INDEX executions_enqueued_priority ON executions (priority, available_at) WHERE status = 'enqueued';

-- One row per execution of a workflow with a concurrency setting, from the
-- dispatcher's first claim of it: 'admitted' holds one of its key's slots
-- while the execution has not ended (the slot is the execution itself, so a
-- killed worker's execution frees it when it completes); 'queued' waits, its
-- execution enqueued with available_at held far ahead until promoted. seq is
-- the arrival order within a priority.
CREATE TABLE flow_slots (
    execution_id TEXT    PRIMARY KEY,
    workflow_id  TEXT    NOT NULL,
    flow_key     TEXT    NOT NULL,
    lim          INTEGER NOT NULL,
    priority     INTEGER NOT NULL,
    state        TEXT    NOT NULL,
    seq          INTEGER NOT NULL,
    due_at       INTEGER NOT NULL,
    created_at   INTEGER NOT NULL
);
CREATE INDEX flow_slots_key ON flow_slots (workflow_id, flow_key, state, priority DESC, seq);
CREATE INDEX flow_slots_state ON flow_slots (state);

-- The keys with queued executions, served round-robin: the promoter visits
-- them least recently served first (turn_at).
CREATE TABLE flow_keys (
    workflow_id TEXT    NOT NULL,
    flow_key    TEXT    NOT NULL,
    turn_at     INTEGER NOT NULL,
    PRIMARY KEY (workflow_id, flow_key)
);
CREATE INDEX flow_keys_turn ON flow_keys (turn_at);

-- The open debounce of each (workflow, key): the execution later triggers
-- collapse into while it is still enqueued, and when its first trigger came
-- (for max_wait).
CREATE TABLE flow_debounce (
    workflow_id  TEXT    NOT NULL,
    debounce_key TEXT    NOT NULL,
    execution_id TEXT    NOT NULL,
    first_at     INTEGER NOT NULL,
    PRIMARY KEY (workflow_id, debounce_key)
);
CREATE INDEX flow_debounce_execution ON flow_debounce (execution_id);
