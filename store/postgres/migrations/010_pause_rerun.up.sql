-- Pause and re-run (issue 34).

-- A paused workflow: its enqueued executions are not claimed (they stay
-- enqueued) until the row is deleted by a resume.
CREATE TABLE workflow_pauses (
    workflow_id text        PRIMARY KEY,
    paused_at   timestamptz NOT NULL
);

-- Where a re-run from a node starts: written before its execution, read by
-- the dispatcher when it claims an execution whose trigger is rerun:<id>.
CREATE TABLE rerun_starts (
    execution_id text        PRIMARY KEY,
    source_id    text        NOT NULL,
    from_node    text        NOT NULL,
    context      jsonb       NOT NULL,
    created_at   timestamptz NOT NULL
);

-- A paused execution, as the API shows it (the coordinator's flag is what
-- stops its branches).
CREATE TABLE execution_pauses (
    execution_id text        PRIMARY KEY,
    paused_at    timestamptz NOT NULL
);
