/**
 * (Over 500 lines on purpose: Valkey loads a library as one Lua source, and this file is that
 * source with its contract; split across modules it would only be concatenated back.)
 *
 * The `tickwheel` Redis Functions library: every change the cluster makes to a partition runs
 * here, atomically in the partition's slot (docs/cluster.md, "Life of a message").
 *
 * Functions rather than EVALSHA: a library is replicated and persisted with the data, so a
 * promoted replica has it; the script cache is neither, and answers NOSCRIPT after a failover.
 * Every node loads the library with FUNCTION LOAD REPLACE on each primary at start; the library
 * answers `tw_version` so that a node never runs beside a newer library than its own.
 *
 * Time inside functions is the server's (TIME): leases expire by the server's clock only, so
 * nodes' clocks never decide who owns a partition.
 *
 * Lease replies are arrays, `{granted, epoch, ...}` with granted 1 or 0:
 *   tw_lease(meta; 'acquire', node, -, leaseMs) -> {1, epoch, born} | {0, epoch, owner, msLeft, born}
 *   tw_lease(meta; 'renew', node, epoch, leaseMs) -> {1, epoch, born} | {0, epoch, born}
 *   tw_lease(meta; 'release', node, epoch)        -> {1, epoch, born} | {0, epoch, born}
 * An acquire always brings a new epoch, even to the node that held the lease before: whatever
 * that node's earlier incarnation still has in flight is fenced by it. `born` is the server time
 * of the partition's first grant ('' before it): it changes only if the partition's keys were
 * lost, which is how nodes notice a server that restarted without its data.
 *
 * ## Messages
 *
 * Keys of a partition share the prefix `tw:{q:p}:` (one slot); functions get the partition's
 * `meta` key and build the others from its prefix. A message is an immutable *record* (bytes the
 * node encodes: id, topic, payload, retry settings), appended to a *segment*, and a *state* in
 * its id bucket, a short string:
 *
 *   status | segment | index | deliverAt | attempts | topic
 *
 * with status S (scheduled), R (ready), I (inflight) or D (dead); finished ones, A (acked) and
 * C (cancelled), are remembered a while in the partition's done hashes. A segment is a list, named
 * `w<window number>` (the window's start / windowMs) or `n<k>` (near segment k), and a record
 * is found by its index in it: records are only ever appended, so an index never changes. A
 * list, not a string: Valkey grows a string by doubling on APPEND, which cost a third more
 * memory per message than the records themselves; a list packs its elements into 8 KB nodes.
 * Numbers the node sent (deliverAt) are kept as the node wrote them, so that no precision is
 * lost to Lua's number formatting; only integers are formatted here. The location (segment and
 * index) names one scheduling of a message: a fire or a receipt made for another is refused.
 *
 *   tw_schedule(meta; n, then items: a message with an id (id, bucket, deliverAt, window,
 *               topic, record) or a run of k located records ('', window, earliest due,
 *               latest due, topic, k, the k records each after its u32 length); n messages)
 *     -> for the messages with ids: their count when all were created, else one entry each,
 *        1 (created) or the due time of the pending message that has that id (not created);
 *        with located runs, {that answer, loadedUntil, where each run went} (see schedule)
 *   tw_get(meta; id, bucket) -> state | nil   (a live message's, else a recently finished one's)
 *   tw_cancel(meta; id, bucket[, 'info']) -> 1 | 0   (0: no live message with that id;
 *     scheduled, ready, in flight and dead ones are all cancelled); with 'info', 1 is
 *     {1, topic, due, attempts} of the message cancelled, read in the same call
 *   tw_schedule_once(meta; markMs, then one message with an id as for tw_schedule) -> 1 | 0
 *     (an occurrence of a recurring schedule: made at most once while its mark lives)
 *   tw_sched(meta of partition 0; op, name, version, ...) -> recurring schedules' records
 *     (see its definition below)
 *
 * A message scheduled without an id has a *located* id instead, which tw_schedule makes from
 * where the record went: `@<partition>.<segment>.<index>.<tag>` (record.ts). While it waits
 * there it has no id state at all: its state is read from its record (which then carries the
 * tag, due time and topic) and is "scheduled" unless the bit of its index in the segment's
 * tombstone bitmap `t:<segment>` is set. The bit is set whenever it leaves that state (fired,
 * cancelled, moved); from then on its id state lives in its bucket like any other's, and its
 * record, if copied elsewhere, gets its id written in.
 *
 * A message due before the partition's `loadedUntil` goes to the current near segment (the
 * owner has loaded that stretch of time), and the partition's channel says so: tw_schedule's
 * note is `n <segment> <index of the first> <id> <bucket> <deliverAt> ...` (bucket `-` for a
 * located id), enough for the owner to arm them without reading the segment; other changes to
 * the near segment send `n` alone (read its tail). One due later goes to the segment of its window, which nobody reads until the
 * owner loads it.
 */

import { VISIBILITY_REASON } from '../queue/message.js';

/**
 * Bumped whenever a function changes what it does. 13: tw_expire keeps the embedded queue's
 * reason text for a visibility timeout; tw_cancel tells what it cancelled when asked.
 */
export const LIBRARY_VERSION = 13;

export const LIBRARY_NAME = 'tickwheel';

export const LIBRARY_SOURCE = `#!lua name=${LIBRARY_NAME}

local VERSION = ${LIBRARY_VERSION}

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Leases. Every answer ends with the partition's 'born' (set by the first grant, server time):
-- it never changes while the partition's data lives, so a node that sees it change knows the
-- data was lost (a server restarted without it).
local function lease(keys, args)
  local meta = keys[1]
  local op, node = args[1], args[2]
  local epoch, ttl = tonumber(args[3]), tonumber(args[4])
  local cur = redis.call('HMGET', meta, 'owner', 'epoch', 'leaseUntil', 'born')
  local owner = cur[1] or ''
  local current = tonumber(cur[2] or '0') or 0
  local untilMs = tonumber(cur[3] or '0') or 0
  local born = cur[4] or ''
  local now = now_ms()
  if op == 'acquire' then
    if ttl == nil or ttl <= 0 then return redis.error_reply('ERR tw_lease: bad lease time') end
    if owner ~= '' and untilMs > now then return {0, current, owner, untilMs - now, born} end
    current = current + 1
    if born == '' then born = string.format('%d', now) end
    redis.call('HSET', meta, 'owner', node, 'epoch', current, 'leaseUntil', now + ttl,
      'born', born)
    return {1, current, born}
  elseif op == 'renew' then
    if ttl == nil or ttl <= 0 then return redis.error_reply('ERR tw_lease: bad lease time') end
    if owner ~= node or current ~= epoch or untilMs <= now then return {0, current, born} end
    -- (A partition granted by an older library has no 'born' yet.)
    if born == '' then born = string.format('%d', now) end
    redis.call('HSET', meta, 'leaseUntil', now + ttl, 'born', born)
    return {1, current, born}
  elseif op == 'release' then
    if owner ~= node or current ~= epoch then return {0, current, born} end
    redis.call('HSET', meta, 'owner', '', 'leaseUntil', 0)
    return {1, current, born}
  end
  return redis.error_reply('ERR tw_lease: unknown operation ' .. tostring(op))
end

-- The fencing check of every owner-only function: the caller's epoch is the current one and
-- its lease has not run out by the server's clock.
local function holds(meta, node, epoch)
  local cur = redis.call('HMGET', meta, 'owner', 'epoch', 'leaseUntil')
  return cur[1] == node and tonumber(cur[2]) == epoch and (tonumber(cur[3]) or 0) > now_ms()
end

-- Every owner-only write counts itself in meta's 'oseq' and answers the count. The owner knows
-- the last count it saw: a count not above it means writes it saw answered were lost (a
-- failover to a replica that had not received them), and its view of the partition (what
-- fired, what it read) is stale: it loads the partition again.
local function owner_write(meta)
  return redis.call('HINCRBY', meta, 'oseq', 1)
end

local function fenced_check(keys, args)
  if holds(keys[1], args[1], tonumber(args[2])) then return 1 end
  return 0
end

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
  redis.call('HINCRBY', prefix .. 'counts', topic .. '|' .. status, by)
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

-- The most messages a near segment's note names; for more, the note is 'n' (read the segment).
local NOTE_MAX = 200

-- Schedules a batch: a sequence of items, each either a message with an id (6 arguments: id,
-- bucket, deliverAt, window, topic, record) or a run of located records of one window and
-- topic ('', window, earliest due, latest due, topic, k, then the k records in one argument,
-- each after its length as u32 little-endian: one argument a run rather than one a message,
-- which the client writes and the server parses much faster). Writes are grouped:
-- one RPUSH per segment (records in the order sent), one count per segment and per topic, so a
-- message with an id costs two commands (the dedup read and the id state) and a located one
-- none of its own, plus a few per segment, on the primary and again on each replica and in the
-- AOF. A located run goes to one segment as a whole unless its due times straddle loadedUntil
-- (then each record by its own), so its records are not even looked at. An id twice in
-- one batch is a dedup hit the second time, as in two calls. A window's segment and its entry
-- in 'windows' come and go together (release), so the entry is added only when the RPUSH made
-- the list. No table per message: segment groups hold argument offsets (negative: a located
-- record's place in 'loc').
local function schedule(keys, args)
  local meta = keys[1]
  local prefix = prefix_of(meta)
  local n = tonumber(args[1])
  if n == nil then return redis.error_reply('ERR tw_schedule: expected a message count') end
  local loadedUntil, near = horizon(meta)
  local replies, placed, hits, explicit = {}, {}, 0, 0
  local segs, bySeg = {}, {}
  local topics, byTopic = {}, {}
  local runs, loc = {}, {}
  local at, total = 2, 0
  local function add(seg, entry)
    local group = bySeg[seg]
    if group == nil then
      group = {}
      bySeg[seg] = group
      segs[#segs + 1] = seg
    end
    group[#group + 1] = entry
    return #group
  end
  local function tally(topic, k)
    local c = byTopic[topic]
    if c == nil then
      c = 0
      topics[#topics + 1] = topic
    end
    byTopic[topic] = c + k
  end
  while at <= #args do
    local id = args[at]
    if id ~= '' then
      if at + 5 > #args then break end
      local due = args[at + 2]
      local prior = placed[id]
      if prior == nil then
        local existing = redis.call('HGET', prefix .. 'id:' .. args[at + 1], id)
        if existing then prior = read_state(existing).due end
      end
      explicit = explicit + 1
      if prior then
        replies[explicit] = prior
        hits = hits + 1
      else
        if tonumber(due) < loadedUntil then add(near, at) else add('w' .. args[at + 3], at) end
        placed[id] = due
        tally(args[at + 4], 1)
        replies[explicit] = 1
      end
      at = at + 6
      total = total + 1
    else
      local window, from, to = args[at + 1], tonumber(args[at + 2]), tonumber(args[at + 3])
      local k, blob = tonumber(args[at + 5]), args[at + 6]
      if k == nil or k < 1 or k ~= math.floor(k) or from == nil or to == nil or blob == nil then
        break
      end
      -- The run's records, each after its length (u32 little-endian), in one argument.
      local firstLoc, pos = #loc + 1, 1
      for _ = 1, k do
        local b1, b2, b3, b4 = string.byte(blob, pos, pos + 3)
        if b4 == nil then break end
        local size = b1 + 256 * (b2 + 256 * (b3 + 256 * b4))
        loc[#loc + 1] = string.sub(blob, pos + 4, pos + 3 + size)
        pos = pos + 4 + size
      end
      if #loc - firstLoc + 1 ~= k or pos ~= #blob + 1 then break end
      local run = {}
      if to < loadedUntil or from >= loadedUntil then
        local seg = near
        if from >= loadedUntil then seg = 'w' .. window end
        run[1] = seg
        for r = firstLoc, firstLoc + k - 1 do
          local slot = add(seg, -r)
          if r == firstLoc then run[2] = slot end
        end
      else
        -- Straddling: the part due before loadedUntil goes near, the rest to the window.
        local far = 'w' .. window
        run[1], run[2], run[3], run[4] = near, -1, far, -1
        for r = firstLoc, firstLoc + k - 1 do
          local seg, slot = far, 4
          local _, due = located_head(loc[r])
          if tonumber(due) < loadedUntil then seg, slot = near, 2 end
          local place = add(seg, -r)
          if run[slot] == -1 then run[slot] = place end
        end
      end
      runs[#runs + 1] = run
      tally(args[at + 4], k)
      at = at + 7
      total = total + k
    end
  end
  if total ~= n or at ~= #args + 1 then
    return redis.error_reply('ERR tw_schedule: expected a count, then messages of 6 arguments ' ..
      'and located runs of 7 (the last their k records, each after its length)')
  end
  local firstOf = {}
  local nearFirst, nearNote = nil, {}
  local records = {}
  for _, seg in ipairs(segs) do
    local group = bySeg[seg]
    local m = #group
    for j = 1, m do
      local e = group[j]
      if e > 0 then records[j] = args[e + 5] else records[j] = loc[-e] end
    end
    local key = prefix .. 's:' .. seg
    local size = 0
    -- RPUSH in pieces: unpack() is bounded by the Lua stack.
    for from = 1, m, 1000 do
      size = redis.call('RPUSH', key, unpack(records, from, math.min(from + 999, m)))
    end
    local first = size - m
    firstOf[seg] = first
    if size == m and seg ~= near then
      redis.call('ZADD', prefix .. 'windows', 'NX', tonumber(string.sub(seg, 2)), string.sub(seg, 2))
    end
    redis.call('HINCRBY', prefix .. 'live', seg, m)
    for j = 1, m do
      local e = group[j]
      if e > 0 then
        redis.call('HSET', prefix .. 'id:' .. args[e + 1], args[e],
          'S|' .. seg .. '|' .. string.format('%d', first + j - 1) .. '|' .. args[e + 2] ..
          '|0|' .. args[e + 4])
      end
    end
    if seg == near then
      -- The owner arms what the note names without reading the segment (owner.ts).
      nearFirst = first
      if m <= NOTE_MAX then
        for j = 1, m do
          local e = group[j]
          if e > 0 then
            nearNote[j] = args[e] .. ' ' .. args[e + 1] .. ' ' .. args[e + 2]
          else
            local tag, due = located_head(loc[-e])
            nearNote[j] = located_id(prefix, seg, first + j - 1, tag) .. ' - ' .. due
          end
        end
      else
        nearNote = nil
      end
    end
  end
  for _, topic in ipairs(topics) do count(prefix, topic, 'S', byTopic[topic]) end
  if nearFirst then
    local note = 'n'
    if nearNote then
      note = 'n ' .. near .. ' ' .. string.format('%d', nearFirst) .. ' ' .. table.concat(nearNote, ' ')
    end
    redis.call('SPUBLISH', prefix .. 'ev', note)
  end
  -- A reply of one integer when nothing was a duplicate and nothing located: a nested array
  -- per message cost more than the grouped writes.
  local answer = replies
  if hits == 0 then answer = explicit end
  if #runs == 0 then return answer end
  -- Located runs: where each went, {segment, index of its first record} (for a straddling one,
  -- the near part's then the window's, index -1 for a part with none), and loadedUntil, by
  -- which the node tells a straddling run's parts apart.
  local where = {}
  for _, run in ipairs(runs) do
    for j = 1, #run, 2 do
      where[#where + 1] = run[j]
      if run[j + 1] == -1 then
        where[#where + 1] = -1
      else
        where[#where + 1] = firstOf[run[j]] + run[j + 1] - 1
      end
    end
  end
  return {answer, string.format('%d', loadedUntil), where}
end

-- Finished ids (acked 'A', cancelled 'C') are remembered for get(), in two generations of at
-- most DONE_CAP each per partition: when the newer one fills up it replaces the older one in
-- one RENAME. Small enough to stay in Valkey's compact listpack encoding.
local DONE_CAP = 128

local function remember(prefix, id, st, status)
  local newer = prefix .. 'done:0'
  redis.call('HSET', newer, id, write_state({status = status, seg = st.seg, index = st.index,
    due = st.due, attempts = st.attempts, topic = st.topic}))
  if redis.call('HLEN', newer) >= DONE_CAP then
    redis.call('RENAME', newer, prefix .. 'done:1')
  end
end

-- A message's state: pending, or else finished a short while ago.
local function get(keys, args)
  local prefix = prefix_of(keys[1])
  local id = args[1]
  local st = state_of(prefix, id, args[2])
  if st then return write_state(st) end
  return redis.call('HGET', prefix .. 'done:0', id)
    or redis.call('HGET', prefix .. 'done:1', id)
end

local function cancel(keys, args)
  local meta = keys[1]
  local prefix = prefix_of(meta)
  local id, bucket = args[1], args[2]
  local st, ids = state_of(prefix, id, bucket)
  if not st then return 0 end
  if st.birth then
    leave_birth(prefix, st)
  else
    redis.call('HDEL', ids, id)
    redis.call('HDEL', prefix .. 'reasons', id)
  end
  -- A cancelled occurrence of a recurring schedule may be made again (see schedule_once).
  redis.call('DEL', prefix .. 'once:' .. id)
  count(prefix, st.topic, st.status, -1)
  release(prefix, st.seg)
  remember(prefix, id, st, 'C')
  if st.status == 'I' then
    redis.call('ZREM', prefix .. 'inflight', bucket .. ':' .. id)
  elseif st.status == 'D' then
    redis.call('LREM', prefix .. 'dead:' .. st.topic, 1, bucket .. ':' .. id)
  end
  -- A ready one's entry stays in its ready list: take() skips entries whose state is gone, and
  -- removing it would cost a walk over the list.
  if st.status == 'S' and tonumber(st.due) < horizon(meta) then
    -- The owner may hold it in its wheel: a near note lets it forget the timer.
    redis.call('SPUBLISH', prefix .. 'ev', 'c ' .. id)
  end
  if args[3] == 'info' then return {1, st.topic, st.due, st.attempts} end
  return 1
end

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

-- Ready -> inflight for up to max messages of a topic, in the order they became ready, with a
-- visibility deadline by the server's clock; stops before maxBytes of records (but always
-- takes one). -> {id, attempts, deliverAt, record}...
local function take(keys, args)
  local prefix = prefix_of(keys[1])
  local topic, max = args[1], tonumber(args[2])
  local visibility, maxBytes = tonumber(args[3]), tonumber(args[4])
  local list = prefix .. 'ready:' .. topic
  local now = now_ms()
  local out, bytes = {}, 0
  while #out < max do
    local entry = redis.call('LPOP', list)
    if not entry then break end
    local bucket, id = string.match(entry, '^(%d+):(.*)$')
    local ids = prefix .. 'id:' .. bucket
    local text = redis.call('HGET', ids, id)
    if text then
      local st = read_state(text)
      if st.status == 'R' then
        local record = redis.call('LINDEX', prefix .. 's:' .. st.seg, st.index)
        if #out > 0 and bytes + #record > maxBytes then
          redis.call('LPUSH', list, entry)
          break
        end
        bytes = bytes + #record
        st.status = 'I'
        st.attempts = st.attempts + 1
        redis.call('HSET', ids, id, write_state(st))
        redis.call('ZADD', prefix .. 'inflight', now + visibility, entry)
        count(prefix, topic, 'R', -1)
        count(prefix, topic, 'I', 1)
        out[#out + 1] = {id, st.attempts, st.due, record}
      end
    end
  end
  -- The owner arms a timer for the new visibility deadline (server time) from this alone.
  if #out > 0 then
    redis.call('SPUBLISH', prefix .. 'ev', 'i ' .. string.format('%d', now + visibility))
  end
  return out
end

-- The inflight delivery (id, bucket, attempt), or nil when it is not (any more).
local function delivery(prefix, id, bucket, attempt)
  local st, ids = with_status(prefix, id, bucket, 'I')
  if not st or st.attempts ~= attempt then return nil end
  return st, ids
end

local function ack_one(prefix, id, bucket, attempt)
  local st, ids = delivery(prefix, id, bucket, attempt)
  if not st then return 0 end
  redis.call('HDEL', ids, id)
  redis.call('ZREM', prefix .. 'inflight', bucket .. ':' .. id)
  redis.call('HDEL', prefix .. 'reasons', id)
  count(prefix, st.topic, 'I', -1)
  release(prefix, st.seg)
  remember(prefix, id, st, 'A')
  return 1
end

-- ack(meta; id, bucket, attempt [, id, bucket, attempt ...]) -> 1 | 0 for one delivery, an
-- array of them for several (a consumer's acks of one partition in one turn go together).
local function ack(keys, args)
  if #args == 0 or #args % 3 ~= 0 then
    return redis.error_reply('ERR tw_ack: expected id, bucket, attempt for each delivery')
  end
  local prefix = prefix_of(keys[1])
  if #args == 3 then return ack_one(prefix, args[1], args[2], tonumber(args[3])) end
  local out = {}
  for at = 1, #args, 3 do
    out[#out + 1] = ack_one(prefix, args[at], args[at + 1], tonumber(args[at + 2]))
  end
  return out
end

-- A delivery failed: scheduled again at due (in its window or the near segment), or dead
-- once its attempts reach the record's maxAttempts. Returns 'retry' or 'dead'.
local function fail(meta, prefix, ids, id, bucket, st, due, window, reason)
  redis.call('ZREM', prefix .. 'inflight', bucket .. ':' .. id)
  count(prefix, st.topic, 'I', -1)
  if reason ~= '' then redis.call('HSET', prefix .. 'reasons', id, reason) end
  local record = redis.call('LINDEX', prefix .. 's:' .. st.seg, st.index)
  local _, _, maxAttempts = record_head(record)
  if st.attempts >= maxAttempts then
    st.status = 'D'
    redis.call('HSET', ids, id, write_state(st))
    redis.call('RPUSH', prefix .. 'dead:' .. st.topic, bucket .. ':' .. id)
    count(prefix, st.topic, 'D', 1)
    return 'dead'
  end
  local tell = relocate(prefix, meta, id, bucket, st, due, window, record)
  st.status = 'S'
  redis.call('HSET', ids, id, write_state(st))
  count(prefix, st.topic, 'S', 1)
  if tell then redis.call('SPUBLISH', prefix .. 'ev', 'n') end
  return 'retry'
end

-- nack(meta; id, bucket, attempt, due, window, reason) -> 'retry' | 'dead' | 0
local function nack(keys, args)
  local meta = keys[1]
  local prefix = prefix_of(meta)
  local id, bucket = args[1], args[2]
  local st, ids = delivery(prefix, id, bucket, tonumber(args[3]))
  if not st then return 0 end
  return fail(meta, prefix, ids, id, bucket, st, args[4], args[5], args[6] or '')
end

-- Inflight deliveries whose visibility deadline is at or before upTo, oldest first, for the
-- owner to work out each retry's due time: -> {bucket, id, attempts, deadline, record, due}...
-- (due, the time the delivery was for, came last in version 12: earlier callers ignore it)
local function overdue(keys, args)
  local prefix = prefix_of(keys[1])
  local entries = redis.call('ZRANGEBYSCORE', prefix .. 'inflight', '-inf', args[1],
    'WITHSCORES', 'LIMIT', 0, tonumber(args[2]))
  local out = {}
  for i = 1, #entries, 2 do
    local bucket, id = string.match(entries[i], '^(%d+):(.*)$')
    local text = redis.call('HGET', prefix .. 'id:' .. bucket, id)
    if text then
      local st = read_state(text)
      if st.status == 'I' then
        local record = redis.call('LINDEX', prefix .. 's:' .. st.seg, st.index)
        out[#out + 1] = {bucket, id, st.attempts, entries[i + 1], record, st.due}
      end
    end
  end
  return out
end

-- Owner only: deliveries whose visibility ran out, each (id, bucket, attempt, due, window)
-- failed as by a nack, if still inflight with that attempt and past its deadline by the
-- server's clock. -> {retried, dead, oseq, outcome...} or {-1}, one outcome per delivery given:
-- 0 left alone, 1 retried, 2 dead (the outcomes came in version 12: earlier callers ignore them).
local function expire(keys, args)
  local meta = keys[1]
  if not holds(meta, args[1], tonumber(args[2])) then return {-1} end
  local prefix = prefix_of(meta)
  local now = now_ms()
  local n = tonumber(args[3])
  local retried, dead = 0, 0
  local outcomes = {}
  for i = 0, n - 1 do
    local at = 4 + 5 * i
    local id, bucket = args[at], args[at + 1]
    local st, ids = delivery(prefix, id, bucket, tonumber(args[at + 2]))
    local deadline = st and tonumber(redis.call('ZSCORE', prefix .. 'inflight', bucket .. ':' .. id))
    outcomes[i + 1] = 0
    if st and deadline and deadline <= now then
      if fail(meta, prefix, ids, id, bucket, st, args[at + 3], args[at + 4],
          '${VISIBILITY_REASON}') == 'dead' then
        dead = dead + 1
        outcomes[i + 1] = 2
      else
        retried = retried + 1
        outcomes[i + 1] = 1
      end
    end
  end
  local out = {retried, dead, owner_write(meta)}
  for i = 1, n do out[3 + i] = outcomes[i] end
  return out
end

-- A scheduled message due at another time: its record copied to where that time belongs.
-- reschedule(meta; id, bucket, due, window) -> 1 | 0
local function reschedule(keys, args)
  local meta = keys[1]
  local prefix = prefix_of(meta)
  local st, ids = with_status(prefix, args[1], args[2], 'S')
  if not st then return 0 end
  leave_birth(prefix, st)
  local tell = relocate(prefix, meta, args[1], args[2], st, args[3], args[4])
  redis.call('HSET', ids, args[1], write_state(st))
  if tell then redis.call('SPUBLISH', prefix .. 'ev', 'n') end
  return 1
end

-- A dead letter scheduled again, attempts from 0. requeue(meta; id, bucket, due, window)
local function requeue(keys, args)
  local meta = keys[1]
  local prefix = prefix_of(meta)
  local id, bucket = args[1], args[2]
  local st, ids = with_status(prefix, id, bucket, 'D')
  if not st then return 0 end
  redis.call('LREM', prefix .. 'dead:' .. st.topic, 1, bucket .. ':' .. id)
  count(prefix, st.topic, 'D', -1)
  local tell = relocate(prefix, meta, id, bucket, st, args[3], args[4])
  st.status, st.attempts = 'S', 0
  redis.call('HSET', ids, id, write_state(st))
  count(prefix, st.topic, 'S', 1)
  if tell then redis.call('SPUBLISH', prefix .. 'ev', 'n') end
  return 1
end

-- The queue's fixed settings, written by the first node and read by every later one:
-- config(config; partitions, windowMs) -> {partitions, windowMs} as stored.
local function config(keys, args)
  local key = keys[1]
  redis.call('HSETNX', key, 'partitions', args[1])
  redis.call('HSETNX', key, 'windowMs', args[2])
  redis.call('HSETNX', key, 'library', VERSION)
  return redis.call('HMGET', key, 'partitions', 'windowMs')
end

-- A node's heartbeat: heartbeat(nodes; node, ttlMs) keeps the node listed until ttlMs from
-- now by the server's clock (ttlMs 0: it leaves), drops the lapsed, and answers the members.
local function heartbeat(keys, args)
  local key = keys[1]
  local now = now_ms()
  local ttl = tonumber(args[2])
  if ttl > 0 then
    redis.call('ZADD', key, now + ttl, args[1])
  else
    redis.call('ZREM', key, args[1])
  end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  return redis.call('ZRANGE', key, 0, -1)
end

-- A rate-limited topic's token bucket, shared by every node (src/queue/topics.ts):
-- tokens(bucket; perSecond, burst, want) -> {granted, retryInMs}: takes up to want whole tokens
-- (retryInMs: with none granted, the time until the next one); want < 0 gives -want back, unless
-- the bucket's limit is another one by now (those tokens came from a bucket that is no more). A
-- new bucket starts full; a changed limit keeps the tokens saved up, at most the new burst. A
-- bucket left alone expires once it would be full again.
local function tokens(keys, args)
  local key = keys[1]
  local rate, burst, want = tonumber(args[1]), tonumber(args[2]), tonumber(args[3])
  local now = now_ms()
  local saved = redis.call('HMGET', key, 'tokens', 'at', 'rate', 'burst')
  local same = saved[3] == args[1] and saved[4] == args[2]
  if want < 0 and not same then return {0, 0} end
  local level = burst
  if saved[1] then
    local elapsed = math.max(0, now - tonumber(saved[2]))
    level = math.min(burst, tonumber(saved[1]) + elapsed * rate / 1000)
  end
  local granted = 0
  if want < 0 then
    level = math.min(burst, level - want)
  else
    granted = math.min(want, math.floor(level))
    level = level - granted
  end
  redis.call('HSET', key, 'tokens', string.format('%.17g', level), 'at', now, 'rate', args[1],
    'burst', args[2])
  redis.call('PEXPIRE', key, math.ceil((burst - level) * 1000 / rate) + 1000)
  local retry = 0
  if granted == 0 then retry = math.max(1, math.ceil((1 - level) * 1000 / rate)) end
  return {granted, retry}
end

-- A message's state and current record: record(meta; id, bucket) -> {state, record} | nil
local function record_of(keys, args)
  local prefix = prefix_of(keys[1])
  local st = state_of(prefix, args[1], args[2])
  if not st then return nil end
  return {write_state(st), redis.call('LINDEX', prefix .. 's:' .. st.seg, st.index)}
end

-- An occurrence of a recurring schedule: one message with an id (tw_schedule's arguments for
-- one) made at most once while its mark 'once:<id>' lives (ttlMs), whatever became of it:
-- acked, dead or still pending. A cancel removes the mark. -> 1 made | 0 made before
local function schedule_once(keys, args)
  local mark = prefix_of(keys[1]) .. 'once:' .. args[2]
  local ttl = tonumber(args[1])
  if ttl == nil then return redis.error_reply('ERR tw_schedule_once: expected a ttl') end
  if redis.call('EXISTS', mark) == 1 then return 0 end
  local reply = schedule(keys, {'1', args[2], args[3], args[4], args[5], args[6], args[7]})
  -- An error reply is the caller's to see, and leaves no mark.
  if type(reply) == 'table' and reply.err then return reply end
  redis.call('SET', mark, '1', 'PX', ttl)
  -- One message with an id: 1 when created, else {due} of the pending one with that id.
  if reply == 1 then return 1 end
  return 0
end

-- Recurring schedules' records (docs/cluster.md, "Recurring schedules"): a hash 'sched' of
-- partition 0, name -> '<version>|<record JSON>', and a change count 'schedv' the leader watches.
-- Versions come from one counter, 'schedseq': a record deleted and made again never has a
-- version it had before.
--   tw_sched(meta0; 'put', name, version, json)            -> {1, new version} | {0, current}
--   tw_sched(meta0; 'del', name, version)                  -> {1, 0} | {0, current}
--   tw_sched(meta0; 'save', name, version, json, node, epoch) -> as put; {-1, 0} if not the
--                                                              holder of partition 0's lease
-- 'version' is the one the caller read (0: none): a change made meanwhile is not overwritten.
-- put and del count a change; save (the leader's own progress) does not.
local function sched(keys, args)
  local meta = keys[1]
  local prefix = prefix_of(meta)
  local op, name, expect = args[1], args[2], tonumber(args[3])
  if expect == nil then return redis.error_reply('ERR tw_sched: expected a version') end
  if op == 'save' and not holds(meta, args[5], tonumber(args[6])) then return {-1, 0} end
  local current = 0
  local stored = redis.call('HGET', prefix .. 'sched', name)
  if stored then current = tonumber(string.match(stored, '^(%d+)|')) or 0 end
  -- A save is of a record that exists: one deleted meanwhile stays deleted.
  if current ~= expect or (op == 'save' and current == 0) then return {0, current} end
  if op == 'del' then
    redis.call('HDEL', prefix .. 'sched', name)
    redis.call('INCR', prefix .. 'schedv')
    return {1, 0}
  end
  local version = redis.call('INCR', prefix .. 'schedseq')
  redis.call('HSET', prefix .. 'sched', name, version .. '|' .. args[4])
  if op == 'put' then redis.call('INCR', prefix .. 'schedv') end
  return {1, version}
end

redis.register_function{function_name = 'tw_version', callback = function() return VERSION end,
  flags = {'no-writes'}}
redis.register_function{function_name = 'tw_lease', callback = lease}
redis.register_function{function_name = 'tw_config', callback = config}
redis.register_function{function_name = 'tw_heartbeat', callback = heartbeat}
redis.register_function{function_name = 'tw_tokens', callback = tokens}
redis.register_function{function_name = 'tw_holds', callback = fenced_check, flags = {'no-writes'}}
redis.register_function{function_name = 'tw_schedule', callback = schedule}
redis.register_function{function_name = 'tw_schedule_once', callback = schedule_once}
redis.register_function{function_name = 'tw_sched', callback = sched}
redis.register_function{function_name = 'tw_get', callback = get, flags = {'no-writes'}}
redis.register_function{function_name = 'tw_cancel', callback = cancel}
redis.register_function{function_name = 'tw_read', callback = read, flags = {'no-writes'}}
redis.register_function{function_name = 'tw_record', callback = record_of, flags = {'no-writes'}}
redis.register_function{function_name = 'tw_load', callback = load}
redis.register_function{function_name = 'tw_fire', callback = fire}
redis.register_function{function_name = 'tw_take', callback = take}
redis.register_function{function_name = 'tw_ack', callback = ack}
redis.register_function{function_name = 'tw_nack', callback = nack}
redis.register_function{function_name = 'tw_overdue', callback = overdue, flags = {'no-writes'}}
redis.register_function{function_name = 'tw_expire', callback = expire}
redis.register_function{function_name = 'tw_reschedule', callback = reschedule}
redis.register_function{function_name = 'tw_requeue', callback = requeue}
`;
