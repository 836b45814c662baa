-- park.lua: record that a message waits in the timer store until its Finish,
-- and keep the execution's keys until the timer's due time plus the TTL.
-- KEYS[1] meta hash, KEYS[2] done hash, KEYS[3] ctx hash, KEYS[4] parked
-- set, KEYS[5] closed hash, KEYS[6] blobs hash (see finish.lua)
-- ARGV[1] message id, ARGV[2] TTL ms, ARGV[3] ms until the timer is due
-- Returns 1 when the execution is unknown, ended or halted (nothing
-- recorded: the caller wakes the timer), else 0.
local m = redis.call('HMGET', KEYS[1], 'live', 'halt', 'hold')
if not m[1] or m[2] or tonumber(m[1]) <= 0 then
  return 1
end
redis.call('SADD', KEYS[4], ARGV[1])
local ttl = keep(KEYS[1], m[3], ARGV[3], ARGV[2])
for i = 1, #KEYS do
  redis.call('PEXPIRE', KEYS[i], ttl)
end
return 0
