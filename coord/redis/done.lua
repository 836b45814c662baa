-- done.lua: remove a timer for good, wherever it is.
-- KEYS[1] schedule zset, KEYS[2] claimed zset, KEYS[3] payloads hash,
-- KEYS[4] leases hash, KEYS[5] buckets hash, KEYS[6] due index zset,
-- KEYS[7] waiting count
-- ARGV[1] id, ARGV[2] its bucket
-- Returns 1 when the timer existed, else 0.
local id, b = ARGV[1], ARGV[2]
local n = redis.call('HDEL', KEYS[3], id)
redis.call('HDEL', KEYS[4], id)
-- A claimed timer (the scheduler's Done) or one of an earlier version is in
-- no bucket: only a waiting timer needs its bucket read.
if redis.call('ZREM', KEYS[2], id) + redis.call('ZREM', KEYS[1], id) > 0 then
  return 1
end
local page = redis.call('HGET', KEYS[5], b)
if page then
  local recs, i = find(page, id)
  if i then
    remove(KEYS[5], KEYS[6], b, page, recs, i)
    uncount(KEYS[7], 1)
    n = 1
  end
end
return n
