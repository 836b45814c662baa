-- extend.lua: renew the leases of timers still held under their claim.
-- KEYS[1] claimed zset (id -> lease deadline ms), KEYS[2] leases hash (id ->
-- "due_ms:claims", see claim.lua)
-- ARGV[1] new lease deadline ms, then id, claims pairs.
-- Returns the ids no longer held: done, or claimed again (claims differ).
local lost = {}
for i = 2, #ARGV, 2 do
  local id, claims = ARGV[i], ARGV[i + 1]
  local l = redis.call('HGET', KEYS[2], id)
  local held = false
  if l and redis.call('ZSCORE', KEYS[1], id) then
    local sep = string.find(l, ':', 2, true)
    held = string.sub(l, sep + 1) == claims
  end
  if held then
    redis.call('ZADD', KEYS[1], ARGV[1], id)
  else
    lost[#lost + 1] = id
  end
end
return lost
