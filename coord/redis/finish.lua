-- finish.lua: account for one finished message, once per id.
-- KEYS[1] meta hash: live (count), halt (Failure JSON), last (completer id), status,
--         published (set by published.lua once the completion is out)
-- KEYS[2] done hash: message id -> Record
-- KEYS[3] ctx hash: final-context key -> JSON value
-- KEYS[4] parked set: ids waiting in the timer store (park.lua)
-- KEYS[5] closed hash: closed barriers' markers (arrive.lua), expired here
--         with the rest
-- KEYS[6] blobs hash: the execution's large values (Blobs), expired here
--         with the rest (Blobs deletes it once the completion is out)
-- ARGV[1] id, ARGV[2] spawned, ARGV[3] record, ARGV[4] halt JSON or "",
-- ARGV[5] TTL ms, ARGV[6] retain ms, ARGV[7] "1" when optimistic (no Begin
-- before), ARGV[8] "1" when only the execution's last message is to be
-- recorded (IfLast), ARGV[9] ms until the hold (Finish.Hold; "0": none, see
-- keep.lua), then ARGV[10..] End key, JSON value pairs.
-- Returns {-1} unknown execution, {-2} ended and id is new; when optimistic
-- {2, record} finished before (replay it), {3} halted (drop it); with IfLast
-- {4} when id would not end the execution (nothing recorded); else
-- {duplicate, last, published, status, failure JSON or "", ctx key, value, ...}
-- where status and the rest are present only when last is 1.
local meta, done, ctx = KEYS[1], KEYS[2], KEYS[3]
local id = ARGV[1]

local function ending(dup, published)
  local m = redis.call('HMGET', meta, 'status', 'halt')
  local reply = {dup, 1, published, m[1], m[2] or ''}
  local kv = redis.call('HGETALL', ctx)
  for i = 1, #kv do
    reply[#reply + 1] = kv[i]
  end
  return reply
end

local m = redis.call('HMGET', meta, 'live', 'last', 'published', 'hold')
if not m[1] then
  return {-1}
end
local optimistic = ARGV[7] == '1'
if optimistic then
  local rec = redis.call('HGET', done, id)
  if rec then
    return {2, rec}
  end
elseif redis.call('HEXISTS', done, id) == 1 then
  local published = 0
  if m[3] then
    published = 1
  end
  if m[2] == id then
    return ending(1, published)
  end
  return {1, 0, published}
end
if tonumber(m[1]) <= 0 then
  return {-2}
end
if optimistic and redis.call('HEXISTS', meta, 'halt') == 1 then
  return {3}
end
if ARGV[8] == '1' and tonumber(m[1]) + tonumber(ARGV[2]) - 1 > 0 then
  return {4}
end

redis.call('HSET', done, id, ARGV[3])
redis.call('SREM', KEYS[4], id)
if ARGV[4] ~= '' then
  redis.call('HSETNX', meta, 'halt', ARGV[4])
end
-- One HSET per key: unpack would hit Lua's stack limit on a large End.
for i = 10, #ARGV, 2 do
  redis.call('HSET', ctx, ARGV[i], ARGV[i + 1])
end
local live = redis.call('HINCRBY', meta, 'live', tonumber(ARGV[2]) - 1)
if live > 0 then
  -- Refreshed on every Finish, never to less than what a parked timer, a
  -- delayed successor or an open barrier needs (keep.lua).
  local ttl = keep(meta, m[4], ARGV[9], ARGV[5])
  for i = 1, #KEYS do
    redis.call('PEXPIRE', KEYS[i], ttl)
  end
  return {0, 0, 0}
end

local status = 'completed'
if redis.call('HEXISTS', meta, 'halt') == 1 then
  status = 'halted'
end
redis.call('HSET', meta, 'last', id, 'status', status)
-- Kept for Retain so redeliveries replay and the completer's duplicate
-- Finish gets the Outcome again.
for i = 1, #KEYS do
  redis.call('PEXPIRE', KEYS[i], ARGV[6])
end
return ending(0, 0)
