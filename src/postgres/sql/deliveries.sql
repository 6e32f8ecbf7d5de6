-- Deliveries: ready messages taken in flight, acked, nacked, and expired when their
-- visibility runs out.

-- Ready -> in flight for up to `most` messages of a topic due by `upto` (the caller's clock:
-- an owner fires ahead of the due time), in the order they became ready, with a visibility
-- deadline by the store's clock; stops before max_bytes of records (but always takes one).
-- Rows another take holds are passed over. A take short of `most` answers last the earliest due
-- time of the topic's ready messages it left for being due after `upto`, as a row of nulls but
-- for that due time. A ready message whose record is
-- gone (never so unless the database lost it) cannot be delivered: its row goes, and it is
-- answered with a NULL record for the caller to report, rather than stay first in line.
-- Its COMMIT does not wait for the WAL flush: a take that a crash of PostgreSQL undoes leaves
-- the messages ready, handed out again (at-least-once), that attempt not counted. Any later
-- commit that waits (a fire, a schedule) flushes it too.
CREATE OR REPLACE FUNCTION @Q@.tw_take(p int, t text, most int, visibility bigint,
  max_bytes bigint, upto float8)
RETURNS TABLE (id text, attempts int, due float8, rec bytea)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  deadline bigint := @Q@.now_ms() + visibility;
  taken int;
BEGIN
  PERFORM set_config('synchronous_commit', 'off', true);
  RETURN QUERY
  WITH picked AS (
    SELECT s.id, s.seg, s.idx, s.at FROM @Q@.states s
    WHERE s.part = p AND s.topic = t AND s.status = 'R' AND s.due <= upto
    ORDER BY s.at LIMIT most FOR UPDATE SKIP LOCKED
  ), found AS (
    SELECT z.id, z.at, z.rec
    FROM (SELECT array_agg(x.id) AS ids, array_agg(x.at) AS ats, array_agg(x.seg) AS s,
      array_agg(x.idx) AS i FROM picked x) a,
      LATERAL @Q@.records_at(p, a.s, a.i, false) r, LATERAL unnest(a.ids, a.ats, r.recs) z(id, at, rec)
  ), sized AS (
    SELECT z.id, z.rec, row_number() OVER w AS n, sum(octet_length(z.rec)) OVER w AS upto
    FROM found z WHERE z.rec IS NOT NULL
    WINDOW w AS (ORDER BY z.at)
  ), kept AS (
    SELECT z.id, z.rec, z.n FROM sized z WHERE z.n = 1 OR z.upto <= max_bytes
  ), out AS (
    UPDATE @Q@.states s SET status = 'I', attempts = s.attempts + 1, at = deadline
    FROM kept k WHERE s.part = p AND s.id = k.id
    RETURNING s.id, s.attempts, s.due, k.rec, k.n
  ), gone AS (
    DELETE FROM @Q@.states s USING found z
    WHERE z.rec IS NULL AND s.part = p AND s.id = z.id
    RETURNING s.id, s.attempts, s.due
  ), unreasoned AS (
    DELETE FROM @Q@.reasons r USING gone g WHERE r.part = p AND r.id = g.id
  ), counted AS (
    INSERT INTO @Q@.counts (part, topic, status, n)
    SELECT p, t, x.status, x.n FROM (
      SELECT 'R'::"char" AS status, -(SELECT count(*) FROM out) - (SELECT count(*) FROM gone) AS n
      UNION ALL SELECT 'I', (SELECT count(*) FROM out)) x
    WHERE x.n <> 0
  )
  SELECT u.id, u.attempts, u.due, u.rec FROM (
    SELECT o.id, o.attempts, o.due, o.rec, o.n FROM out o
    UNION ALL
    SELECT g.id, g.attempts, g.due, NULL, NULL FROM gone g) u
  ORDER BY u.n NULLS LAST;
  GET DIAGNOSTICS taken = ROW_COUNT;
  -- The owner arms a timer for the new visibility deadline (store time) from this alone.
  IF taken > 0 THEN PERFORM @Q@.publish(p, 'i ' || deadline); END IF;
  IF taken < most THEN
    RETURN QUERY SELECT NULL::text, NULL::int, min(s.due), NULL::bytea FROM @Q@.states s
      WHERE s.part = p AND s.topic = t AND s.status = 'R' AND s.due > upto
      HAVING min(s.due) IS NOT NULL;
  END IF;
END
$$;

-- The in-flight delivery (id, attempt), its row locked; NULL when it is not out (any more).
CREATE OR REPLACE FUNCTION @Q@.delivery(p int, mid text, attempt int) RETURNS @Q@.states
LANGUAGE sql AS $$
  SELECT * FROM @Q@.states
  WHERE part = p AND id = mid AND status = 'I' AND attempts = attempt FOR UPDATE
$$;

-- For each delivery (id, attempt), whether it was still out (and is now done). `wait`: the
-- COMMIT waits for the WAL flush as the server's synchronous_commit says (a durable ack); else
-- it does not, and an ack that a crash of PostgreSQL undoes leaves the message in flight, handed
-- out again once its visibility runs out.
-- Generic plans: the custom plans of its small statements cost more to make than to run
-- (its lookup's took 0.12 ms of planning a call).
CREATE OR REPLACE FUNCTION @Q@.tw_ack(p int, ids text[], attempts int[], wait boolean)
RETURNS boolean[]
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
  answered boolean[] := array_fill(false, ARRAY[coalesce(cardinality(ids), 0)]);
  hits bigint[];
  places tid[];
  trimming boolean;
  k bigint;
BEGIN
  IF NOT wait THEN PERFORM set_config('synchronous_commit', 'off', true); END IF;
  -- Each named row found by its key alone (one probe of the primary key an id, whatever the
  -- planner guesses of the arrays: a join, or a status in the lookup, ran as a scan of the
  -- partition's deliveries; LIMIT keeps the status check out of it) and locked, in the order
  -- of the ids as by every call that locks several: two calls never wait for each other's rows
  -- in turn. Those still out with the attempt named are acked; an (id, attempt) named twice
  -- counts once.
  SELECT array_agg(n.k), array_agg(l.place) INTO hits, places
  FROM (
    SELECT DISTINCT ON (x.id, x.a) x.id, x.a, x.k
    FROM unnest(ids, attempts) WITH ORDINALITY AS x(id, a, k) ORDER BY x.id, x.a, x.k
  ) n
  CROSS JOIN LATERAL (
    SELECT s.ctid AS place, s.status, s.attempts FROM @Q@.states s
    WHERE s.part = p AND s.id = n.id LIMIT 1 FOR UPDATE
  ) l
  WHERE l.status = 'I' AND l.attempts = n.a;
  IF hits IS NULL THEN RETURN answered; END IF;
  WITH gone AS (
    DELETE FROM @Q@.states s WHERE s.ctid = ANY(places)
    RETURNING s.id, s.seg, s.due, s.attempts, s.topic
  ), unreasoned AS (
    DELETE FROM @Q@.reasons r USING gone g WHERE r.part = p AND r.id = g.id
  ), counted AS (
    INSERT INTO @Q@.counts (part, topic, status, n)
    SELECT p, g.topic, 'I', -count(*) FROM gone g GROUP BY g.topic
  ), released AS (
    INSERT INTO @Q@.releases (seg, part, n) SELECT g.seg, p, count(*) FROM gone g GROUP BY g.seg
  ), remembered AS (
    INSERT INTO @Q@.done AS d (part, id, status, due, attempts, topic, n)
    SELECT p, g.id, 'A', g.due, g.attempts, g.topic, nextval('@Q@.done_order') FROM gone g
    ON CONFLICT (part, id) DO UPDATE SET status = excluded.status, due = excluded.due,
      attempts = excluded.attempts, topic = excluded.topic, n = excluded.n
    RETURNING d.n
  )
  SELECT bool_or(m.n % 64 = 0) INTO trimming FROM remembered m;
  IF trimming THEN PERFORM @Q@.trim_done(p); END IF;
  FOREACH k IN ARRAY hits LOOP answered[k] := true; END LOOP;
  RETURN answered;
END
$$;

-- A delivery failed: 'retry' (due again at `due`), 'dead', or NULL (not out).
CREATE OR REPLACE FUNCTION @Q@.tw_nack(p int, mid text, attempt int, due float8, win bigint,
  reason text)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  st @Q@.states := @Q@.delivery(p, mid, attempt);
BEGIN
  IF st.id IS NULL THEN RETURN NULL; END IF;
  RETURN @Q@.fail(st, due, win, reason);
END
$$;

-- In-flight deliveries whose visibility deadline is at or before upto, oldest first. One whose
-- record is gone (never so unless the database lost it) cannot be delivered again: its row
-- goes, and it is answered with a NULL record for the caller to report, rather than stay in
-- flight for ever.
CREATE OR REPLACE FUNCTION @Q@.tw_overdue(p int, upto bigint, most int)
RETURNS TABLE (id text, bucket int, attempts int, rec bytea, due float8)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH due AS (
    SELECT s.id, s.bucket, s.attempts, s.due, s.at, s.topic, s.seg, s.idx
    FROM @Q@.states s
    WHERE s.part = p AND s.status = 'I' AND s.at <= upto
    ORDER BY s.at LIMIT most
  ), picked AS (
    SELECT z.*
    FROM (SELECT array_agg(x.id) AS ids, array_agg(x.bucket) AS bs, array_agg(x.attempts) AS ns,
      array_agg(x.due) AS dues, array_agg(x.at) AS ats, array_agg(x.topic) AS ts,
      array_agg(x.seg) AS s, array_agg(x.idx) AS i FROM due x) a,
      LATERAL @Q@.records_at(p, a.s, a.i, false) r,
      LATERAL unnest(a.ids, a.bs, a.ns, a.dues, a.ats, a.ts, r.recs)
        z(id, bucket, attempts, due, at, topic, rec)
  ), gone AS (
    DELETE FROM @Q@.states s USING picked k
    WHERE k.rec IS NULL AND s.part = p AND s.id = k.id AND s.status = 'I'
    RETURNING s.id, s.bucket, s.attempts, s.due, s.at, s.topic
  ), unreasoned AS (
    DELETE FROM @Q@.reasons r USING gone g WHERE r.part = p AND r.id = g.id
  ), counted AS (
    INSERT INTO @Q@.counts (part, topic, status, n)
    SELECT p, g.topic, 'I', -count(*) FROM gone g GROUP BY g.topic
  )
  SELECT u.id, u.bucket::int, u.attempts, u.rec, u.due FROM (
    SELECT k.id, k.bucket, k.attempts, k.rec, k.due, k.at FROM picked k WHERE k.rec IS NOT NULL
    UNION ALL
    SELECT g.id, g.bucket, g.attempts, NULL, g.due, g.at FROM gone g) u
  ORDER BY u.at;
END
$$;

-- Owner only: deliveries whose visibility ran out, each (id, attempt, due, window) failed as by
-- a nack if still in flight with that attempt and past its deadline by the store's clock.
-- Per delivery: 0 left alone, 1 retried, 2 dead; seq NULL when fenced.
CREATE OR REPLACE FUNCTION @Q@.tw_expire(p int, node text, ep bigint, ids text[],
  attempts int[], dues float8[], wins bigint[], reason text, OUT seq bigint, OUT outcomes int[])
LANGUAGE plpgsql AS $$
DECLARE
  now bigint := @Q@.now_ms();
  st @Q@.states;
  k int;
BEGIN
  seq := @Q@.owner_write(p, node, ep);
  IF seq IS NULL THEN RETURN; END IF;
  outcomes := array_fill(0, ARRAY[cardinality(ids)]);
  PERFORM 1 FROM @Q@.states s WHERE s.part = p AND s.id = ANY(ids) ORDER BY s.id FOR UPDATE;
  FOR k IN 1..coalesce(cardinality(ids), 0) LOOP
    st := @Q@.delivery(p, ids[k], attempts[k]);
    IF st.id IS NOT NULL AND st.at <= now THEN
      outcomes[k] := CASE WHEN @Q@.fail(st, dues[k], wins[k], reason) = 'dead' THEN 2 ELSE 1 END;
    END IF;
  END LOOP;
END
$$;
