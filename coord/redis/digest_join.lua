-- Digests.Join. KEYS: [1] the key's open digest (hash o: opener, e: its
-- execution, c: closes ms), [2] the member's answer, [3] the values list
-- of the open digest the caller read (ARGV[8]; the member's own when none),
-- [4] the values list of the member's own digest, should it open one.
-- ARGV: [1] member, [2] its execution, [3] its value, [4] now ms, [5]
-- closes ms, [6] grace ms, [7] max values, [8] the opener the caller read
-- ("" none).
-- Returns the answer "<closes ms>:<len(opener)>:<opener><execution>", or
-- "retry" when the open digest is no longer the one the caller read.
local a = redis.call('GET', KEYS[2])
if a then return a end
local cur = redis.call('HMGET', KEYS[1], 'o', 'e', 'c')
local o = cur[1] or ''
if o ~= ARGV[8] then return 'retry' end
local grace = tonumber(ARGV[6])
if o ~= '' and tonumber(ARGV[4]) < tonumber(cur[3]) then
  if redis.call('LLEN', KEYS[3]) >= tonumber(ARGV[7]) then
    return redis.error_reply('DIGEST_FULL digest is full')
  end
  redis.call('RPUSH', KEYS[3], ARGV[3])
  a = cur[3] .. ':' .. #o .. ':' .. o .. cur[2]
  redis.call('SET', KEYS[2], a)
  redis.call('PEXPIREAT', KEYS[2], tonumber(cur[3]) + grace)
  return a
end
-- None open, or its window has passed: the member opens one.
local keep = tonumber(ARGV[5]) + grace
redis.call('HSET', KEYS[1], 'o', ARGV[1], 'e', ARGV[2], 'c', ARGV[5])
redis.call('PEXPIREAT', KEYS[1], keep)
redis.call('DEL', KEYS[4])
redis.call('RPUSH', KEYS[4], ARGV[3])
redis.call('PEXPIREAT', KEYS[4], keep)
a = ARGV[5] .. ':' .. #ARGV[1] .. ':' .. ARGV[1] .. ARGV[2]
redis.call('SET', KEYS[2], a)
redis.call('PEXPIREAT', KEYS[2], keep)
return a
