-- Limiter.Reserve: the GCRA as a scheduler. KEYS[1]: the key's theoretical
-- arrival time (µs); KEYS[2]: id's reservation (its start, µs).
-- ARGV[1]: now (µs); ARGV[2]: the interval (µs); ARGV[3]: the burst
-- tolerance (µs); ARGV[4]: how long ids are kept past their slot (ms).
-- Returns the start (µs), as a string.
local r = redis.call('GET', KEYS[2])
if r then
  return r
end
local now = tonumber(ARGV[1])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then
  tat = now
end
local start = tat - tonumber(ARGV[3])
if start < now then
  start = now
end
local ntat = tat + tonumber(ARGV[2])
local keep = tonumber(ARGV[4])
redis.call('SET', KEYS[1], string.format('%.0f', ntat), 'PX', math.floor((ntat - now) / 1000) + keep)
local s = string.format('%.0f', start)
redis.call('SET', KEYS[2], s, 'PX', math.floor((start - now) / 1000) + keep)
return s
