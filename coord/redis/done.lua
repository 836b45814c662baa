-- done.lua: remove a timer for good, wherever it is.
-- KEYS[1] schedule zset, KEYS[2] claimed zset, KEYS[3] payloads hash,
-- KEYS[4] leases hash
-- ARGV[1] id
-- Returns 1 when the timer existed, else 0.
local n = redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
return n
