-- bucket.lua: the records of a bucket of waiting timers. Go prepends it to
-- every script that reads or writes buckets (see Timers in timers.go).
--
-- A bucket is one string of records, in no order:
--   id length   1 byte, or 255 and then 2 bytes (big-endian) for longer ids
--   id
--   due         Unix ms, 6 bytes big-endian
--   length      of the payload, 2 bytes big-endian; 65535 (BIG): the payload
--               is in the payloads hash instead, and nothing follows
--   payload
-- The due index (a sorted set) holds each non-empty bucket's earliest due.

local BIG = 65535

-- read decodes the record at p of page: the position and length of its id,
-- its due, the position and length of its inline payload (plen == BIG: not
-- inline), and the position after the record.
local function read(page, p)
  local l = string.byte(page, p)
  p = p + 1
  if l == 255 then
    l, p = struct.unpack('>I2', page, p)
  end
  local due, plen, at = struct.unpack('>I6I2', page, p + l)
  local after = at
  if plen ~= BIG then
    after = at + plen
  end
  return p, l, due, at, plen, after
end

-- parse returns the records of page: {id, due, from, to, due_at, payload_at,
-- plen} with from..to the record's bytes and due_at its due's first byte.
local function parse(page)
  local recs, p, n = {}, 1, #page
  while p <= n do
    local id_at, l, due, at, plen, after = read(page, p)
    recs[#recs + 1] = {id = string.sub(page, id_at, id_at + l - 1), due = due, from = p, to = after - 1,
      due_at = id_at + l, payload_at = at, plen = plen}
    p = after
  end
  return recs
end

-- find returns the records of page and the index of id's record among
-- them, or nil and nil when page holds no record of id. A plain search
-- skips the parse when the id's bytes are nowhere in page (the usual case
-- when scheduling).
local function find(page, id)
  if not string.find(page, id, 1, true) then
    return nil, nil
  end
  local recs = parse(page)
  for i, r in ipairs(recs) do
    if r.id == id then
      return recs, i
    end
  end
  return nil, nil
end

-- record encodes a timer; payload false: kept in the payloads hash.
local function record(id, due, payload)
  local head
  if #id < 255 then
    head = string.char(#id)
  else
    head = string.char(255) .. struct.pack('>I2', #id)
  end
  if not payload then
    return head .. id .. struct.pack('>I6I2', due, BIG)
  end
  return head .. id .. struct.pack('>I6I2', due, #payload) .. payload
end

-- store sets bucket b of the buckets hash to page and its earliest due in
-- the index to first, or removes both when page is empty.
local function store(buckets, index, b, page, first)
  if page == '' then
    redis.call('HDEL', buckets, b)
    redis.call('ZREM', index, b)
  else
    redis.call('HSET', buckets, b, page)
    redis.call('ZADD', index, first, b)
  end
end

-- without returns page without the records from..to of cut (sorted by from).
local function without(page, cut)
  local parts, p = {}, 1
  for _, r in ipairs(cut) do
    parts[#parts + 1] = string.sub(page, p, r.from - 1)
    p = r.to + 1
  end
  parts[#parts + 1] = string.sub(page, p)
  return table.concat(parts)
end

-- remove stores bucket b without record i of recs (parsed from page).
local function remove(buckets, index, b, page, recs, i)
  local first
  for j, r in ipairs(recs) do
    if j ~= i and (first == nil or r.due < first) then
      first = r.due
    end
  end
  store(buckets, index, b, without(page, {recs[i]}), first)
end

-- uncount takes n timers off the waiting count, deleting it at 0 so an
-- empty store leaves no key.
local function uncount(count, n)
  if n > 0 and redis.call('DECRBY', count, n) <= 0 then
    redis.call('DEL', count)
  end
end

