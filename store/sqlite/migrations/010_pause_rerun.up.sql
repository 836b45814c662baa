-- Pause and re-run (issue 34). Times are INTEGER microseconds, JSON is TEXT.

-- A paused workflow: its enqueued executions are not claimed (they stay
-- enqueued) until the row is deleted by a resume.
CREATE TABLE workflow_pauses (
    workflow_id TEXT    PRIMARY KEY,
    paused_at   INTEGER NOT NULL
);

-- Where a re-run from a node starts: written before its execution, read by
-- the dispatcher when it claims an execution whose trigger is rerun:<id>.
CREATE TABLE rerun_starts (
    execution_id TEXT    PRIMARY KEY,
    source_id    TEXT    NOT NULL,
    from_node    TEXT    NOT NULL,
    context      TEXT    NOT NULL,
    created_at   INTEGER NOT NULL
);

-- A paused execution, as the API shows it (the coordinator's flag is what
-- stops its branches).
CREATE TABLE execution_pauses (
    execution_id TEXT    PRIMARY KEY,
    paused_at    INTEGER NOT NULL
);
