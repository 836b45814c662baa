-- Events.Deliver. KEYS: [1] waits hash, [2] matches hash, [3] events zset,
-- [4] events hash, [5] matched hash (id -> the timers its delivery
-- matched, "\n"-separated).
-- ARGV: [1] id, [2] at ms, [3] keep ms, [4] event JSON, [5] the events'
-- keys' expiry, ms, [6] the matches' expiry (at least their waits'), ms.
-- Returns the timers matched (the first delivery's, for a repeated id).
local id, at, keep = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local prev = redis.call('HGET', KEYS[5], id)
if prev then
  local out = {}
  for t in string.gmatch(prev, '[^\n]+') do out[#out + 1] = t end
  return out
end
-- Drop the oldest events past their keep (at most 100 a call).
local old = redis.call('ZRANGE', KEYS[3], 0, 99)
for _, oid in ipairs(old) do
  local v = redis.call('HGET', KEYS[4], oid)
  local k = v and split_event(v) or 0
  if k > at then break end
  redis.call('ZREM', KEYS[3], oid)
  redis.call('HDEL', KEYS[4], oid)
  redis.call('HDEL', KEYS[5], oid)
end
local matched = {}
local waits = redis.call('HGETALL', KEYS[1])
for i = 1, #waits, 2 do
  local timer, v = waits[i], waits[i + 1]
  local since = tonumber(string.sub(v, 1, string.find(v, ':', 1, true) - 1))
  if since <= at then
    redis.call('HSET', KEYS[2], timer, ARGV[4])
    redis.call('HDEL', KEYS[1], timer)
    matched[#matched + 1] = timer
  end
end
redis.call('ZADD', KEYS[3], at, id)
redis.call('HSET', KEYS[4], id, ARGV[3] .. ':' .. ARGV[4])
redis.call('HSET', KEYS[5], id, table.concat(matched, '\n'))
for i = 3, 5 do keep_until(KEYS[i], tonumber(ARGV[5])) end
if #matched > 0 then keep_until(KEYS[2], tonumber(ARGV[6])) end
return matched
