-- published.lua: record that an ended execution's completion is out.
-- KEYS[1] meta hash (see finish.lua)
-- Returns 1 when recorded, 0 when the execution is unknown, expired or live.
if redis.call('HEXISTS', KEYS[1], 'last') == 0 then
  return 0
end
redis.call('HSET', KEYS[1], 'published', 1)
return 1
