-- put.lua: store a blob once and keep its hash at least the TTL.
-- KEYS[1] blobs hash: ref -> data
-- ARGV[1] ref, ARGV[2] data, ARGV[3] TTL ms
-- Only ever longer (what PEXPIRE GT does on Redis 7, on 6.2 too): the
-- Coordinator keeps an execution's blobs as long as its other keys, past
-- the due time of a parked timer (keep.lua), and a Put must not shorten it.
redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return 0
