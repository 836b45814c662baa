-- stats.lua: count waiting and claimed timers, and the earliest due time.
-- KEYS[1] schedule zset (waiting timers of earlier versions), KEYS[2]
-- claimed zset, KEYS[3] due index zset, KEYS[4] waiting count
-- Returns {waiting, claimed, earliest due ms or -1 when none}.
local next = -1
for _, k in ipairs({KEYS[1], KEYS[3]}) do
  local first = redis.call('ZRANGE', k, 0, 0, 'WITHSCORES')
  if #first == 2 and (next == -1 or tonumber(first[2]) < next) then
    next = tonumber(first[2])
  end
end
local waiting = redis.call('ZCARD', KEYS[1]) + tonumber(redis.call('GET', KEYS[4]) or 0)
return {waiting, redis.call('ZCARD', KEYS[2]), next}
