-- The tickwheel library (library.ts): the partition owner's side of scheduled messages:
-- reading segments, raising the loaded horizon, and firing what is due.

-- A record starts idLength u8 | id | bucket u16 | maxAttempts u16 (little-endian), or is a
-- located one (idLength 0, located_head); the rest only nodes read. -> id, bucket, maxAttempts
-- (id and bucket nil for a located record).
local function record_head(record)
  local n = string.byte(record, 1)
  if n == 0 then
    local _, _, maxAttempts = located_head(record)
    return nil, nil, maxAttempts
  end
  local id = string.sub(record, 2, 1 + n)
  local b1, b2, m1, m2 = string.byte(record, 2 + n, 5 + n)
  return id, b1 + 256 * b2, m1 + 256 * m2
end

-- Records of a segment from an index on, with the state of those that are still their id's
-- current record: {scanned, {index, status, deliverAt, attempts, record, id}...}. A located
-- record whose tombstone bit is clear is scheduled there.
local function read(keys, args)
  local prefix = prefix_of(keys[1])
  local seg, from, n = args[1], tonumber(args[2]), tonumber(args[3])
  local records = redis.call('LRANGE', prefix .. 's:' .. seg, from, from + n - 1)
  local live = {}
  -- The tombstone bits of these records, read once and only if a located record is among them.
  local tombs, tombsFrom = nil, nil
  for i, record in ipairs(records) do
    local index = from + i - 1
    local id, bucket = record_head(record)
    if id then
      local text = redis.call('HGET', prefix .. 'id:' .. bucket, id)
      if text then
        local st = read_state(text)
        if st.seg == seg and st.index == index then
          live[#live + 1] = {index, st.status, st.due, st.attempts, record, id}
        end
      end
    else
      if tombsFrom == nil then
        tombsFrom = math.floor(from / 8)
        tombs = redis.call('GETRANGE', prefix .. 't:' .. seg, tombsFrom,
          math.floor((from + #records - 1) / 8))
      end
      if not bit_set(tombs, index - 8 * tombsFrom) then
        local tag, due = located_head(record)
        live[#live + 1] = {index, 'S', due, 0, record, located_id(prefix, seg, index, tag)}
      end
    end
  end
  return {#records, live}
end

-- Owner only. Raises loadedUntil (never lowers it): from now on, schedules due before it go to
-- the near segment, so the windows below it are frozen for the owner to read. With rotate, a
-- new near segment starts; the old one goes at once if nothing points into it.
-- -> {1, loadedUntil, near, oseq} or {-1}.
local function load(keys, args)
  local meta = keys[1]
  if not holds(meta, args[1], tonumber(args[2])) then return {-1} end
  local prefix = prefix_of(meta)
  local m = redis.call('HMGET', meta, 'loadedUntil', 'near')
  local loadedUntil = math.max(tonumber(m[1] or '0') or 0, tonumber(args[3]))
  local near = tonumber(m[2] or '0') or 0
  if args[4] == '1' then
    local old = 'n' .. string.format('%d', near)
    near = near + 1
    if (tonumber(redis.call('HGET', prefix .. 'live', old) or '0') or 0) <= 0 then
      redis.call('HDEL', prefix .. 'live', old)
      redis.call('DEL', prefix .. 's:' .. old, prefix .. 't:' .. old)
    end
  end
  redis.call('HSET', meta, 'loadedUntil', string.format('%d', loadedUntil),
    'near', string.format('%d', near))
  return {1, string.format('%d', loadedUntil), near, owner_write(meta)}
end

-- Owner only. Scheduled -> ready for each (id, bucket, segment, index) still at that location;
-- a message due more than skewMs after the server's time is left scheduled and named in the
-- reply, so that an owner whose clock runs ahead cannot deliver it early.
-- -> {fired, {early ids}, oseq} or {-1} when the caller does not hold the partition.
local function fire(keys, args)
  local meta = keys[1]
  if not holds(meta, args[1], tonumber(args[2])) then return {-1} end
  local prefix = prefix_of(meta)
  local latest = now_ms() + tonumber(args[3])
  local n = tonumber(args[4])
  local fired, early, topics = 0, {}, {}
  for i = 0, n - 1 do
    local at = 5 + 4 * i
    local id, bucket, seg, index = args[at], args[at + 1], args[at + 2], tonumber(args[at + 3])
    local st, ids = state_of(prefix, id, bucket)
    if st then
      if st.status == 'S' and st.seg == seg and st.index == index then
        if tonumber(st.due) > latest then
          early[#early + 1] = id
        else
          leave_birth(prefix, st)
          st.status = 'R'
          redis.call('HSET', ids, id, write_state(st))
          redis.call('RPUSH', prefix .. 'ready:' .. st.topic, bucket .. ':' .. id)
          count(prefix, st.topic, 'S', -1)
          count(prefix, st.topic, 'R', 1)
          topics[st.topic] = true
          fired = fired + 1
        end
      end
    end
  end
  for topic in pairs(topics) do redis.call('SPUBLISH', prefix .. 'ev', 'r ' .. topic) end
  return {fired, early, owner_write(meta)}
end

redis.register_function{function_name = 'tw_read', callback = read, flags = {'no-writes'}}
redis.register_function{function_name = 'tw_load', callback = load}
redis.register_function{function_name = 'tw_fire', callback = fire}
