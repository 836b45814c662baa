-- ev_common.lua: helpers of the event scripts (prepended to each).
-- keep_until sets key's expiry to at least t (Unix ms): a key without
-- one gets t, and GT never shortens a longer one.
local function keep_until(key, t)
  if redis.call('EXISTS', key) == 0 then return end
  if redis.call('PTTL', key) == -1 then
    redis.call('PEXPIREAT', key, t)
  else
    redis.call('PEXPIREAT', key, t, 'GT')
  end
end
-- A retained event is stored as "<keep ms>:<event JSON>".
local function split_event(v)
  local i = string.find(v, ':', 1, true)
  return tonumber(string.sub(v, 1, i - 1)), string.sub(v, i + 1)
end
