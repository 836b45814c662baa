-- The coordination tables of coord/sqlite, created at New (IF NOT EXISTS:
-- New is idempotent on a file that has them). Times are INTEGER Unix
-- milliseconds. Every table starts with coord_: the broker and the store
-- share the file.

-- The version of these tables, one row: New refuses a file of a later
-- version, and a later Rune migrates from this one.
CREATE TABLE IF NOT EXISTS coord_schema (version INTEGER NOT NULL);

-- One row per execution: the live message count, the first halt's Failure
-- (JSON), the completer's id and the time it ended (both NULL while live),
-- whether its completion was published, and how many ids are parked (so a
-- Finish skips coord_parked when none is).
CREATE TABLE IF NOT EXISTS coord_exec (
  exec      TEXT PRIMARY KEY,
  live      INTEGER NOT NULL,
  halt      TEXT,
  last      TEXT,
  ended     INTEGER,
  published INTEGER NOT NULL DEFAULT 0,
  parked    INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

-- Ended executions by end time: the sweep's expiry order.
CREATE INDEX IF NOT EXISTS coord_exec_ended ON coord_exec (ended) WHERE ended IS NOT NULL;

-- Finished messages and their Records (NULL for none).
CREATE TABLE IF NOT EXISTS coord_done (
  exec   TEXT NOT NULL,
  id     TEXT NOT NULL,
  record BLOB,
  PRIMARY KEY (exec, id)
) WITHOUT ROWID;

-- The final context: one JSON value per top-level key.
CREATE TABLE IF NOT EXISTS coord_ctx (
  exec  TEXT NOT NULL,
  key   TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY (exec, key)
) WITHOUT ROWID;

-- Ids waiting in the timer store (Park) until their Finish.
CREATE TABLE IF NOT EXISTS coord_parked (
  exec TEXT NOT NULL,
  id   TEXT NOT NULL,
  PRIMARY KEY (exec, id)
) WITHOUT ROWID;

-- Barriers. status: 0 open, 1 completed, 2 cancelled. win is the completing
-- slot. vals_until: the values (and state) are kept until then, for the
-- completer's repeat; the sweep deletes them after it and sets it NULL
-- (a cancelled barrier's are due at once). expires: NULL for a barrier of
-- a started execution, which lives as long as the execution; else (an
-- execution this store does not know) the spec's TTL after its last
-- arrival, or its closing.
CREATE TABLE IF NOT EXISTS coord_bar (
  exec       TEXT NOT NULL,
  key        TEXT NOT NULL,
  status     INTEGER NOT NULL,
  total      INTEGER NOT NULL,
  need       INTEGER NOT NULL,
  n          INTEGER NOT NULL DEFAULT 0,
  win        INTEGER,
  ttl        INTEGER NOT NULL,
  expires    INTEGER,
  vals_until INTEGER,
  PRIMARY KEY (exec, key)
) WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS coord_bar_vals ON coord_bar (vals_until) WHERE vals_until IS NOT NULL;
CREATE INDEX IF NOT EXISTS coord_bar_expires ON coord_bar (expires) WHERE expires IS NOT NULL;

-- A barrier's values by slot, once per slot; slot -1 is Open's state.
CREATE TABLE IF NOT EXISTS coord_barval (
  exec  TEXT NOT NULL,
  key   TEXT NOT NULL,
  slot  INTEGER NOT NULL,
  value BLOB NOT NULL,
  PRIMARY KEY (exec, key, slot)
) WITHOUT ROWID;

-- Blobs, content-addressed per execution. A rowid table: blobs are large,
-- and a WITHOUT ROWID table keeps its rows in the key's b-tree.
CREATE TABLE IF NOT EXISTS coord_blob (
  exec TEXT NOT NULL,
  ref  TEXT NOT NULL,
  data BLOB NOT NULL,
  UNIQUE (exec, ref)
);

-- Timers. claims is 0 while waiting; from the first Claim on the timer is
-- claimed, until Done deletes it, and deadline is its lease's end.
CREATE TABLE IF NOT EXISTS coord_timer (
  id       TEXT PRIMARY KEY,
  due      INTEGER NOT NULL,
  claims   INTEGER NOT NULL DEFAULT 0,
  deadline INTEGER,
  payload  BLOB NOT NULL
);

-- Waiting timers by due time (Claim, Stats), claimed ones by lease end.
CREATE INDEX IF NOT EXISTS coord_timer_due ON coord_timer (due, id) WHERE claims = 0;
CREATE INDEX IF NOT EXISTS coord_timer_lease ON coord_timer (deadline) WHERE claims > 0;

-- Side effects by idempotency key: the Begins counted, the recorded result
-- (NULL when none), and the last use (the sweep's expiry order).
CREATE TABLE IF NOT EXISTS coord_effect (
  key     TEXT PRIMARY KEY,
  intents INTEGER NOT NULL,
  result  BLOB,
  used    INTEGER NOT NULL
) WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS coord_effect_used ON coord_effect (used);

-- The Limiter (issues 35, 36), times in microseconds: each rate key's GCRA
-- theoretical arrival time, the reservations by id (their start), and each
-- throttle key's window of admitted ids. until: when the sweep may delete
-- the row.
CREATE TABLE IF NOT EXISTS coord_rate (
  key   TEXT PRIMARY KEY,
  tat   INTEGER NOT NULL,
  until INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS coord_rate_res (
  key   TEXT NOT NULL,
  id    TEXT NOT NULL,
  start INTEGER NOT NULL,
  until INTEGER NOT NULL,
  PRIMARY KEY (key, id)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS coord_window (
  key   TEXT NOT NULL,
  id    TEXT NOT NULL,
  at    INTEGER NOT NULL,
  until INTEGER NOT NULL,
  PRIMARY KEY (key, id)
) WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS coord_rate_until ON coord_rate (until);
CREATE INDEX IF NOT EXISTS coord_rate_res_until ON coord_rate_res (until);
CREATE INDEX IF NOT EXISTS coord_window_at ON coord_window (key, at);
CREATE INDEX IF NOT EXISTS coord_window_until ON coord_window (until);

-- Events (issue 34): waits for an (event, key) pair, named by
-- coord.EventPair, and the events delivered, retained until keep. A wait's
-- state: 0 registered, 1 matched (event holds its event, JSON), 2 taken
-- without one (timed out).
CREATE TABLE IF NOT EXISTS coord_evwait (
  pair  TEXT NOT NULL,
  timer TEXT NOT NULL,
  since INTEGER NOT NULL,
  due   INTEGER NOT NULL,
  state INTEGER NOT NULL,
  event BLOB,
  PRIMARY KEY (pair, timer)
) WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS coord_evwait_open ON coord_evwait (pair, since) WHERE state = 0;
CREATE INDEX IF NOT EXISTS coord_evwait_due ON coord_evwait (due);

-- Delivered events: the event (JSON) and the timers its delivery matched
-- (a JSON array), for a repeated delivery.
CREATE TABLE IF NOT EXISTS coord_event (
  pair    TEXT NOT NULL,
  id      TEXT NOT NULL,
  at      INTEGER NOT NULL,
  keep    INTEGER NOT NULL,
  event   BLOB NOT NULL,
  matched TEXT NOT NULL,
  PRIMARY KEY (pair, id)
) WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS coord_event_at ON coord_event (pair, at);
CREATE INDEX IF NOT EXISTS coord_event_keep ON coord_event (keep);

-- Paused executions (issue 34, coord.Pauses): a row while paused.
CREATE TABLE IF NOT EXISTS coord_paused (
  exec TEXT PRIMARY KEY
) WITHOUT ROWID;

-- Digests (issue 36, coord.Digests): per key, each digest by its opener
-- (open = 1 for the key's open one; closes in ms; n values so far), its
-- values in the order they joined (seq from 0, the opener's first), and the
-- digest each member joined. until: when the sweep may delete the row
-- (closes + coord.DigestGrace); a digest's values go with it.
CREATE TABLE IF NOT EXISTS coord_digest (
  key    TEXT NOT NULL,
  opener TEXT NOT NULL,
  exec   TEXT NOT NULL,
  closes INTEGER NOT NULL,
  open   INTEGER NOT NULL,
  n      INTEGER NOT NULL,
  until  INTEGER NOT NULL,
  PRIMARY KEY (key, opener)
) WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS coord_digest_open ON coord_digest (key) WHERE open = 1;
CREATE INDEX IF NOT EXISTS coord_digest_until ON coord_digest (until);

CREATE TABLE IF NOT EXISTS coord_digest_val (
  key    TEXT NOT NULL,
  opener TEXT NOT NULL,
  seq    INTEGER NOT NULL,
  value  BLOB NOT NULL,
  PRIMARY KEY (key, opener, seq)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS coord_digest_member (
  key    TEXT NOT NULL,
  member TEXT NOT NULL,
  opener TEXT NOT NULL,
  until  INTEGER NOT NULL,
  PRIMARY KEY (key, member)
) WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS coord_digest_member_until ON coord_digest_member (until);
