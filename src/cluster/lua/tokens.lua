-- The tickwheel library (library.ts): rate-limited topics' shared token buckets.

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

redis.register_function{function_name = 'tw_tokens', callback = tokens}
