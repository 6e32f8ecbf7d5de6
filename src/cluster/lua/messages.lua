-- The tickwheel library (library.ts): a message by its id, as producers and the queue's users
-- change it: schedule, get, cancel, reschedule, requeue, and its record.
--
--   tw_schedule(meta; n, then items: a message with an id (id, bucket, deliverAt, window,
--               topic, record) or a run of k located records ('', window, earliest due,
--               latest due, topic, k, the k records each after its u32 length); n messages)
--     -> for the messages with ids: their count when all were created, else one entry each,
--        1 (created) or the due time of the pending message that has that id (not created);
--        with located runs, {that answer, loadedUntil, where each run went} (see schedule)
--   tw_get(meta; id, bucket) -> state | nil   (a live message's, else a recently finished one's)
--   tw_cancel(meta; id, bucket) -> {1, topic, due, attempts} of the message cancelled | 0 (no
--     live message with that id; scheduled, ready, in flight and dead ones are all cancelled)
--
-- A message due before the partition's loadedUntil goes to the current near segment (the owner
-- has loaded that stretch of time), and the partition's channel says so: tw_schedule's note is
-- 'n <segment> <index of the first> <id> <bucket> <deliverAt> ...' (bucket '-' for a located
-- id), enough for the owner to arm them without reading the segment; other changes to the near
-- segment send 'n' alone (read its tail). One due later goes to the segment of its window,
-- which nobody reads until the owner loads it.

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
    redis.call('ZREM', prefix .. 'dead:' .. st.topic, bucket .. ':' .. id)
  end
  -- A ready one's entry stays in its ready list: take() skips entries whose state is gone, and
  -- removing it would cost a walk over the list. An owner that holds a scheduled one in its
  -- wheel finds it gone when it fires (fire() moves only what is still scheduled there).
  return {1, st.topic, st.due, st.attempts}
end

-- A scheduled or ready message due at another time: its record copied to where that time
-- belongs; a ready one is scheduled again (its ready list entry stays: take() skips entries
-- whose state is not ready). reschedule(meta; id, bucket, due, window) -> 1 | 0
local function reschedule(keys, args)
  local meta = keys[1]
  local prefix = prefix_of(meta)
  local st, ids = with_status(prefix, args[1], args[2], 'S')
  if not st then
    st, ids = with_status(prefix, args[1], args[2], 'R')
    if not st then return 0 end
    count(prefix, st.topic, 'R', -1)
    count(prefix, st.topic, 'S', 1)
    st.status = 'S'
  end
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
  redis.call('ZREM', prefix .. 'dead:' .. st.topic, bucket .. ':' .. id)
  count(prefix, st.topic, 'D', -1)
  local tell = relocate(prefix, meta, id, bucket, st, args[3], args[4])
  st.status, st.attempts = 'S', 0
  redis.call('HSET', ids, id, write_state(st))
  count(prefix, st.topic, 'S', 1)
  if tell then redis.call('SPUBLISH', prefix .. 'ev', 'n') end
  return 1
end

-- A message's state and current record: record(meta; id, bucket) -> {state, record} | nil
local function record_of(keys, args)
  local prefix = prefix_of(keys[1])
  local st = state_of(prefix, args[1], args[2])
  if not st then return nil end
  return {write_state(st), redis.call('LINDEX', prefix .. 's:' .. st.seg, st.index)}
end

redis.register_function{function_name = 'tw_schedule', callback = schedule}
redis.register_function{function_name = 'tw_get', callback = get, flags = {'no-writes'}}
redis.register_function{function_name = 'tw_cancel', callback = cancel}
redis.register_function{function_name = 'tw_reschedule', callback = reschedule}
redis.register_function{function_name = 'tw_requeue', callback = requeue}
redis.register_function{function_name = 'tw_record', callback = record_of, flags = {'no-writes'}}
