/**
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
 *   tw_lease(meta; 'acquire', node, -, leaseMs) -> {1, epoch} | {0, epoch, owner, msLeft}
 *   tw_lease(meta; 'renew', node, epoch, leaseMs) -> {1, epoch} | {0, epoch}
 *   tw_lease(meta; 'release', node, epoch)        -> {1, epoch} | {0, epoch}
 * An acquire always brings a new epoch, even to the node that held the lease before: whatever
 * that node's earlier incarnation still has in flight is fenced by it.
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
 * with status S (scheduled), R (ready), I (inflight) or D (dead). A segment is a list, named
 * `w<window number>` (the window's start / windowMs) or `n<k>` (near segment k), and a record
 * is found by its index in it: records are only ever appended, so an index never changes. A
 * list, not a string: Valkey grows a string by doubling on APPEND, which cost a third more
 * memory per message than the records themselves; a list packs its elements into 8 KB nodes.
 * Numbers the node sent (deliverAt) are kept as the node wrote them, so that no precision is
 * lost to Lua's number formatting; only integers are formatted here. The location (segment and
 * index) names one scheduling of a message: a fire or a receipt made for another is refused.
 *
 *   tw_schedule(meta; n, then n times: id, bucket, deliverAt, window, topic, record)
 *     -> n times: {created 1|0, deliverAt}  (0: a message with that id is pending; its due time)
 *   tw_get(meta; id, bucket) -> state | nil
 *   tw_cancel(meta; id, bucket) -> 1 | 0   (0: no scheduled message with that id)
 *
 * A message due before the partition's `loadedUntil` goes to the current near segment (the
 * owner has loaded that stretch of time: it reads the near segment's tail), and the partition's
 * channel says so; one due later goes to the segment of its window, which nobody reads until
 * the owner loads it.
 */

/** Bumped whenever a function changes what it does. */
export const LIBRARY_VERSION = 1;

export const LIBRARY_NAME = 'tickwheel';

export const LIBRARY_SOURCE = `#!lua name=${LIBRARY_NAME}

local VERSION = ${LIBRARY_VERSION}

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function lease(keys, args)
  local meta = keys[1]
  local op, node = args[1], args[2]
  local epoch, ttl = tonumber(args[3]), tonumber(args[4])
  local cur = redis.call('HMGET', meta, 'owner', 'epoch', 'leaseUntil')
  local owner = cur[1] or ''
  local current = tonumber(cur[2] or '0') or 0
  local untilMs = tonumber(cur[3] or '0') or 0
  local now = now_ms()
  if op == 'acquire' then
    if ttl == nil or ttl <= 0 then return redis.error_reply('ERR tw_lease: bad lease time') end
    if owner ~= '' and untilMs > now then return {0, current, owner, untilMs - now} end
    current = current + 1
    redis.call('HSET', meta, 'owner', node, 'epoch', current, 'leaseUntil', now + ttl)
    return {1, current}
  elseif op == 'renew' then
    if ttl == nil or ttl <= 0 then return redis.error_reply('ERR tw_lease: bad lease time') end
    if owner ~= node or current ~= epoch or untilMs <= now then return {0, current} end
    redis.call('HSET', meta, 'leaseUntil', now + ttl)
    return {1, current}
  elseif op == 'release' then
    if owner ~= node or current ~= epoch then return {0, current} end
    redis.call('HSET', meta, 'owner', '', 'leaseUntil', 0)
    return {1, current}
  end
  return redis.error_reply('ERR tw_lease: unknown operation ' .. tostring(op))
end

-- The fencing check of every owner-only function: the caller's epoch is the current one and
-- its lease has not run out by the server's clock.
local function holds(meta, node, epoch)
  local cur = redis.call('HMGET', meta, 'owner', 'epoch', 'leaseUntil')
  return cur[1] == node and tonumber(cur[2]) == epoch and (tonumber(cur[3]) or 0) > now_ms()
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
    redis.call('DEL', prefix .. 's:' .. seg)
    if string.sub(seg, 1, 1) == 'w' then
      redis.call('ZREM', prefix .. 'windows', string.sub(seg, 2))
    end
  end
end

local function count(prefix, topic, status, by)
  redis.call('HINCRBY', prefix .. 'counts', topic .. '|' .. status, by)
end

local function schedule(keys, args)
  local meta = keys[1]
  local prefix = prefix_of(meta)
  local n = tonumber(args[1])
  if n == nil or #args ~= 1 + 6 * n then
    return redis.error_reply('ERR tw_schedule: expected a count and 6 arguments per message')
  end
  local m = redis.call('HMGET', meta, 'loadedUntil', 'near')
  local loadedUntil = tonumber(m[1] or '0') or 0
  local near = 'n' .. (m[2] or '0')
  local replies = {}
  local nearHit = false
  for i = 0, n - 1 do
    local at = 2 + 6 * i
    local id, bucket, due, window, topic, record =
      args[at], args[at + 1], args[at + 2], args[at + 3], args[at + 4], args[at + 5]
    local ids = prefix .. 'id:' .. bucket
    local existing = redis.call('HGET', ids, id)
    if existing then
      replies[#replies + 1] = {0, read_state(existing).due}
    else
      local seg
      if tonumber(due) < loadedUntil then
        seg = near
        nearHit = true
      else
        seg = 'w' .. window
        redis.call('ZADD', prefix .. 'windows', 'NX', tonumber(window), window)
      end
      local index = append(prefix, seg, record)
      redis.call('HSET', ids, id, write_state({status = 'S', seg = seg, index = index, due = due,
        attempts = 0, topic = topic}))
      count(prefix, topic, 'S', 1)
      replies[#replies + 1] = {1, due}
    end
  end
  if nearHit then redis.call('SPUBLISH', prefix .. 'ev', 'n') end
  return replies
end

local function get(keys, args)
  return redis.call('HGET', prefix_of(keys[1]) .. 'id:' .. args[2], args[1])
end

local function cancel(keys, args)
  local meta = keys[1]
  local prefix = prefix_of(meta)
  local ids = prefix .. 'id:' .. args[2]
  local text = redis.call('HGET', ids, args[1])
  if not text then return 0 end
  local st = read_state(text)
  if st.status ~= 'S' then return 0 end
  redis.call('HDEL', ids, args[1])
  count(prefix, st.topic, 'S', -1)
  release(prefix, st.seg)
  -- The owner may hold it in its wheel: a near note lets it forget the timer.
  local m = redis.call('HMGET', meta, 'loadedUntil', 'near')
  if tonumber(st.due) < (tonumber(m[1] or '0') or 0) then
    redis.call('SPUBLISH', prefix .. 'ev', 'c ' .. args[1])
  end
  return 1
end

redis.register_function{function_name = 'tw_version', callback = function() return VERSION end,
  flags = {'no-writes'}}
redis.register_function{function_name = 'tw_lease', callback = lease}
redis.register_function{function_name = 'tw_holds', callback = fenced_check, flags = {'no-writes'}}
redis.register_function{function_name = 'tw_schedule', callback = schedule}
redis.register_function{function_name = 'tw_get', callback = get, flags = {'no-writes'}}
redis.register_function{function_name = 'tw_cancel', callback = cancel}
`;
