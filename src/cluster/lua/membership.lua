-- The tickwheel library (library.ts): the queue's fixed settings and its members; tw_version
-- answers VERSION, from the library's header.

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

redis.register_function{function_name = 'tw_version', callback = function() return VERSION end,
  flags = {'no-writes'}}
redis.register_function{function_name = 'tw_config', callback = config}
redis.register_function{function_name = 'tw_heartbeat', callback = heartbeat}
