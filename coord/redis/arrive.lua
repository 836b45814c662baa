-- arrive.lua: record one arrival at a barrier, once per slot.
-- KEYS[1] meta hash: st (open|done|cancelled), total, need, n (distinct
--         arrivals), win (completing slot), ttl (ms)
-- KEYS[2] vals hash: slot -> value
-- KEYS[3] state string (Open's state)
-- KEYS[4] the execution's closed hash: barrier -> "done:<slot>" or
--         "cancelled", the marker a closed barrier leaves so that late
--         arrivals cannot open it anew. The Coordinator expires it with the
--         execution's own keys (10 minutes after the end).
-- ARGV[1] total, ARGV[2] need (used when the barrier does not exist yet),
-- ARGV[3] TTL ms, ARGV[4] slot, ARGV[5] value, ARGV[6] retain ms, ARGV[7]
-- the barrier's field in the closed hash.
-- Returns {-1} cancelled, {-2, total} slot out of range, {-3, win} completed
-- by another slot (or its values are gone), {0, dup, n} pending, or
-- {1, dup, n, state or nil, total, {slot, value, ...}} complete.
local meta, vals, state = KEYS[1], KEYS[2], KEYS[3]
local ttl, slot = ARGV[3], ARGV[4]

local function complete(dup, n, total)
  return {1, dup, n, redis.call('GET', state), total, redis.call('HGETALL', vals)}
end

local function refresh()
  for i = 1, 3 do
    redis.call('PEXPIRE', KEYS[i], ttl)
  end
end

local m = redis.call('HMGET', meta, 'st', 'total', 'need', 'n', 'win')
local st, total, need = m[1], tonumber(m[2]), tonumber(m[3])
-- (A meta in state cancelled is a marker of an earlier version.)
if st == 'cancelled' then
  return {-1}
end
if not st then
  local closed = redis.call('HGET', KEYS[4], ARGV[7])
  if closed == 'cancelled' then
    return {-1}
  elseif closed then
    return {-3, string.sub(closed, 6)}
  end
end
if not st then
  total, need = tonumber(ARGV[1]), tonumber(ARGV[2])
end
-- Against the barrier's own Total, not the caller's.
local s = tonumber(slot)
if s < 0 or s >= total then
  return {-2, total}
end
if not st then
  redis.call('HSET', meta, 'st', 'open', 'total', total, 'need', need, 'n', 0, 'ttl', ttl)
elseif st == 'done' then
  -- The completer's repeat, while the values are retained.
  if m[5] == slot and redis.call('EXISTS', vals) == 1 then
    return complete(1, tonumber(m[4]), total)
  end
  return {-3, m[5]}
end

if redis.call('HSETNX', vals, slot, ARGV[5]) == 0 then
  refresh()
  return {0, 1, tonumber(m[4])}
end
local n = redis.call('HINCRBY', meta, 'n', 1)
if n < need then
  refresh()
  return {0, 0, n}
end

redis.call('HSET', meta, 'st', 'done', 'win', slot)
-- Meta, values and state only for the completer's repeat; then the closed
-- marker remains, which lives at least the barrier's TTL.
local retain = ARGV[6]
for i = 1, 3 do
  redis.call('PEXPIRE', KEYS[i], retain)
end
redis.call('HSET', KEYS[4], ARGV[7], 'done:' .. slot)
if redis.call('PTTL', KEYS[4]) < tonumber(ttl) then
  redis.call('PEXPIRE', KEYS[4], ttl)
end
return complete(0, n, total)
