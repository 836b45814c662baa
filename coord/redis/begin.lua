-- begin.lua: decide whether a delivered message runs, replays or drops.
-- KEYS[1] meta hash, KEYS[2] done hash (message id -> Record)
-- ARGV[1] message id
-- Returns {0} run, {1, record} replay, {2} drop.
local rec = redis.call('HGET', KEYS[2], ARGV[1])
if rec then
  return {1, rec}
end
local m = redis.call('HMGET', KEYS[1], 'live', 'halt')
-- Unknown or expired, halted, or ended: drop.
if not m[1] or m[2] or tonumber(m[1]) <= 0 then
  return {2}
end
return {0}
