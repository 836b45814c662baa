-- Events.Register. KEYS: [1] waits hash (timer -> "since:due"), [2] matches
-- hash (timer -> event JSON, "" when taken without one), [3] events zset
-- (id -> at ms), [4] events hash (id -> "keep:JSON").
-- ARGV: [1] timer, [2] since ms, [3] due ms, [4] now ms, [5] the wait's
-- keys' expiry (due + grace), ms.
-- Returns {0} registered, {1, JSON} matched (now or before), {2} taken.
local timer, since, now = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[4])
local m = redis.call('HGET', KEYS[2], timer)
if m then
  if m == '' then return {2} end
  return {1, m}
end
if redis.call('HEXISTS', KEYS[1], timer) == 1 then return {0} end
local ids = redis.call('ZRANGEBYSCORE', KEYS[3], since, '+inf')
for _, id in ipairs(ids) do
  local v = redis.call('HGET', KEYS[4], id)
  if v then
    local keep, ev = split_event(v)
    if keep > now then
      redis.call('HSET', KEYS[2], timer, ev)
      keep_until(KEYS[2], tonumber(ARGV[5]))
      return {1, ev}
    end
  end
end
redis.call('HSET', KEYS[1], timer, ARGV[2] .. ':' .. ARGV[3])
keep_until(KEYS[1], tonumber(ARGV[5]))
return {0}
