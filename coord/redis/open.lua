-- open.lua: create a barrier unless it exists or was closed (Open is
-- idempotent).
-- KEYS[1] meta hash, KEYS[2] state string, KEYS[3] the execution's closed
-- hash (see arrive.lua)
-- ARGV[1] total, ARGV[2] need, ARGV[3] TTL ms, ARGV[4] '1' when there is a
-- state, ARGV[5] state, ARGV[6] the barrier's field in the closed hash.
-- Returns 1 when it created the barrier, 0 when it existed.
if redis.call('EXISTS', KEYS[1]) == 1 or redis.call('HEXISTS', KEYS[3], ARGV[6]) == 1 then
  return 0
end
redis.call('HSET', KEYS[1], 'st', 'open', 'total', ARGV[1], 'need', ARGV[2], 'n', 0, 'ttl', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
if ARGV[4] == '1' then
  redis.call('SET', KEYS[2], ARGV[5], 'PX', ARGV[3])
end
return 1
