-- start.lua: record a new execution unless it exists (Start is idempotent).
-- KEYS[1] meta hash
-- ARGV[1] n first messages, ARGV[2] TTL in ms
-- Returns 1 when it created the execution, 0 when it existed.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('HSET', KEYS[1], 'live', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
