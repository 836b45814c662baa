-- barvals.lua: read one barrier shard's values for the completing arrival
-- (Barriers with shards), and shorten its TTL to the retain time.
-- KEYS[1] the shard hash: slot -> value
-- ARGV[1] retain ms
-- Returns {slot, value, ...}.
local t = redis.call('PTTL', KEYS[1])
-- Only ever shorter (what PEXPIRE LT does, on Redis 6.2 too): a repeat of
-- the completer must not extend it.
if t == -1 or t > tonumber(ARGV[1]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return redis.call('HGETALL', KEYS[1])
