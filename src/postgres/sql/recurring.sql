-- Recurring schedules: their records, and each occurrence made at most once.

-- An occurrence of a recurring schedule: one message with an id made at most once while its
-- mark lives (mark_ms), whatever became of it: acked, dead or still pending. A cancel removes
-- the mark. True when made now.
CREATE OR REPLACE FUNCTION @Q@.tw_schedule_once(p int, mark_ms bigint, mid text, b int,
  due float8, win bigint, t text, r bytea)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  now bigint := @Q@.now_ms();
  answer jsonb;
BEGIN
  PERFORM 1 FROM @Q@.horizons WHERE part = p FOR UPDATE;
  IF EXISTS (SELECT 1 FROM @Q@.once_marks WHERE part = p AND id = mid AND until > now) THEN
    RETURN false;
  END IF;
  answer := @Q@.tw_schedule(p, ARRAY[mid], ARRAY[b], ARRAY[due], ARRAY[win], ARRAY[t],
    ARRAY[r], ARRAY[0], '{}', '{}', '{}', '{}', true);
  INSERT INTO @Q@.once_marks AS m (part, id, until) VALUES (p, mid, now + mark_ms)
  ON CONFLICT (part, id) DO UPDATE SET until = excluded.until;
  RETURN answer -> 'existing' -> 0 = 'null'::jsonb;
END
$$;

-- Recurring schedules' records (docs/cluster.md, "Recurring schedules"). `expect` is the
-- version the caller read (0: none): a change made meanwhile is not overwritten. Versions come
-- from one sequence: a record deleted and made again never has a version it had before. put
-- and del move 'schedChanges'; save (the leader's own progress, fenced by partition 0's lease)
-- does not. A put of a name without a record is refused while `most` or more records exist
-- (the queue's maxSchedules; null: no bound), as counted by 'schedCount', which puts and dels
-- keep here under the config row's lock every change takes first: nodes putting at once cannot
-- pass the bound together.
-- -> [1, new version] | [0, current] | [-1, 0] (save by a node not holding it)
--    | [-2, count] (a put of a new name refused).
CREATE OR REPLACE FUNCTION @Q@.tw_sched(op text, sched_name text, expect bigint, rec text,
  node text, ep bigint, most bigint)
RETURNS bigint[]
LANGUAGE plpgsql AS $$
DECLARE
  held bigint;
  v bigint;
  n bigint;
BEGIN
  IF op = 'save' AND @Q@.owner_write(0, node, ep) IS NULL THEN RETURN ARRAY[-1, 0]; END IF;
  IF op NOT IN ('put', 'del', 'save') THEN
    RAISE EXCEPTION 'tickwheel: unknown recurring schedule change %', op USING ERRCODE = '22023';
  END IF;
  -- Changes of one name take turns: the row, or the config row when there is none.
  PERFORM 1 FROM @Q@.config WHERE key = 'schedChanges' FOR UPDATE;
  SELECT version INTO held FROM @Q@.sched WHERE name = sched_name FOR UPDATE;
  held := coalesce(held, 0);
  IF held <> expect OR (op = 'save' AND held = 0) THEN RETURN ARRAY[0, held]; END IF;
  IF op = 'del' THEN
    DELETE FROM @Q@.sched WHERE name = sched_name;
    UPDATE @Q@.config SET value = (value::bigint + 1)::text WHERE key = 'schedChanges';
    UPDATE @Q@.config SET value = (value::bigint - 1)::text WHERE key = 'schedCount';
    RETURN ARRAY[1, 0];
  END IF;
  IF op = 'put' AND held = 0 THEN
    SELECT value::bigint INTO n FROM @Q@.config WHERE key = 'schedCount';
    IF n >= most THEN RETURN ARRAY[-2, n]; END IF;
    UPDATE @Q@.config SET value = (n + 1)::text WHERE key = 'schedCount';
  END IF;
  v := nextval('@Q@.sched_versions');
  INSERT INTO @Q@.sched AS s (name, version, record) VALUES (sched_name, v, rec)
  ON CONFLICT (name) DO UPDATE SET version = excluded.version, record = excluded.record;
  IF op = 'put' THEN
    UPDATE @Q@.config SET value = (value::bigint + 1)::text WHERE key = 'schedChanges';
  END IF;
  RETURN ARRAY[1, v];
END
$$;
