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

redis.register_function{function_name = 'tw_version', callback = function() return VERSION end,
  flags = {'no-writes'}}
redis.register_function{function_name = 'tw_lease', callback = lease}
redis.register_function{function_name = 'tw_holds', callback = fenced_check, flags = {'no-writes'}}
`;
