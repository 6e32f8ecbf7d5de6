-- The tickwheel library (library.ts): deliveries: ready messages taken in flight, acked,
-- nacked, and expired when their visibility runs out.

-- A message whose record is gone (only after the store lost writes, e.g. a failover to a
-- replica that had not got them): dropped with its counts mended, so that it is reported once
-- (the row given back with no record) and never stands in front of the ones behind it.
local function drop_lost(prefix, ids, id, bucket, st)
  redis.call('HDEL', ids, id)
  redis.call('ZREM', prefix .. 'inflight', bucket .. ':' .. id)
  redis.call('HDEL', prefix .. 'reasons', id)
  count(prefix, st.topic, st.status, -1)
  release(prefix, st.seg)
end

-- Ready -> inflight for up to max messages of a topic, in the order they became ready, with a
-- visibility deadline by the server's clock; stops before maxBytes of records (but always
-- takes one). -> {id, attempts, deliverAt, record}... (record false: lost, see drop_lost)
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
      local record = st.status == 'R' and redis.call('LINDEX', prefix .. 's:' .. st.seg, st.index)
      if st.status == 'R' and not record then
        drop_lost(prefix, ids, id, bucket, st)
        out[#out + 1] = {id, st.attempts, st.due, false}
      elseif record then
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

-- ack(meta; id, bucket, attempt [, id, bucket, attempt ...]) -> {1 | 0 for each delivery} (a
-- consumer's acks of one partition in one turn go together).
local function ack(keys, args)
  if #args == 0 or #args % 3 ~= 0 then
    return redis.error_reply('ERR tw_ack: expected id, bucket, attempt for each delivery')
  end
  local prefix = prefix_of(keys[1])
  local out = {}
  for at = 1, #args, 3 do
    out[#out + 1] = ack_one(prefix, args[at], args[at + 1], tonumber(args[at + 2]))
  end
  return out
end

-- A delivery failed: scheduled again at due (in its window or the near segment), or dead
-- once its attempts reach the record's maxAttempts. Returns 'retry', 'dead', or 'lost' (its
-- record gone: dropped, see drop_lost).
local function fail(meta, prefix, ids, id, bucket, st, due, window, reason)
  local record = redis.call('LINDEX', prefix .. 's:' .. st.seg, st.index)
  if not record then
    drop_lost(prefix, ids, id, bucket, st)
    return 'lost'
  end
  redis.call('ZREM', prefix .. 'inflight', bucket .. ':' .. id)
  count(prefix, st.topic, 'I', -1)
  if reason ~= '' then redis.call('HSET', prefix .. 'reasons', id, reason) end
  local _, _, maxAttempts = record_head(record)
  if st.attempts >= maxAttempts then
    st.status = 'D'
    redis.call('HSET', ids, id, write_state(st))
    -- Scored by the server's time of death in microseconds, rising within the partition (two
    -- deaths of one call share a TIME), so deadLetters lists them in the order they died.
    local t = redis.call('TIME')
    local died = tonumber(t[1]) * 1000000 + tonumber(t[2])
    local last = tonumber(redis.call('HGET', meta, 'lastDeath') or '0')
    if died <= last then died = last + 1 end
    redis.call('HSET', meta, 'lastDeath', died)
    redis.call('ZADD', prefix .. 'dead:' .. st.topic, died, bucket .. ':' .. id)
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

-- nack(meta; id, bucket, attempt, due, window, reason) -> 'retry' | 'dead' | 'lost' | 0
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
-- (due: the time the delivery was for; record false: lost and dropped, see drop_lost)
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
        if not record then drop_lost(prefix, prefix .. 'id:' .. bucket, id, bucket, st) end
        out[#out + 1] = {bucket, id, st.attempts, entries[i + 1], record, st.due}
      end
    end
  end
  return out
end

-- Owner only: deliveries whose visibility ran out, each (id, bucket, attempt, due, window)
-- failed as by a nack, if still inflight with that attempt and past its deadline by the
-- server's clock. -> {retried, dead, oseq, outcome...} or {-1}, one outcome per delivery given:
-- 0 left alone, 1 retried, 2 dead.
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
      -- VISIBILITY_REASON: the embedded queue's text (queue/message.ts), in the library's header.
      local result = fail(meta, prefix, ids, id, bucket, st, args[at + 3], args[at + 4],
        VISIBILITY_REASON)
      if result == 'dead' then
        dead = dead + 1
        outcomes[i + 1] = 2
      elseif result == 'retry' then
        retried = retried + 1
        outcomes[i + 1] = 1
      end
    end
  end
  local out = {retried, dead, owner_write(meta)}
  for i = 1, n do out[3 + i] = outcomes[i] end
  return out
end

redis.register_function{function_name = 'tw_take', callback = take}
redis.register_function{function_name = 'tw_ack', callback = ack}
redis.register_function{function_name = 'tw_nack', callback = nack}
redis.register_function{function_name = 'tw_overdue', callback = overdue}
redis.register_function{function_name = 'tw_expire', callback = expire}
