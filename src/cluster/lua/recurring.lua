-- The tickwheel library (library.ts): recurring schedules: their records, and each occurrence
-- made at most once.
--
--   tw_schedule_once(meta; markMs, then one message with an id as for tw_schedule) -> 1 | 0
--     (an occurrence of a recurring schedule: made at most once while its mark lives)
--   tw_sched(meta of partition 0; op, name, version, ...) -> recurring schedules' records
--     (see its definition below)

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
--   tw_sched(meta0; 'put', name, version, json, most)      -> {1, new version} | {0, current}
--                                                             | {-2, count}: see below
--   tw_sched(meta0; 'del', name, version)                  -> {1, 0} | {0, current}
--   tw_sched(meta0; 'save', name, version, json, node, epoch) -> {1, new version} | {0, current}
--                                     | {-1, 0} if not the holder of partition 0's lease
-- 'version' is the one the caller read (0: none): a change made meanwhile is not overwritten.
-- A put of a name without a record is refused while 'most' or more records exist (the queue's
-- maxSchedules), answering their count: here, in the call that makes it, so that nodes
-- putting at once cannot pass the bound together. put and del count a change; save (the
-- leader's own progress) does not.
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
  if op == 'put' and current == 0 then
    local most = tonumber(args[5])
    if most == nil then return redis.error_reply('ERR tw_sched: expected the most records') end
    local count = redis.call('HLEN', prefix .. 'sched')
    if count >= most then return {-2, count} end
  end
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

redis.register_function{function_name = 'tw_schedule_once', callback = schedule_once}
redis.register_function{function_name = 'tw_sched', callback = sched}
