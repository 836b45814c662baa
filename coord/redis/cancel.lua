-- cancel.lua: close an open barrier for good.
-- KEYS[1] meta hash, KEYS[2] vals hash, KEYS[3] state string (see arrive.lua)
-- ARGV[1] TTL ms of the closed marker when the barrier does not exist.
-- Returns 1 when the barrier was open (or did not exist), else 0.
local m = redis.call('HMGET', KEYS[1], 'st', 'ttl')
if m[1] and m[1] ~= 'open' then
  return 0
end
redis.call('HSET', KEYS[1], 'st', 'cancelled')
-- UNLINK: a 100,000-slot vals hash takes ~30 ms to free in line.
redis.call('UNLINK', KEYS[2], KEYS[3])
-- Kept as a closed marker, so late arrivals cannot open it anew.
redis.call('PEXPIRE', KEYS[1], m[2] or ARGV[1])
return 1
