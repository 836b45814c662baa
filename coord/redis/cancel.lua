-- cancel.lua: close an open barrier for good.
-- KEYS[1] meta hash, KEYS[2] vals hash, KEYS[3] state string, KEYS[4] the
-- execution's closed hash (see arrive.lua)
-- ARGV[1] TTL ms of the closed marker when the barrier does not exist,
-- ARGV[2] the barrier's field in the closed hash.
-- Returns 1 when the barrier was open (or did not exist), else 0.
local m = redis.call('HMGET', KEYS[1], 'st', 'ttl')
if (m[1] and m[1] ~= 'open') or (not m[1] and redis.call('HEXISTS', KEYS[4], ARGV[2]) == 1) then
  return 0
end
-- UNLINK: a 100,000-slot vals hash takes ~30 ms to free in line.
redis.call('UNLINK', KEYS[1], KEYS[2], KEYS[3])
-- The closed marker, so late arrivals cannot open it anew; it lives at
-- least the barrier's TTL, and goes with the execution's other keys.
redis.call('HSET', KEYS[4], ARGV[2], 'cancelled')
local ttl = tonumber(m[2] or ARGV[1])
if redis.call('PTTL', KEYS[4]) < ttl then
  redis.call('PEXPIRE', KEYS[4], ttl)
end
return 1
