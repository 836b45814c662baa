-- Limiter.Admit: a sliding window log. KEYS[1]: the window, a sorted set of
-- ids by the time they were admitted (µs).
-- ARGV[1]: now (µs); ARGV[2]: the window (µs); ARGV[3]: the limit;
-- ARGV[4]: the id.
-- Returns {1, 0} when admitted, else {0, when the window has room (µs)}.
local now, per, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', now - per))
if redis.call('ZSCORE', KEYS[1], ARGV[4]) then
  return {1, '0'}
end
local n = redis.call('ZCARD', KEYS[1])
if n >= limit then
  local e = redis.call('ZRANGE', KEYS[1], n - limit, n - limit, 'WITHSCORES')
  return {0, string.format('%.0f', tonumber(e[2]) + per)}
end
redis.call('ZADD', KEYS[1], string.format('%.0f', now), ARGV[4])
redis.call('PEXPIRE', KEYS[1], math.floor(per / 1000) + 1000)
return {1, '0'}
