-- schedule.lua: store a timer unless its id is already waiting or claimed.
-- KEYS[1] payloads hash, KEYS[2] buckets hash, KEYS[3] due index zset,
-- KEYS[4] waiting count
-- ARGV[1] id, ARGV[2] due ms, ARGV[3] payload, ARGV[4] bucket, ARGV[5] the
-- longest payload kept inline
-- Returns 1 when it stored the timer, 0 when the id existed.
local payloads, buckets, index, count = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local id, due, payload, b = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
-- Claimed timers, waiting timers of earlier versions and waiting timers
-- with a large payload have a payloads entry; the rest are in their bucket.
if redis.call('HEXISTS', payloads, id) == 1 then
  return 0
end
local page = redis.call('HGET', buckets, b) or ''
if find(page, id) then
  return 0
end
if #payload > tonumber(ARGV[5]) then
  redis.call('HSET', payloads, id, payload)
  payload = false
end
redis.call('HSET', buckets, b, page .. record(id, due, payload))
redis.call('ZADD', index, 'LT', due, b)
redis.call('INCR', count)
return 1
