-- park.lua: record that a message waits in the timer store until its Finish.
-- KEYS[1] meta hash, KEYS[2] parked set
-- ARGV[1] message id, ARGV[2] TTL ms
-- Returns 1 when the execution is unknown, ended or halted (nothing
-- recorded: the caller wakes the timer), else 0.
local m = redis.call('HMGET', KEYS[1], 'live', 'halt')
if not m[1] or m[2] or tonumber(m[1]) <= 0 then
  return 1
end
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 0
