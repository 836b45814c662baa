-- Events.Take. KEYS: [1] waits hash, [2] matches hash.
-- ARGV: [1] timer, [2] the matches' expiry (due + grace), ms.
-- Returns the event JSON, "" when the wait had none (it is closed now), or
-- false for an unknown wait.
local timer = ARGV[1]
local m = redis.call('HGET', KEYS[2], timer)
if m then return m end
if redis.call('HDEL', KEYS[1], timer) == 1 then
  redis.call('HSET', KEYS[2], timer, '')
  keep_until(KEYS[2], tonumber(ARGV[2]))
  return ''
end
return false
