-- Effects.Begin. KEYS[1]: the effect's hash (i: intents, r: result).
-- ARGV[1]: retention in milliseconds.
-- Returns {1, result} when recorded, else {0, intents}.
local r = redis.call('HGET', KEYS[1], 'r')
redis.call('PEXPIRE', KEYS[1], ARGV[1])
if r then
  return {1, r}
end
local n = redis.call('HINCRBY', KEYS[1], 'i', 1)
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return {0, n}
