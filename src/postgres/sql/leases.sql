-- Partition leases, and the fencing of every owner-only function.
--
-- An acquire always brings a new epoch, even to the node that held the lease before: whatever
-- that node's earlier incarnation still has in flight is fenced by it. born is the store's
-- time of the partition's first grant ('' before it): it changes only if the partition's rows
-- were lost. Answers [granted, epoch, born].

CREATE OR REPLACE FUNCTION @Q@.tw_lease(p int, op text, node text, ep bigint, ttl bigint,
  OUT granted boolean, OUT epoch bigint, OUT born text)
LANGUAGE plpgsql AS $$
DECLARE
  l @Q@.leases;
  now bigint := @Q@.now_ms();
BEGIN
  -- An acquire waits for every owner-only change under way (each holds the row FOR KEY SHARE);
  -- a renewal or a release, which only the holder makes, waits for none of them.
  IF op = 'acquire' THEN
    SELECT * INTO l FROM @Q@.leases WHERE part = p FOR UPDATE;
  ELSE
    SELECT * INTO l FROM @Q@.leases WHERE part = p FOR NO KEY UPDATE;
  END IF;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'tickwheel: no partition %', p USING ERRCODE = '22023';
  END IF;
  IF op IN ('acquire', 'renew') AND (ttl IS NULL OR ttl <= 0) THEN
    RAISE EXCEPTION 'tickwheel: bad lease time %', ttl USING ERRCODE = '22023';
  END IF;
  granted := false;
  epoch := l.epoch;
  born := l.born;
  IF op = 'acquire' THEN
    IF l.owner <> '' AND l.until > now THEN RETURN; END IF;
    epoch := l.epoch + 1;
    IF born = '' THEN born := now::text; END IF;
    UPDATE @Q@.leases x SET owner = node, epoch = l.epoch + 1, until = now + ttl,
      born = tw_lease.born WHERE x.part = p;
    granted := true;
  ELSIF op = 'renew' THEN
    IF l.owner <> node OR l.epoch <> ep OR l.until <= now THEN RETURN; END IF;
    UPDATE @Q@.leases x SET until = now + ttl WHERE x.part = p;
    granted := true;
  ELSIF op = 'release' THEN
    IF l.owner <> node OR l.epoch <> ep THEN RETURN; END IF;
    UPDATE @Q@.leases x SET owner = '', until = 0 WHERE x.part = p;
    granted := true;
  ELSE
    RAISE EXCEPTION 'tickwheel: unknown lease operation %', op USING ERRCODE = '22023';
  END IF;
END
$$;

-- The fencing check of every owner-only change, in the statement that makes it: the caller
-- holds the lease under its epoch and it has not run out by the store's clock. The owner-write
-- count (a number above every one answered before), or NULL when fenced. The row stays locked
-- FOR KEY SHARE until the transaction ends: no acquire comes between the check and the change,
-- while renewals, which take the row FOR NO KEY UPDATE, do not wait.
CREATE OR REPLACE FUNCTION @Q@.owner_write(p int, node text, ep bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  seq bigint;
BEGIN
  SELECT nextval('@Q@.owner_writes') INTO seq FROM @Q@.leases
  WHERE part = p AND owner = node AND epoch = ep AND until > @Q@.now_ms()
  FOR KEY SHARE;
  RETURN seq;
END
$$;

-- Renews a node's leases at once, each (partition, epoch) held by it: those renewed.
CREATE OR REPLACE FUNCTION @Q@.tw_renew(node text, parts int[], eps bigint[], ttl bigint)
RETURNS int[]
LANGUAGE plpgsql AS $$
DECLARE
  now bigint := @Q@.now_ms();
  renewed int[];
BEGIN
  IF ttl IS NULL OR ttl <= 0 THEN
    RAISE EXCEPTION 'tickwheel: bad lease time %', ttl USING ERRCODE = '22023';
  END IF;
  -- In the order of the partitions, as every call that locks several leases.
  WITH held AS (
    SELECT l.part FROM @Q@.leases l JOIN unnest(parts, eps) AS x(part, epoch)
      ON l.part = x.part AND l.epoch = x.epoch
    WHERE l.owner = node AND l.until > now
    ORDER BY l.part FOR NO KEY UPDATE OF l
  ), done AS (
    UPDATE @Q@.leases l SET until = now + ttl FROM held WHERE l.part = held.part
    RETURNING l.part
  )
  SELECT coalesce(array_agg(part ORDER BY part), '{}') INTO renewed FROM done;
  RETURN renewed;
END
$$;

-- The queue's fixed settings, written by the first node: [partitions, windowMs] as stored.
-- Each partition's rows are made here.
CREATE OR REPLACE FUNCTION @Q@.tw_config(partitions int, window_ms bigint) RETURNS bigint[]
LANGUAGE plpgsql AS $$
DECLARE
  stored int;
BEGIN
  INSERT INTO @Q@.config (key, value) VALUES ('partitions', partitions::text),
    ('windowMs', window_ms::text) ON CONFLICT (key) DO NOTHING;
  SELECT value::int INTO stored FROM @Q@.config WHERE key = 'partitions';
  INSERT INTO @Q@.leases (part) SELECT g FROM generate_series(0, stored - 1) g
    ON CONFLICT (part) DO NOTHING;
  -- Two nodes may make them at once: a near number drawn for a row not made is never used.
  INSERT INTO @Q@.horizons (part, near)
    SELECT g, nextval('@Q@.near_numbers') FROM generate_series(0, stored - 1) g
    WHERE NOT EXISTS (SELECT 1 FROM @Q@.horizons h WHERE h.part = g)
    ON CONFLICT (part) DO NOTHING;
  RETURN ARRAY[stored, (SELECT value::bigint FROM @Q@.config WHERE key = 'windowMs')];
END
$$;

-- A node's heartbeat: a member until ttl ms from now by the store's clock (0: it leaves); the
-- lapsed are dropped. The members, sorted.
CREATE OR REPLACE FUNCTION @Q@.tw_heartbeat(who text, ttl bigint) RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
  now bigint := @Q@.now_ms();
BEGIN
  IF ttl > 0 THEN
    INSERT INTO @Q@.members AS m (node, until) VALUES (who, now + ttl)
    ON CONFLICT (node) DO UPDATE SET until = excluded.until;
  ELSE
    DELETE FROM @Q@.members WHERE node = who;
  END IF;
  DELETE FROM @Q@.members WHERE until <= now;
  RETURN coalesce((SELECT array_agg(node ORDER BY node COLLATE "C") FROM @Q@.members), '{}');
END
$$;

-- A rate-limited topic's token bucket, shared by every node (src/queue/topics.ts): takes up to
-- `want` whole tokens ([granted, retryInMs]: with none granted, the time until the next one);
-- want < 0 gives -want back, unless the bucket's limit is another one by now. A new bucket
-- starts full; a changed limit keeps the tokens saved up, at most the new burst; a bucket left
-- alone is gone once it would be full again.
CREATE OR REPLACE FUNCTION @Q@.tw_tokens(t text, rate_text text, burst_text text, want bigint)
RETURNS bigint[]
LANGUAGE plpgsql AS $$
DECLARE
  now bigint := @Q@.now_ms();
  rate float8 := rate_text::float8;
  burst float8 := burst_text::float8;
  saved @Q@.buckets;
  level float8 := burst;
  granted bigint := 0;
  retry bigint := 0;
BEGIN
  SELECT * INTO saved FROM @Q@.buckets WHERE topic = t AND expires > now FOR UPDATE;
  IF want < 0 AND (saved.topic IS NULL OR saved.rate <> rate_text OR saved.burst <> burst_text) THEN
    RETURN ARRAY[0, 0];
  END IF;
  IF saved.topic IS NOT NULL THEN
    level := least(burst, saved.tokens + greatest(0, now - saved.at) * rate / 1000);
  END IF;
  IF want < 0 THEN
    level := least(burst, level - want);
  ELSE
    granted := least(want, floor(level)::bigint);
    level := level - granted;
  END IF;
  INSERT INTO @Q@.buckets AS x (topic, tokens, at, rate, burst, expires)
  VALUES (t, level, now, rate_text, burst_text, now + ceil((burst - level) * 1000 / rate) + 1000)
  ON CONFLICT (topic) DO UPDATE SET tokens = excluded.tokens, at = excluded.at,
    rate = excluded.rate, burst = excluded.burst, expires = excluded.expires;
  IF granted = 0 THEN retry := greatest(1, ceil((1 - level) * 1000 / rate)::bigint); END IF;
  RETURN ARRAY[granted, retry];
END
$$;
