-- Segments and the tables that hold them (tables.sql). A span's table is made by the first
-- append into it (or the load that starts a near segment in it), and dropped by reap() once
-- every segment of the span is empty and none is a partition's current near segment.
--
-- Locks: an append holds the span's advisory lock shared until its transaction ends; reap()
-- takes it exclusively, only if free, and gives up on the DROP after a short lock_timeout.
-- So a table is never dropped under an append, and reap() never makes a call wait for long.

CREATE OR REPLACE FUNCTION @Q@.now_ms() RETURNS bigint
LANGUAGE sql VOLATILE AS $$
  SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint
$$;

-- 'w<window>' or 'n<k>' -> seg; NULL for a name that is neither (or a window before 1970).
CREATE OR REPLACE FUNCTION @Q@.seg_of(name text) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE
    WHEN name ~ '^w(0|[1-9][0-9]{0,15})$' THEN substr(name, 2)::bigint
    WHEN name ~ '^n(0|[1-9][0-9]{0,15})$' THEN -1 - substr(name, 2)::bigint
  END
$$;

-- STABLE as `||` with a number is: so it is inlined.
CREATE OR REPLACE FUNCTION @Q@.seg_name(seg bigint) RETURNS text
LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN seg >= 0 THEN 'w' || seg ELSE 'n' || (-1 - seg) END
$$;

-- The segment of window `win` for a record scheduled when the store's window is `now_win`:
-- level 0 up to @SPAN_FANOUT@ first-level tables ahead, then each level @SPAN_FANOUT@ times as
-- far, to level 10 (level k's tables hold @WINDOW_SPAN@ * @SPAN_FANOUT@^k windows). So a queue
-- with messages spread over years has a few tables a level, not one per @WINDOW_SPAN@ windows.
-- A window before 1970 stays negative (refused by the caller).
CREATE OR REPLACE FUNCTION @Q@.window_seg(win bigint, now_win bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN win < 0 THEN win ELSE win + @LEVEL_STRIDE@::bigint * CASE
    WHEN win - now_win < @WINDOW_SPAN@ * @SPAN_FANOUT@::float8 THEN 0
    WHEN win - now_win < @WINDOW_SPAN@ * @SPAN_FANOUT@::float8 ^ 2 THEN 1
    WHEN win - now_win < @WINDOW_SPAN@ * @SPAN_FANOUT@::float8 ^ 3 THEN 2
    WHEN win - now_win < @WINDOW_SPAN@ * @SPAN_FANOUT@::float8 ^ 4 THEN 3
    WHEN win - now_win < @WINDOW_SPAN@ * @SPAN_FANOUT@::float8 ^ 5 THEN 4
    WHEN win - now_win < @WINDOW_SPAN@ * @SPAN_FANOUT@::float8 ^ 6 THEN 5
    WHEN win - now_win < @WINDOW_SPAN@ * @SPAN_FANOUT@::float8 ^ 7 THEN 6
    WHEN win - now_win < @WINDOW_SPAN@ * @SPAN_FANOUT@::float8 ^ 8 THEN 7
    WHEN win - now_win < @WINDOW_SPAN@ * @SPAN_FANOUT@::float8 ^ 9 THEN 8
    WHEN win - now_win < @WINDOW_SPAN@ * @SPAN_FANOUT@::float8 ^ 10 THEN 9
    ELSE 10 END END
$$;

-- The store's window now.
CREATE OR REPLACE FUNCTION @Q@.now_window() RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
  RETURN floor(@Q@.now_ms() / (SELECT value::bigint FROM @Q@.config WHERE key = 'windowMs'));
END
$$;

-- The span of a segment: its table's name suffix and range of seg [lo, hi).
CREATE OR REPLACE FUNCTION @Q@.span_of(seg bigint, OUT suffix text, OUT lo bigint, OUT hi bigint)
LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
  first bigint;
  size bigint;
BEGIN
  IF seg >= 0 THEN
    size := @WINDOW_SPAN@ * power(@SPAN_FANOUT@, seg / @LEVEL_STRIDE@::bigint)::bigint;
    first := seg - seg % size;
    suffix := 'w' || first;
    lo := first;
    hi := first + size;
  ELSE
    first := (-1 - seg) - (-1 - seg) % @NEAR_SPAN@;
    suffix := 'n' || first;
    lo := -first - @NEAR_SPAN@;
    hi := -first;
  END IF;
END
$$;

-- The span's table exists and cannot be dropped before this transaction ends.
CREATE OR REPLACE FUNCTION @Q@.hold_span(seg bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  span record := @Q@.span_of(seg);
BEGIN
  PERFORM pg_advisory_xact_lock_shared(hashtextextended(@S@ || '.use.' || span.suffix, 0));
  IF to_regclass(format('%I.%I', @S@, 'records_' || span.suffix)) IS NOT NULL THEN
    RETURN;
  END IF;
  -- Makers of one span take turns. An advisory lock does not refresh this session's catalog
  -- cache, so the second may not see the first's table yet: its CREATE then finds it made.
  PERFORM pg_advisory_xact_lock(hashtextextended(@S@ || '.make.' || span.suffix, 0));
  PERFORM @Q@.make_span_table('records', span.suffix, span.lo, span.hi);
  PERFORM @Q@.make_span_table('tombs', span.suffix, span.lo, span.hi);
END
$$;

-- The table of a span for `parent` (records or tombs), unless another transaction made it.
-- Made alone, then attached: ATTACH PARTITION locks the parent SHARE UPDATE EXCLUSIVE, which
-- calls reading and writing it do not wait for, nor it for them (CREATE ... PARTITION OF locks
-- it whole: it would wait for every open transaction that wrote a record, an application's too).
CREATE OR REPLACE FUNCTION @Q@.make_span_table(parent text, suffix text, lo bigint, hi bigint)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('CREATE TABLE %I.%I (LIKE %I.%I INCLUDING ALL)',
    @S@, parent || '_' || suffix, @S@, parent);
  EXECUTE format('ALTER TABLE %I.%I ATTACH PARTITION %I.%I FOR VALUES FROM (%s) TO (%s)',
    @S@, parent, @S@, parent || '_' || suffix, lo, hi);
EXCEPTION WHEN duplicate_table OR unique_violation THEN
  NULL;
END
$$;

-- Makes room for k records of a partition in a segment: the index of the first (the caller
-- inserts them). The segment's row stays locked to the end of the transaction.
CREATE OR REPLACE FUNCTION @Q@.reserve(p int, s bigint, k int) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
  first int;
BEGIN
  PERFORM @Q@.hold_span(s);
  INSERT INTO @Q@.segments AS g (seg, part, next) VALUES (s, p, k)
  ON CONFLICT (seg, part) DO UPDATE SET next = g.next + k
  RETURNING g.next - k INTO first;
  RETURN first;
END
$$;

-- Appends one record: its index.
CREATE OR REPLACE FUNCTION @Q@.append(p int, s bigint, rec bytea) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
  i int := @Q@.reserve(p, s, 1);
BEGIN
  INSERT INTO @Q@.records (seg, part, idx, rec) VALUES (s, p, i, rec);
  RETURN i;
END
$$;

-- One record fewer is live in the segment (reap() drops its table once the span is empty).
CREATE OR REPLACE FUNCTION @Q@.release(p int, s bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO @Q@.releases (seg, part, n) VALUES (s, p, 1);
END
$$;

-- The records at the places (segs[k], idxs[k]) of partition p, as arrays in the order of the
-- places (recs[k] NULL where none is), and with `with_tombs` whether a tomb marks each. Callers
-- zip them with their own arrays (unnest of several): no join, whose plan depends on what the
-- planner guesses of arrays (a nested loop over n places reads n² rows). One segment at a time
-- with the segment as a parameter: PostgreSQL then opens that segment's tables alone, where a
-- join of `records` on a segment taken from another row opens every table of it on each call.
-- Each place by its key (LATERAL, LIMIT 1): as a join, the planner may read a whole table.
-- Generic plans, pruned to the segment's table when they run: a plan made for each call's
-- segment (what the plan cache chose for the partitioned tables) was planned anew on every call.
CREATE OR REPLACE FUNCTION @Q@.records_at(p int, segs bigint[], idxs int[], with_tombs boolean,
  OUT recs bytea[], OUT tombed boolean[])
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
  n int := coalesce(cardinality(segs), 0);
  one bigint;
  hit record;
BEGIN
  recs := '{}';
  tombed := '{}';
  IF n = 0 THEN RETURN; END IF;
  -- Usually every place is in one segment: one query answers the arrays in order.
  IF segs[1] IS NOT NULL AND segs <@ ARRAY[segs[1]] THEN
    one := segs[1];
    SELECT array_agg(r.rec ORDER BY w.k), array_agg(CASE WHEN with_tombs THEN EXISTS (
        SELECT 1 FROM @Q@.tombs t WHERE t.seg = one AND t.part = p AND t.idx = w.i) END ORDER BY w.k)
    INTO recs, tombed
    FROM unnest(idxs) WITH ORDINALITY AS w(i, k)
    LEFT JOIN LATERAL (SELECT r.rec FROM @Q@.records r
      WHERE r.seg = one AND r.part = p AND r.idx = w.i LIMIT 1) r ON true;
    RETURN;
  END IF;
  recs := array_fill(NULL::bytea, ARRAY[n]);
  tombed := array_fill(CASE WHEN with_tombs THEN false END, ARRAY[n]);
  FOREACH one IN ARRAY ARRAY(SELECT DISTINCT x FROM unnest(segs) x WHERE x IS NOT NULL) LOOP
    FOR hit IN
      SELECT w.k, r.rec, EXISTS (SELECT 1 FROM @Q@.tombs t
        WHERE with_tombs AND t.seg = one AND t.part = p AND t.idx = w.i) AS tomb
      FROM unnest(segs, idxs) WITH ORDINALITY AS w(s, i, k)
      CROSS JOIN LATERAL (SELECT r.rec FROM @Q@.records r
        WHERE r.seg = one AND r.part = p AND r.idx = w.i LIMIT 1) r
      WHERE w.s = one
    LOOP
      recs[hit.k] := hit.rec;
      IF with_tombs THEN tombed[hit.k] := hit.tomb; END IF;
    END LOOP;
  END LOOP;
END
$$;

-- Live records per segment of a partition (those with none left are not named).
CREATE OR REPLACE FUNCTION @Q@.live(p int) RETURNS TABLE (seg bigint, live bigint)
LANGUAGE sql STABLE AS $$
  SELECT g.seg, g.next - coalesce(r.n, 0)
  FROM @Q@.segments g
  LEFT JOIN (SELECT x.seg, sum(x.n) AS n FROM @Q@.releases x WHERE x.part = p GROUP BY x.seg) r
    ON r.seg = g.seg
  WHERE g.part = p AND g.next - coalesce(r.n, 0) > 0
$$;

-- Folds the rows of `counts` and `releases` into one per key.
CREATE OR REPLACE FUNCTION @Q@.fold() RETURNS void
LANGUAGE sql AS $$
  WITH gone AS (DELETE FROM @Q@.counts RETURNING *)
  INSERT INTO @Q@.counts (part, topic, status, n)
  SELECT part, topic, status, sum(n) FROM gone GROUP BY 1, 2, 3 HAVING sum(n) <> 0;
  WITH gone AS (DELETE FROM @Q@.releases RETURNING *)
  INSERT INTO @Q@.releases (seg, part, n)
  SELECT seg, part, sum(n) FROM gone GROUP BY 1, 2;
$$;

-- Drops up to `most` span tables that hold nothing live: the names of those dropped.
CREATE OR REPLACE FUNCTION @Q@.reap(most int) RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
  t record;
  span record;
  dropped text[] := '{}';
BEGIN
  FOR t IN
    SELECT substr(c.relname, 9) AS suffix
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = to_regclass(format('%I.records', @S@))
    ORDER BY c.relname
  LOOP
    EXIT WHEN cardinality(dropped) >= most;
    IF t.suffix LIKE 'w%' THEN
      span := @Q@.span_of(substr(t.suffix, 2)::bigint);
    ELSE
      span := @Q@.span_of(-1 - substr(t.suffix, 2)::bigint);
    END IF;
    CONTINUE WHEN NOT pg_try_advisory_xact_lock(hashtextextended(@S@ || '.use.' || span.suffix, 0));
    CONTINUE WHEN EXISTS (SELECT 1 FROM @Q@.segments g
      WHERE g.seg >= span.lo AND g.seg < span.hi AND g.next > coalesce((SELECT sum(r.n)
        FROM @Q@.releases r WHERE r.seg = g.seg AND r.part = g.part), 0));
    CONTINUE WHEN EXISTS (SELECT 1 FROM @Q@.horizons
      WHERE -1 - near >= span.lo AND -1 - near < span.hi);
    BEGIN
      SET LOCAL lock_timeout = '200ms';
      EXECUTE format('DROP TABLE %I.%I, %I.%I', @S@, 'records_' || span.suffix,
        @S@, 'tombs_' || span.suffix);
      DELETE FROM @Q@.segments WHERE seg >= span.lo AND seg < span.hi;
      DELETE FROM @Q@.releases WHERE seg >= span.lo AND seg < span.hi;
      dropped := dropped || span.suffix;
    EXCEPTION WHEN lock_not_available THEN
      NULL;
    END;
  END LOOP;
  RETURN dropped;
END
$$;
