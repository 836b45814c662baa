-- wake.lua: make waiting timers due at now unless they are due earlier;
-- claimed and unknown ids are left alone.
-- KEYS[1] schedule zset (waiting timers of earlier versions), KEYS[2]
-- buckets hash, KEYS[3] due index zset
-- ARGV[1] now ms, then pairs of id and its bucket
local schedule, buckets, index = KEYS[1], KEYS[2], KEYS[3]
local now = tonumber(ARGV[1])
for i = 2, #ARGV, 2 do
  local id, b = ARGV[i], ARGV[i + 1]
  redis.call('ZADD', schedule, 'XX', 'LT', ARGV[1], id)
  local page = redis.call('HGET', buckets, b)
  if page then
    local recs, j = find(page, id)
    if j and recs[j].due > now then
      local at = recs[j].due_at
      redis.call('HSET', buckets, b, string.sub(page, 1, at - 1) .. struct.pack('>I6', now) .. string.sub(page, at + 6))
      redis.call('ZADD', index, 'LT', now, b)
    end
  end
end
return 0
