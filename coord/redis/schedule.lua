-- schedule.lua: store a timer unless its id is already scheduled or claimed.
-- KEYS[1] schedule zset (id -> due ms), KEYS[2] payloads hash (id -> payload)
-- ARGV[1] id, ARGV[2] due ms, ARGV[3] payload
-- Returns 1 when it stored the timer, 0 when the id existed.
-- Every live timer, scheduled or claimed, has a payload: one HSETNX decides.
if redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[3]) == 0 then
  return 0
end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
return 1
