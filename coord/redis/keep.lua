-- keep.lua: how long a live execution's keys are kept. Go prepends it to
-- finish.lua and park.lua.
--
-- An execution's keys live TTL after its last activity, and at least TTL
-- after the latest time anything of it is held back until: a parked timer's
-- due time (Park), a delayed successor or a barrier's deadline
-- (Finish.Hold). That time is the meta hash's hold field, Unix ms on Redis's
-- clock; it only grows. Its TTL lasting past it, a wait longer than the TTL
-- still finds its execution when it resumes.

-- keep raises hold (meta's hold field, as read, or false) to now + ahead ms
-- when that is later (ahead: "0" or less when nothing new is held back),
-- and returns the TTL in ms the execution's keys take: ttl, or the time
-- left until hold plus ttl when that is longer.
local function keep(meta, hold, ahead, ttl)
  ttl, hold, ahead = tonumber(ttl), tonumber(hold), tonumber(ahead)
  if not hold and ahead <= 0 then
    return ttl -- the common case: no TIME call
  end
  local t = redis.call('TIME')
  local now = t[1] * 1000 + math.floor(t[2] / 1000)
  if ahead > 0 and (not hold or now + ahead > hold) then
    hold = now + ahead
    redis.call('HSET', meta, 'hold', hold)
  end
  if hold > now then
    return hold - now + ttl
  end
  return ttl
end

