-- The partition owner's side of scheduled messages: reading segments, raising the loaded
-- horizon, and firing what is due.

-- Up to `most` records of a segment from index `from_idx`: how many there were, and those still
-- their message's current record with its state. A located record without a tomb is
-- scheduled there.
CREATE OR REPLACE FUNCTION @Q@.tw_read(p int, seg_name text, from_idx int, most int,
  OUT scanned int, OUT idx int[], OUT status text[], OUT due float8[], OUT attempts int[],
  OUT recs bytea[], OUT ids text[])
LANGUAGE plpgsql STABLE AS $$
DECLARE
  s bigint := @Q@.seg_of(seg_name);
BEGIN
  IF s IS NULL THEN
    RAISE EXCEPTION 'tickwheel: no segment %', seg_name USING ERRCODE = '22023';
  END IF;
  SELECT count(*)::int,
    array_agg(r.idx ORDER BY r.idx) FILTER (WHERE live.status IS NOT NULL),
    array_agg(live.status ORDER BY r.idx) FILTER (WHERE live.status IS NOT NULL),
    array_agg(live.due ORDER BY r.idx) FILTER (WHERE live.status IS NOT NULL),
    array_agg(live.attempts ORDER BY r.idx) FILTER (WHERE live.status IS NOT NULL),
    array_agg(r.rec ORDER BY r.idx) FILTER (WHERE live.status IS NOT NULL),
    array_agg(live.id ORDER BY r.idx) FILTER (WHERE live.status IS NOT NULL)
  INTO scanned, idx, status, due, attempts, recs, ids
  FROM @Q@.records r
  LEFT JOIN LATERAL (
    SELECT st.status::text, st.due, st.attempts, st.id FROM @Q@.states st
    WHERE get_byte(r.rec, 0) <> 0 AND st.part = p
      AND st.id = convert_from(substring(r.rec FROM 2 FOR get_byte(r.rec, 0)), 'LATIN1')
      AND st.seg = s AND st.idx = r.idx
    UNION ALL
    SELECT 'S', @Q@.located_due(r.rec)::float8, 0,
      '@' || p || '.' || seg_name || '.' || r.idx || '.' || @Q@.located_tag(r.rec)
    WHERE get_byte(r.rec, 0) = 0 AND NOT EXISTS (
      SELECT 1 FROM @Q@.tombs t WHERE t.seg = s AND t.part = p AND t.idx = r.idx)
  ) live ON true
  WHERE r.seg = s AND r.part = p AND r.idx >= from_idx AND r.idx < from_idx + most;
END
$$;

-- Owner only. Raises loaded_until (never lowers it): from now on, schedules due before it go
-- to the near segment, so the windows below it are frozen for the owner to read. With rotate,
-- a new near segment starts. -> [loadedUntil, near number, seq], or NULL when fenced.
CREATE OR REPLACE FUNCTION @Q@.tw_load(p int, node text, ep bigint, upto bigint, rotate boolean)
RETURNS bigint[]
LANGUAGE plpgsql AS $$
DECLARE
  seq bigint := @Q@.owner_write(p, node, ep);
  h @Q@.horizons;
BEGIN
  IF seq IS NULL THEN RETURN NULL; END IF;
  UPDATE @Q@.horizons x SET loaded_until = greatest(x.loaded_until, upto),
    near = CASE WHEN rotate THEN nextval('@Q@.near_numbers') ELSE x.near END
  WHERE x.part = p RETURNING * INTO h;
  -- The new near segment's table is made here rather than by the first schedule into it.
  IF rotate THEN PERFORM @Q@.hold_span(-1 - h.near); END IF;
  RETURN ARRAY[h.loaded_until, h.near, seq];
END
$$;

-- Owner only. Scheduled -> ready for each (id, bucket, segment, index) still at that place; a
-- message due more than skew ms after the store's time is left scheduled and named in the
-- answer. An owner fires ahead of the due time (skew covers that too): a take hands a message
-- out only once it is due, and a topic whose first message fired is not due yet by the store's
-- clock is told as `a <due> <topic>` (ready at that time) rather than `r <topic>`. Set-based: a
-- few statements for the whole batch, whatever its size.
CREATE OR REPLACE FUNCTION @Q@.tw_fire(p int, node text, ep bigint, skew bigint, ids text[],
  buckets int[], seg_names text[], idxs int[], OUT fired int, OUT early text[], OUT seq bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  latest float8 := @Q@.now_ms() + skew;
  f_id text[];
  f_birth boolean[];
  f_seg bigint[];
  f_idx int[];
  f_due float8[];
  f_topic text[];
  f_bucket int[];
  ords bigint[];
  topics text[];
  firsts float8[];
BEGIN
  seq := @Q@.owner_write(p, node, ep);
  IF seq IS NULL THEN RETURN; END IF;
  -- Rows locked in the order of their ids, as by every call that locks several: two calls
  -- never wait for each other's rows in turn.
  PERFORM 1 FROM @Q@.states s WHERE s.part = p AND s.id = ANY(ids) ORDER BY s.id FOR UPDATE;
  -- Each message as it stands at the place named: scheduled there by its state row, or a
  -- located one still at its birth place (its record there, no tomb).
  WITH named AS (
    SELECT DISTINCT ON (x.id) x.id, x.b, x.sn, @Q@.seg_of(x.sn) AS seg, x.i, x.k
    FROM unnest(ids, buckets, seg_names, idxs) WITH ORDINALITY AS x(id, b, sn, i, k)
    ORDER BY x.id, x.k
  ), located AS (
    SELECT array_agg(n.k) AS ks, array_agg(n.id) AS mids, array_agg(n.b) AS bs,
      array_agg(n.sn) AS sns, array_agg(n.seg) AS segs, array_agg(n.i) AS idxs
    FROM named n WHERE left(n.id, 1) = '@'
  ), stood AS (
    -- (= ANY: the rows are looked up by key in one pass, whatever the planner guesses of
    -- `named`. Records and tombs are looked up one segment at a time: records_at().)
    SELECT n.k, n.id, false AS birth, n.seg, n.i, s.due, s.topic, n.b
    FROM named n JOIN @Q@.states s ON s.part = p AND s.id = n.id AND s.id = ANY(ids)
    WHERE s.status = 'S' AND s.seg = n.seg AND s.idx = n.i
    UNION ALL
    SELECT n.k, n.id, true, n.seg, n.i, @Q@.located_due(n.rec)::float8, @Q@.record_topic(n.rec), n.b
    FROM located a, LATERAL @Q@.records_at(p, a.segs, a.idxs, true) r,
      LATERAL unnest(a.ks, a.mids, a.bs, a.sns, a.segs, a.idxs, r.recs, r.tombed)
        n(k, id, b, sn, seg, i, rec, tombed)
    WHERE NOT n.tombed AND get_byte(n.rec, 0) = 0
      AND n.id = '@' || p || '.' || n.sn || '.' || n.i || '.' || @Q@.located_tag(n.rec)
  )
  SELECT coalesce(array_agg(id ORDER BY k) FILTER (WHERE due > latest), '{}'),
    array_agg(id ORDER BY k) FILTER (WHERE due <= latest),
    array_agg(birth ORDER BY k) FILTER (WHERE due <= latest),
    array_agg(seg ORDER BY k) FILTER (WHERE due <= latest),
    array_agg(i ORDER BY k) FILTER (WHERE due <= latest),
    array_agg(due ORDER BY k) FILTER (WHERE due <= latest),
    array_agg(topic ORDER BY k) FILTER (WHERE due <= latest),
    array_agg(b ORDER BY k) FILTER (WHERE due <= latest)
  INTO early, f_id, f_birth, f_seg, f_idx, f_due, f_topic, f_bucket
  FROM stood;
  fired := 0;
  IF f_id IS NULL THEN RETURN; END IF;
  -- Ready in the order named.
  SELECT array_agg(v ORDER BY v) INTO ords
  FROM (SELECT nextval('@Q@.ready_order') AS v FROM generate_series(1, cardinality(f_id))) o;
  WITH firing AS (
    SELECT * FROM unnest(f_id, f_birth, f_seg, f_idx, f_due, f_topic, f_bucket, ords)
      AS x(id, birth, seg, idx, due, topic, b, ord)
  ), tombed AS (
    -- A located message leaves its birth here, unless another call made it leave first.
    INSERT INTO @Q@.tombs (seg, part, idx) SELECT f.seg, p, f.idx FROM firing f WHERE f.birth
    ON CONFLICT DO NOTHING RETURNING seg, idx
  ), born AS (
    INSERT INTO @Q@.states (seg, due, at, part, idx, attempts, bucket, status, id, topic)
    SELECT f.seg, f.due, f.ord, p, f.idx, 0, f.b, 'R', f.id, f.topic
    FROM firing f JOIN tombed t ON t.seg = f.seg AND t.idx = f.idx
    RETURNING topic, due
  ), moved AS (
    UPDATE @Q@.states s SET status = 'R', at = f.ord FROM firing f
    WHERE NOT f.birth AND s.part = p AND s.id = f.id AND s.id = ANY(f_id)
    RETURNING s.topic, s.due
  ), ready AS (
    SELECT x.topic, count(*) AS c, min(x.due) AS first
    FROM (SELECT topic, due FROM born UNION ALL SELECT topic, due FROM moved) x GROUP BY x.topic
  ), counted AS (
    INSERT INTO @Q@.counts (part, topic, status, n)
    SELECT p, r.topic, v.status, v.sign * r.c
    FROM ready r, (VALUES ('S'::"char", -1), ('R'::"char", 1)) AS v(status, sign)
  )
  SELECT coalesce(sum(c), 0)::int, array_agg(topic), array_agg(first)
  INTO fired, topics, firsts FROM ready;
  PERFORM @Q@.publish(p, CASE WHEN x.first <= @Q@.now_ms() THEN 'r ' || x.t
    ELSE 'a ' || ceil(x.first)::bigint || ' ' || x.t END)
  FROM unnest(topics, firsts) x(t, first);
END
$$;
