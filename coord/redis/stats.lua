-- stats.lua: count waiting and claimed timers, and the earliest due time.
-- KEYS[1] schedule zset (id -> due ms), KEYS[2] claimed zset
-- Returns {scheduled, claimed, earliest due ms or -1 when none}.
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local next = -1
if #first == 2 then
  next = tonumber(first[2])
end
return {redis.call('ZCARD', KEYS[1]), redis.call('ZCARD', KEYS[2]), next}
