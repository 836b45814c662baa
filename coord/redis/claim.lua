-- claim.lua: lease up to max timers, due ones and those whose lease passed,
-- earliest due first.
-- KEYS[1] schedule zset (id -> due ms; waiting timers of earlier versions),
-- KEYS[2] claimed zset (id -> lease deadline ms), KEYS[3] payloads hash (id
-- -> payload), KEYS[4] leases hash (id -> "due_ms:claims", only for claimed
-- ids), KEYS[5] buckets hash, KEYS[6] due index zset, KEYS[7] waiting count
-- ARGV[1] now ms, ARGV[2] max, ARGV[3] new lease deadline ms, ARGV[4] "1"
-- to peek: claim nothing, return the first max candidates as {id, due ms,
-- claims, ...} (a sharded store merges the shards' peeks, see timers.go)
-- Returns {id, due ms, claims, payload, ...}.
local schedule, claimed, payloads, leases = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local buckets, index, count = KEYS[5], KEYS[6], KEYS[7]
local now, max, deadline = ARGV[1], tonumber(ARGV[2]), ARGV[3]

local cands = {}
local due = redis.call('ZRANGEBYSCORE', schedule, '-inf', now, 'WITHSCORES', 'LIMIT', 0, max)
for i = 1, #due, 2 do
  cands[#cands + 1] = {id = due[i], due = tonumber(due[i + 1]), claims = 0}
end
-- The max buckets with the earliest dues hold the max earliest due timers.
-- A bucket is scanned in place (parse would build a table per record, and
-- a bucket holds ~30 of which ~1 is due): a table only for due records.
local pages = {}
local nowMs = tonumber(now)
for _, b in ipairs(redis.call('ZRANGEBYSCORE', index, '-inf', now, 'LIMIT', 0, max)) do
  local page = redis.call('HGET', buckets, b)
  if page then
    local pg = {b = b, page = page, due = {}}
    pages[#pages + 1] = pg
    local p, n = 1, #page
    while p <= n do
      local id_at, l, d, at, plen, after = read(page, p)
      if d <= nowMs then
        local r = {id = string.sub(page, id_at, id_at + l - 1), due = d, from = p, to = after - 1,
          payload_at = at, plen = plen, claims = 0, pg = pg}
        pg.due[#pg.due + 1] = r
        cands[#cands + 1] = r
      elseif pg.rest == nil or d < pg.rest then
        pg.rest = d -- the earliest due of the records that stay
      end
      p = after
    end
  else
    redis.call('ZREM', index, b)
  end
end
-- Expired leases come by deadline, not due: take up to max and let the sort
-- below interleave them with the due ones.
local expired = redis.call('ZRANGEBYSCORE', claimed, '-inf', now, 'LIMIT', 0, max)
for _, id in ipairs(expired) do
  local l = redis.call('HGET', leases, id)
  local d, c = 0, 0
  if l then
    local sep = string.find(l, ':', 2, true)
    d, c = tonumber(string.sub(l, 1, sep - 1)), tonumber(string.sub(l, sep + 1))
  end
  cands[#cands + 1] = {id = id, due = d, claims = c}
end
table.sort(cands, function(a, b)
  if a.due ~= b.due then
    return a.due < b.due
  end
  return a.claims > b.claims or (a.claims == b.claims and a.id < b.id)
end)
if ARGV[4] == '1' then
  local peek = {}
  for i = 1, math.min(max, #cands) do
    peek[#peek + 1] = cands[i].id
    peek[#peek + 1] = cands[i].due
    peek[#peek + 1] = cands[i].claims
  end
  return peek
end

local reply = {}
-- Batched ZREM/ZADD keep round trips inside Redis few; chunks stay under
-- Lua's unpack limit.
local rem, add = {}, {}
local function flush()
  if #rem > 0 then
    redis.call('ZREM', schedule, unpack(rem))
    rem = {}
  end
  if #add > 0 then
    redis.call('ZADD', claimed, unpack(add))
    add = {}
  end
end
local taken = 0
for i = 1, math.min(max, #cands) do
  local t = cands[i]
  local payload
  if t.pg then
    -- From a bucket: a claimed timer keeps its payload in the payloads hash.
    t.taken = true
    taken = taken + 1
    if t.plen == BIG then
      payload = redis.call('HGET', payloads, t.id)
    else
      payload = string.sub(t.pg.page, t.payload_at, t.payload_at + t.plen - 1)
      redis.call('HSET', payloads, t.id, payload)
    end
  else
    payload = redis.call('HGET', payloads, t.id)
    if t.claims == 0 then
      rem[#rem + 1] = t.id
    end
  end
  if payload then
    local claims = t.claims + 1
    add[#add + 1] = deadline
    add[#add + 1] = t.id
    redis.call('HSET', leases, t.id, string.format('%d:%d', t.due, claims))
    reply[#reply + 1] = t.id
    reply[#reply + 1] = t.due
    reply[#reply + 1] = claims
    reply[#reply + 1] = payload
  else
    -- No payload: a torn timer (keys edited by hand). Forget it.
    redis.call('ZREM', claimed, t.id)
    redis.call('HDEL', leases, t.id)
  end
  if #rem >= 1000 or #add >= 2000 then
    flush()
  end
end
flush()
for _, pg in ipairs(pages) do
  local cut, first = {}, pg.rest
  for _, r in ipairs(pg.due) do
    if r.taken then
      cut[#cut + 1] = r
    elseif first == nil or r.due < first then
      first = r.due
    end
  end
  if #cut > 0 then
    store(buckets, index, pg.b, without(pg.page, cut), first)
  end
end
uncount(count, taken)
return reply
