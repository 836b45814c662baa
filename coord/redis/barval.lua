-- barval.lua: write one slot's value into its barrier shard, before
-- arrive.lua counts the slot (Barriers with shards).
-- KEYS[1] the shard hash: slot -> value
-- ARGV[1] slot, ARGV[2] value, ARGV[3] the shards' TTL ms
-- Returns 1 when the value is new, 0 when the slot had one (kept).
local n = redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2])
-- A TTL only for a new key: a retained shard of a closed barrier keeps its
-- short one (what PEXPIRE NX does, on Redis 6.2 too).
if redis.call('PTTL', KEYS[1]) == -1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return n
