-- arrive.lua: record one arrival at a barrier, once per slot.
-- KEYS[1] meta hash: st (open|done|cancelled), total, need, n (distinct
--         arrivals), win (completing slot), ttl (ms)
-- KEYS[2] vals hash: slot -> value
-- KEYS[3] state string (Open's state)
-- ARGV[1] total, ARGV[2] need (used when the barrier does not exist yet),
-- ARGV[3] TTL ms, ARGV[4] slot, ARGV[5] value, ARGV[6] retain ms.
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
-- First: the marker Cancel leaves for an unknown barrier has no total.
if st == 'cancelled' then
  return {-1}
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
-- The values (and state) only for the completer's repeat; the small meta as
-- a closed marker so late arrivals cannot open the barrier anew.
local retain = ARGV[6]
redis.call('PEXPIRE', vals, retain)
redis.call('PEXPIRE', state, retain)
redis.call('PEXPIRE', meta, math.max(tonumber(ttl), tonumber(retain)))
return complete(0, n, total)
