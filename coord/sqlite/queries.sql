-- Queries of coord/sqlite, by name (see store/sqlfile). The tables are in
-- schema.sql. Those named r_* run on the reader pool, the rest on the writer
-- connection inside sqlitedb.DB.Write.

-- name: schema_version
SELECT coalesce(max(version), 0) FROM coord_schema

-- name: schema_record
INSERT INTO coord_schema (version) SELECT ?1 WHERE NOT EXISTS (SELECT 1 FROM coord_schema)

-- Coordinator -----------------------------------------------------------

-- name: exec_start
INSERT INTO coord_exec (exec, live) VALUES (?1, ?2) ON CONFLICT DO NOTHING

-- name: r_exec_begin
SELECT e.live, e.halt IS NOT NULL, d.id IS NOT NULL, d.record
FROM coord_exec e LEFT JOIN coord_done d ON d.exec = e.exec AND d.id = ?2
WHERE e.exec = ?1

-- name: exec_finish_lookup
SELECT e.live, e.halt IS NOT NULL, coalesce(e.last = ?2, 0), e.published, d.id IS NOT NULL, d.record
FROM coord_exec e LEFT JOIN coord_done d ON d.exec = e.exec AND d.id = ?2
WHERE e.exec = ?1

-- name: done_insert
INSERT INTO coord_done (exec, id, record) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING

-- name: done_undo
DELETE FROM coord_done WHERE exec = ?1 AND id = ?2

-- Finish's fast path, after done_insert recorded id: the count moves by ?2
-- (spawned - 1) unless the execution has ended, an optimistic Finish (?4)
-- meets a halt, or an IfLast one (?5) would not end it; then no row comes
-- back, and Finish undoes the insert and takes the slow path. On the end,
-- the completer ?6 and the time ?7.
-- name: exec_account
UPDATE coord_exec SET live = live + ?2, halt = coalesce(halt, ?3),
  last = CASE WHEN live + ?2 <= 0 THEN ?6 END, ended = CASE WHEN live + ?2 <= 0 THEN ?7 END
WHERE exec = ?1 AND live > 0 AND (?4 = 0 OR halt IS NULL) AND (?5 = 0 OR live + ?2 <= 0)
RETURNING live, parked

-- name: exec_parked_dec
UPDATE coord_exec SET parked = parked - 1 WHERE exec = ?1

-- name: parked_forget
DELETE FROM coord_parked WHERE exec = ?1 AND id = ?2

-- An End's keys at once, from its JSON object ?2: each value kept as its
-- JSON text (-> by the key's quoted path), the later Finish winning a key.
-- name: ctx_set
INSERT INTO coord_ctx (exec, key, value)
SELECT ?1, j.key, ?2 -> j.fullkey FROM json_each(?2) j WHERE true
ON CONFLICT (exec, key) DO UPDATE SET value = excluded.value

-- name: exec_halt
SELECT halt FROM coord_exec WHERE exec = ?1

-- The final context as one JSON object.
-- name: ctx_all
SELECT coalesce(json_group_object(key, json(value)), '{}') FROM coord_ctx WHERE exec = ?1

-- name: exec_state
SELECT live, halt IS NOT NULL FROM coord_exec WHERE exec = ?1

-- name: parked_add
INSERT INTO coord_parked (exec, id) VALUES (?1, ?2) ON CONFLICT DO NOTHING

-- name: exec_parked_inc
UPDATE coord_exec SET parked = parked + 1 WHERE exec = ?1

-- name: r_parked_list
SELECT id FROM coord_parked WHERE exec = ?1

-- name: exec_published
UPDATE coord_exec SET published = 1 WHERE exec = ?1 AND last IS NOT NULL

-- Barriers --------------------------------------------------------------

-- name: bar_get
SELECT status, total, n, need, win, vals_until, expires IS NOT NULL FROM coord_bar WHERE exec = ?1 AND key = ?2

-- name: exec_known
SELECT count(*) FROM coord_exec WHERE exec = ?1

-- name: bar_insert
INSERT INTO coord_bar (exec, key, status, total, need, ttl, expires) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)

-- name: barval_insert
INSERT INTO coord_barval (exec, key, slot, value) VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING

-- Arrive's fast path: the value of slot ?3, when the barrier is open, the
-- slot in its range and new; then bar_count counts it. Anything else
-- (no barrier yet, closed, a repeat, out of range) inserts nothing, and
-- Arrive reads the barrier first.
-- name: barval_arrive
INSERT INTO coord_barval (exec, key, slot, value)
SELECT ?1, ?2, ?3, ?4 WHERE EXISTS (
  SELECT 1 FROM coord_bar WHERE exec = ?1 AND key = ?2 AND status = 0 AND ?3 >= 0 AND ?3 < total)
ON CONFLICT DO NOTHING

-- name: bar_count
UPDATE coord_bar SET n = n + 1, ttl = ?3, expires = CASE WHEN expires IS NULL THEN NULL ELSE ?4 END
WHERE exec = ?1 AND key = ?2
RETURNING n, need, total

-- An arrival counted, or repeated: a barrier of an unknown execution lives
-- its TTL from its last arrival.
-- name: bar_arrived
UPDATE coord_bar SET n = ?3, ttl = ?4, expires = CASE WHEN expires IS NULL THEN NULL ELSE ?5 END
WHERE exec = ?1 AND key = ?2

-- name: bar_complete
UPDATE coord_bar SET status = 1, n = ?3, win = ?4, vals_until = ?5, ttl = ?6,
  expires = CASE WHEN expires IS NULL THEN NULL ELSE ?7 END
WHERE exec = ?1 AND key = ?2

-- name: barval_all
SELECT slot, value FROM coord_barval WHERE exec = ?1 AND key = ?2 ORDER BY slot

-- A cancelled barrier's values are deleted by the sweep, at once; an
-- unknown execution's closed marker lives its TTL from now.
-- name: bar_cancel
UPDATE coord_bar SET status = 2, vals_until = ?3, expires = CASE WHEN expires IS NULL THEN NULL ELSE ?3 + ttl END
WHERE exec = ?1 AND key = ?2

-- Blobs -----------------------------------------------------------------

-- name: blob_put
INSERT INTO coord_blob (exec, ref, data) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING

-- name: r_blob_get
SELECT data FROM coord_blob WHERE exec = ?1 AND ref = ?2

-- name: r_blob_has
SELECT count(*) FROM coord_blob WHERE exec = ?1 AND ref = ?2

-- name: blob_release
DELETE FROM coord_blob WHERE exec = ?1

-- Timers ----------------------------------------------------------------

-- name: timer_schedule
INSERT INTO coord_timer (id, due, payload) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING

-- Whether Claim at ?1 would find anything: a read, so an idle scheduler's
-- polls stay off the writer.
-- name: r_timer_claimable
SELECT EXISTS (SELECT 1 FROM coord_timer WHERE claims = 0 AND due <= ?1)
    OR EXISTS (SELECT 1 FROM coord_timer WHERE claims > 0 AND deadline <= ?1)

-- The ?2 earliest due of the waiting timers due by ?1 and of the claimed
-- ones whose lease passed by ?1 (up to ?2 of those, by lease end), leased
-- until ?3. RETURNING has no order: the caller sorts.
-- name: timer_claim
UPDATE coord_timer SET claims = claims + 1, deadline = ?3
WHERE id IN (
  SELECT id FROM (
    SELECT id, due, claims FROM (
      SELECT id, due, claims FROM coord_timer WHERE claims = 0 AND due <= ?1 ORDER BY due, id LIMIT ?2)
    UNION ALL
    SELECT id, due, claims FROM (
      SELECT id, due, claims FROM coord_timer WHERE claims > 0 AND deadline <= ?1 ORDER BY deadline LIMIT ?2)
  ) ORDER BY due, claims DESC, id LIMIT ?2)
RETURNING id, due, claims, payload

-- name: timer_extend
UPDATE coord_timer SET deadline = ?2 WHERE id = ?1 AND claims = ?3

-- name: timer_done
DELETE FROM coord_timer WHERE id = ?1

-- name: timer_wake
UPDATE coord_timer SET due = ?2 WHERE id = ?1 AND claims = 0 AND due > ?2

-- name: r_timer_stats
SELECT (SELECT count(*) FROM coord_timer WHERE claims = 0),
       (SELECT count(*) FROM coord_timer WHERE claims > 0),
       (SELECT min(due) FROM coord_timer WHERE claims = 0)

-- Effects ---------------------------------------------------------------

-- A key unused since ?3 counts as gone, whether the sweep deleted it yet
-- or not. In SET, every column on the right is the row's old value.
-- name: effect_begin
INSERT INTO coord_effect (key, intents, used) VALUES (?1, 1, ?2)
ON CONFLICT (key) DO UPDATE SET
  intents = CASE WHEN used <= ?3 THEN 1 WHEN result IS NULL THEN intents + 1 ELSE intents END,
  result = CASE WHEN used <= ?3 THEN NULL ELSE result END,
  used = ?2
RETURNING intents, result IS NOT NULL, result

-- name: effect_record
INSERT INTO coord_effect (key, intents, result, used) VALUES (?1, 0, ?4, ?2)
ON CONFLICT (key) DO UPDATE SET
  intents = CASE WHEN used <= ?3 THEN 0 ELSE intents END,
  result = CASE WHEN used <= ?3 OR result IS NULL THEN ?4 ELSE result END,
  used = ?2

-- name: effect_withdraw
UPDATE coord_effect SET result = CASE WHEN result = ?4 THEN NULL ELSE result END, used = ?2
WHERE key = ?1 AND used > ?3

-- Sweep -----------------------------------------------------------------

-- name: sweep_vals_due
SELECT exec, key FROM coord_bar WHERE vals_until <= ?1 LIMIT ?2

-- name: sweep_barval_chunk
DELETE FROM coord_barval WHERE exec = ?1 AND key = ?2
  AND slot IN (SELECT slot FROM coord_barval WHERE exec = ?1 AND key = ?2 LIMIT ?3)

-- name: sweep_vals_gone
UPDATE coord_bar SET vals_until = NULL WHERE exec = ?1 AND key = ?2

-- name: sweep_bar_orphans
SELECT exec, key, EXISTS (SELECT 1 FROM coord_exec e WHERE e.exec = b.exec)
FROM coord_bar b WHERE expires <= ?1 LIMIT ?2

-- A barrier that found its execution started since lives with it.
-- name: sweep_bar_adopt
UPDATE coord_bar SET expires = NULL WHERE exec = ?1 AND key = ?2

-- name: sweep_bar_delete
DELETE FROM coord_bar WHERE exec = ?1 AND key = ?2

-- name: sweep_execs
SELECT exec FROM coord_exec WHERE ended <= ?1 ORDER BY ended LIMIT ?2

-- name: sweep_exec_done
DELETE FROM coord_done WHERE exec = ?1 AND id IN (SELECT id FROM coord_done WHERE exec = ?1 LIMIT ?2)

-- name: sweep_exec_ctx
DELETE FROM coord_ctx WHERE exec = ?1 AND key IN (SELECT key FROM coord_ctx WHERE exec = ?1 LIMIT ?2)

-- name: sweep_exec_parked
DELETE FROM coord_parked WHERE exec = ?1 AND id IN (SELECT id FROM coord_parked WHERE exec = ?1 LIMIT ?2)

-- name: sweep_exec_barval
DELETE FROM coord_barval WHERE exec = ?1 AND (key, slot) IN (SELECT key, slot FROM coord_barval WHERE exec = ?1 LIMIT ?2)

-- name: sweep_exec_bar
DELETE FROM coord_bar WHERE exec = ?1 AND key IN (SELECT key FROM coord_bar WHERE exec = ?1 LIMIT ?2)

-- name: sweep_exec_blob
DELETE FROM coord_blob WHERE rowid IN (SELECT rowid FROM coord_blob WHERE exec = ?1 LIMIT ?2)

-- name: sweep_exec_delete
DELETE FROM coord_exec WHERE exec = ?1

-- name: sweep_effects
DELETE FROM coord_effect WHERE key IN (SELECT key FROM coord_effect WHERE used <= ?1 LIMIT ?2)

-- Limiter ---------------------------------------------------------------

-- name: rate_reserved
SELECT start FROM coord_rate_res WHERE key = ?1 AND id = ?2 AND until > ?3

-- name: rate_tat
SELECT tat FROM coord_rate WHERE key = ?1 AND until > ?2

-- name: rate_take
INSERT INTO coord_rate (key, tat, until) VALUES (?1, ?2, ?3)
ON CONFLICT (key) DO UPDATE SET tat = ?2, until = ?3

-- name: rate_res_put
INSERT INTO coord_rate_res (key, id, start, until) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (key, id) DO UPDATE SET start = ?3, until = ?4

-- name: window_trim
DELETE FROM coord_window WHERE key = ?1 AND at <= ?2

-- name: window_has
SELECT 1 FROM coord_window WHERE key = ?1 AND id = ?2

-- name: window_count
SELECT count(*) FROM coord_window WHERE key = ?1

-- The ?2-th oldest (0 first).
-- name: window_nth
SELECT at FROM coord_window WHERE key = ?1 ORDER BY at, id LIMIT 1 OFFSET ?2

-- name: window_add
INSERT INTO coord_window (key, id, at, until) VALUES (?1, ?2, ?3, ?4)

-- name: sweep_rate
DELETE FROM coord_rate WHERE key IN (SELECT key FROM coord_rate WHERE until <= ?1 LIMIT ?2)

-- name: sweep_rate_res
DELETE FROM coord_rate_res WHERE (key, id) IN (SELECT key, id FROM coord_rate_res WHERE until <= ?1 LIMIT ?2)

-- name: sweep_window
DELETE FROM coord_window WHERE (key, id) IN (SELECT key, id FROM coord_window WHERE until <= ?1 LIMIT ?2)

-- Events (issue 34) -------------------------------------------------------

-- name: evwait_get
SELECT state, event FROM coord_evwait WHERE pair = ?1 AND timer = ?2

-- name: evwait_insert
INSERT INTO coord_evwait (pair, timer, since, due, state, event) VALUES (?1, ?2, ?3, ?4, ?5, ?6)

-- name: event_first_since
SELECT event FROM coord_event WHERE pair = ?1 AND at >= ?2 AND keep > ?3 ORDER BY at, id LIMIT 1

-- name: event_matched
SELECT matched FROM coord_event WHERE pair = ?1 AND id = ?2

-- name: event_insert
INSERT INTO coord_event (pair, id, at, keep, event, matched) VALUES (?1, ?2, ?3, ?4, ?5, ?6)

-- name: evwait_match
UPDATE coord_evwait SET state = 1, event = ?3 WHERE pair = ?1 AND state = 0 AND since <= ?2 RETURNING timer

-- name: evwait_timeout
UPDATE coord_evwait SET state = 2 WHERE pair = ?1 AND timer = ?2 AND state = 0

-- name: evwait_forget
DELETE FROM coord_evwait WHERE pair = ?1 AND timer = ?2

-- name: sweep_events
DELETE FROM coord_event WHERE (pair, id) IN (SELECT pair, id FROM coord_event WHERE keep <= ?1 LIMIT ?2)

-- name: sweep_evwaits
DELETE FROM coord_evwait WHERE (pair, timer) IN (SELECT pair, timer FROM coord_evwait WHERE due <= ?1 LIMIT ?2)

-- Pauses (issue 34) ---------------------------------------------------------

-- name: paused_set
INSERT INTO coord_paused (exec) VALUES (?1) ON CONFLICT DO NOTHING

-- name: paused_clear
DELETE FROM coord_paused WHERE exec = ?1

-- name: r_paused
SELECT count(*) FROM coord_paused WHERE exec = ?1

-- Digests (issue 36) -------------------------------------------------------

-- name: digest_member
SELECT m.opener, d.exec, d.closes FROM coord_digest_member m
JOIN coord_digest d ON d.key = m.key AND d.opener = m.opener
WHERE m.key = ?1 AND m.member = ?2

-- name: digest_open
SELECT opener, exec, closes, n FROM coord_digest WHERE key = ?1 AND open = 1

-- name: digest_close
UPDATE coord_digest SET open = 0 WHERE key = ?1 AND opener = ?2

-- name: digest_insert
INSERT INTO coord_digest (key, opener, exec, closes, open, n, until) VALUES (?1, ?2, ?3, ?4, 1, 1, ?5)
ON CONFLICT (key, opener) DO UPDATE SET exec = ?3, closes = ?4, open = 1, n = 1, until = ?5

-- name: digest_bump
UPDATE coord_digest SET n = n + 1 WHERE key = ?1 AND opener = ?2

-- name: digest_val_add
INSERT OR REPLACE INTO coord_digest_val (key, opener, seq, value) VALUES (?1, ?2, ?3, ?4)

-- name: digest_member_add
INSERT OR REPLACE INTO coord_digest_member (key, member, opener, until) VALUES (?1, ?2, ?3, ?4)

-- name: digest_vals
SELECT value FROM coord_digest_val WHERE key = ?1 AND opener = ?2 ORDER BY seq

-- name: digest_forget
DELETE FROM coord_digest_val WHERE key = ?1 AND opener = ?2

-- The values of up to ?2 expired digests that have some (fewer than ?2
-- rows deleted: none is left).
-- name: sweep_digest_vals
DELETE FROM coord_digest_val WHERE (key, opener) IN (SELECT key, opener FROM coord_digest d WHERE until <= ?1
  AND EXISTS (SELECT 1 FROM coord_digest_val v WHERE v.key = d.key AND v.opener = d.opener) LIMIT ?2)

-- name: sweep_digests
DELETE FROM coord_digest WHERE (key, opener) IN (SELECT key, opener FROM coord_digest WHERE until <= ?1 LIMIT ?2)

-- name: sweep_digest_members
DELETE FROM coord_digest_member WHERE (key, member) IN (SELECT key, member FROM coord_digest_member WHERE until <= ?1 LIMIT ?2)
