-- The tickwheel library (library.ts): a partition's message states and segments, the helpers
-- every message function uses.
--
-- Keys of a partition share the prefix 'tw:{q:p}:' (one slot); functions get the partition's
-- meta key and build the others from its prefix. A message is an immutable record (bytes the
-- node encodes: id, topic, payload, retry settings), appended to a segment, and a state in its
-- id bucket, a short string:
--
--   status | segment | index | deliverAt | attempts | topic
--
-- with status S (scheduled), R (ready), I (inflight) or D (dead); finished ones, A (acked) and
-- C (cancelled), are remembered a while in the partition's done hashes. A segment is a list,
-- named 'w<window number>' (the window's start / windowMs) or 'n<k>' (near segment k), and a
-- record is found by its index in it: records are only ever appended, so an index never
-- changes. A list, not a string: Valkey grows a string by doubling on APPEND, which cost a third
-- more memory per message than the records themselves; a list packs its elements into 8 KB
-- nodes. Numbers the node sent (deliverAt) are kept as the node wrote them, so that no
-- precision is lost to Lua's number formatting; only integers are formatted here. The location
-- (segment and index) names one scheduling of a message: a fire or a receipt made for another
-- is refused.
--
-- A message scheduled without an id has a located id instead, which tw_schedule makes from
-- where the record went: '@<partition>.<segment>.<index>.<tag>' (record.ts). While it waits
-- there it has no id state at all: its state is read from its record (which then carries the
-- tag, due time and topic) and is "scheduled" unless the bit of its index in the segment's
-- tombstone bitmap 't:<segment>' is set. The bit is set whenever it leaves that state (fired,
-- cancelled, moved); from then on its id state lives in its bucket like any other's, and its
-- record, if copied elsewhere, gets its id written in.

local function prefix_of(meta)
  return string.sub(meta, 1, -5)
end

local STATE = '^(%a)|([^|]*)|(%d+)|([^|]+)|(%d+)|(.*)$'

local function read_state(text)
  local status, seg, index, due, attempts, topic = string.match(text, STATE)
  return {status = status, seg = seg, index = tonumber(index), due = due,
    attempts = tonumber(attempts), topic = topic}
end

local function write_state(st)
  return table.concat({st.status, st.seg, string.format('%d', st.index), st.due,
    string.format('%d', st.attempts), st.topic}, '|')
end

-- Located ids (record.ts): '@<partition>.<segment>.<index>.<tag>'.
local LOCATED = '^@(%d+)%.([nw]%-?%d+)%.(%d+)%.([%w_%-]+)$'

local function partition_of(prefix)
  return string.match(prefix, ':(%d+)}:$')
end

local function located_id(prefix, seg, index, tag)
  return '@' .. partition_of(prefix) .. '.' .. seg .. '.' .. string.format('%d', index) .. '.' .. tag
end

-- A located record's head: tag, deliverAt, maxAttempts, and where maxAttempts starts.
local function located_head(record)
  local tagLength = string.byte(record, 2)
  local dueLength = string.byte(record, 3 + tagLength)
  local at = 4 + tagLength + dueLength
  local m1, m2 = string.byte(record, at, at + 1)
  return string.sub(record, 3, 2 + tagLength), string.sub(record, 4 + tagLength, at - 1),
    m1 + 256 * m2, at
end

-- The topic of a record whose maxAttempts starts at 'at' (backoff flags, f64s, payload kind).
local function topic_at(record, at)
  local flags = string.byte(record, at + 2)
  local floats = 0
  if flags % 4 ~= 0 then floats = 1 + math.floor(flags / 4) % 2 + math.floor(flags / 8) % 2 end
  at = at + 4 + 8 * floats
  return string.sub(record, at + 1, at + string.byte(record, at))
end

-- Whether bit 'index' of a bitmap string (as GET answers it) is set.
local function bit_set(bits, index)
  if not bits then return false end
  local byte = string.byte(bits, math.floor(index / 8) + 1)
  return byte ~= nil and math.floor(byte / 2 ^ (7 - index % 8)) % 2 == 1
end

-- The state of a located id still at its birth place, scheduled, with birth = true; nil when it
-- is not (its tombstone bit is set, or the record there is another's).
local function birth_state(prefix, id)
  local p, seg, text, tag = string.match(id, LOCATED)
  if not p or p ~= partition_of(prefix) then return nil end
  -- Only the id that was made names the message (no '007' for 7; within a bitmap's range).
  local index = tonumber(text)
  if index >= 4294967296 or string.format('%d', index) ~= text then return nil end
  if redis.call('GETBIT', prefix .. 't:' .. seg, index) == 1 then return nil end
  local record = redis.call('LINDEX', prefix .. 's:' .. seg, index)
  if not record or string.byte(record, 1) ~= 0 then return nil end
  local rtag, due, _, at = located_head(record)
  if rtag ~= tag then return nil end
  return {status = 'S', seg = seg, index = index, due = due, attempts = 0,
    topic = topic_at(record, at), birth = true}
end

-- The state of an id and its bucket's key; nil (and the key) when it has none.
local function state_of(prefix, id, bucket)
  local ids = prefix .. 'id:' .. bucket
  if string.byte(id, 1) == 64 then
    local st = birth_state(prefix, id)
    if st then return st, ids end
  end
  local text = redis.call('HGET', ids, id)
  if not text then return nil, ids end
  return read_state(text), ids
end

-- A located message leaves its birth state: its tombstone bit is set (before its segment can
-- be released, so that the bit never outlives the segment).
local function leave_birth(prefix, st)
  if st.birth then
    redis.call('SETBIT', prefix .. 't:' .. st.seg, st.index, 1)
    st.birth = nil
  end
end

-- A record with its id in it: a located record copied away from its place gets its id and
-- bucket written in (it can no longer be found by where it is).
local function with_id(record, id, bucket)
  if string.byte(record, 1) ~= 0 then return record end
  local _, _, _, at = located_head(record)
  local b = tonumber(bucket)
  return string.char(#id) .. id .. string.char(b % 256, math.floor(b / 256)) ..
    string.sub(record, at)
end

-- Appends a record to a segment, counting it live there; returns its index.
local function append(prefix, seg, record)
  local size = redis.call('RPUSH', prefix .. 's:' .. seg, record)
  redis.call('HINCRBY', prefix .. 'live', seg, 1)
  return size - 1
end

-- One record fewer is live in 'seg'; a segment nobody points into any more goes at once (a
-- window that gets a schedule again is made anew), except the current near segment: its owner
-- reads it from an offset, which must never point past a segment made anew.
local function release(prefix, seg)
  local left = redis.call('HINCRBY', prefix .. 'live', seg, -1)
  if left <= 0 and seg ~= 'n' .. (redis.call('HGET', prefix .. 'meta', 'near') or '0') then
    redis.call('HDEL', prefix .. 'live', seg)
    redis.call('DEL', prefix .. 's:' .. seg, prefix .. 't:' .. seg)
    if string.sub(seg, 1, 1) == 'w' then
      redis.call('ZREM', prefix .. 'windows', string.sub(seg, 2))
    end
  end
end

-- Appends a record where a message due at 'due' belongs: the current near segment when the
-- owner has loaded that stretch of time, else its window's segment. Returns seg, index, isNear.
local function place(prefix, loadedUntil, near, due, window, record)
  local seg
  local isNear = tonumber(due) < loadedUntil
  if isNear then
    seg = near
  else
    seg = 'w' .. window
    redis.call('ZADD', prefix .. 'windows', 'NX', tonumber(window), window)
  end
  return seg, append(prefix, seg, record), isNear
end

-- The partition's loadedUntil and current near segment name.
local function horizon(meta)
  local m = redis.call('HMGET', meta, 'loadedUntil', 'near')
  return tonumber(m[1] or '0') or 0, 'n' .. (m[2] or '0')
end

local function count(prefix, topic, status, by)
  local counts = prefix .. 'counts'
  local field = topic .. '|' .. status
  -- A count back at 0 goes: topics named per order or tenant leave no field behind.
  if redis.call('HINCRBY', counts, field, by) == 0 then redis.call('HDEL', counts, field) end
end

-- The state of an id whose status is 'status', and its bucket's key; nil otherwise. Only a
-- scheduled one can be a located id's birth state.
local function with_status(prefix, id, bucket, status)
  local ids = prefix .. 'id:' .. bucket
  local st
  if status == 'S' then
    st = state_of(prefix, id, bucket)
  else
    local text = redis.call('HGET', ids, id)
    st = text and read_state(text)
  end
  if not st or st.status ~= status then return nil end
  return st, ids
end

-- Copies the message's record to where 'due' belongs and points its state there (not saved:
-- the caller writes it; a located id's birth was left before). Returns whether the owner must
-- hear of it: the old or the new place is inside the loaded horizon.
local function relocate(prefix, meta, id, bucket, st, due, window, record)
  local loadedUntil, near = horizon(meta)
  record = with_id(record or redis.call('LINDEX', prefix .. 's:' .. st.seg, st.index), id, bucket)
  local wasNear = tonumber(st.due) < loadedUntil
  local seg, index, isNear = place(prefix, loadedUntil, near, due, window, record)
  release(prefix, st.seg)
  st.seg, st.index, st.due = seg, index, due
  return isNear or wasNear
end
