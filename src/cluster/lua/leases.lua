-- The tickwheel library (library.ts): partition leases, and the fencing check of every
-- owner-only function. It comes first in the library: every other file uses its now_ms, holds
-- and owner_write.
--
-- Lease replies are arrays, {granted, epoch, ...} with granted 1 or 0:
--   tw_lease(meta; 'acquire', node, -, leaseMs) -> {1, epoch, born} | {0, epoch, owner, msLeft, born}
--   tw_lease(meta; 'renew', node, epoch, leaseMs) -> {1, epoch, born} | {0, epoch, born}
--   tw_lease(meta; 'release', node, epoch)        -> {1, epoch, born} | {0, epoch, born}
-- An acquire always brings a new epoch, even to the node that held the lease before: whatever
-- that node's earlier incarnation still has in flight is fenced by it. born is the server time
-- of the partition's first grant ('' before it): it changes only if the partition's keys were
-- lost, which is how nodes notice a server that restarted without its data.

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
    redis.call('HSET', meta, 'leaseUntil', now + ttl)
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

redis.register_function{function_name = 'tw_lease', callback = lease}
