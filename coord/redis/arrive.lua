-- arrive.lua: record one arrival at a barrier, once per slot.
-- KEYS[1] meta hash: st (open|done|cancelled), total, need, n (distinct
--         arrivals), win (completing slot), ttl (ms), and with shards sx
--         (ms time the value shards' TTL was last renewed)
-- KEYS[2] vals hash: slot -> value; with shards (ARGV[8] not empty) the
--         seen bitmap instead: bit slot set once slot is counted, its value
--         being in a shard key the caller wrote before (barval.lua)
-- KEYS[3] state string (Open's state)
-- KEYS[4] the execution's closed hash: barrier -> "done:<slot>" or
--         "cancelled", the marker a closed barrier leaves so that late
--         arrivals cannot open it anew. The Coordinator expires it with the
--         execution's own keys (10 minutes after the end).
-- ARGV[1] total, ARGV[2] need (used when the barrier does not exist yet),
-- ARGV[3] TTL ms, ARGV[4] slot, ARGV[5] value (empty when sharded: it is in its shard), ARGV[6] retain ms, ARGV[7]
-- the barrier's field in the closed hash, ARGV[8] with shards the shards'
-- TTL ms (twice the TTL), else "".
-- Returns {-1} cancelled, {-2, total} slot out of range, {-3, win} completed
-- by another slot (or its values are gone), {0, dup, n} pending, or
-- {1, dup, n, state or nil, total, {slot, value, ...}} complete. With
-- shards: {-3, win, counted} (counted 1 when slot's bit is set),
-- {0, dup, n, renew} (renew 1 when the caller must renew every shard's TTL
-- to ARGV[8], see pending), and complete ends with the seen bitmap instead
-- of the values.
local meta, vals, state = KEYS[1], KEYS[2], KEYS[3]
local ttl, slot = ARGV[3], ARGV[4]

local sharded = ARGV[8] ~= ''

local function complete(dup, n, total)
  local v
  if sharded then
    v = redis.call('GET', vals)
  else
    v = redis.call('HGETALL', vals)
  end
  return {1, dup, n, redis.call('GET', state), total, v}
end

-- pending refreshes the TTLs and answers a pending arrival. With shards it
-- asks the caller to renew every shard's TTL (twice the barrier's) on the
-- first pending arrival and then once a TTL has passed since the last
-- renewal: a shard is written only by its own slots, yet its TTL so
-- outlasts the meta's. (A caller that dies before renewing leaves the next
-- renewal a TTL away: only a barrier whose arrivals come more than a TTL
-- apart could then lose a shard, and its completion would say so.)
local function pending(dup, n)
  for i = 1, 3 do
    redis.call('PEXPIRE', KEYS[i], ttl)
  end
  if not sharded then
    return {0, dup, n}
  end
  local t = redis.call('TIME')
  local now = t[1] * 1000 + math.floor(t[2] / 1000)
  local sx = tonumber(redis.call('HGET', meta, 'sx'))
  if sx and now - sx <= tonumber(ttl) then
    return {0, dup, n, 0}
  end
  redis.call('HSET', meta, 'sx', now)
  return {0, dup, n, 1}
end

local function closedBy(win)
  if sharded then
    return {-3, win, redis.call('GETBIT', vals, slot)}
  end
  return {-3, win}
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
    return closedBy(string.sub(closed, 6))
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
  return closedBy(m[5])
end

local first
if sharded then
  first = redis.call('SETBIT', vals, slot, 1) == 0
else
  first = redis.call('HSETNX', vals, slot, ARGV[5]) == 1
end
if not first then
  return pending(1, tonumber(m[4]))
end
local n = redis.call('HINCRBY', meta, 'n', 1)
if n < need then
  return pending(0, n)
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
