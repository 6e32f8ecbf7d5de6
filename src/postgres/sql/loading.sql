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
-- answer, so that an owner whose clock runs ahead cannot deliver it early.
CREATE OR REPLACE FUNCTION @Q@.tw_fire(p int, node text, ep bigint, skew bigint, ids text[],
  buckets int[], seg_names text[], idxs int[], OUT fired int, OUT early text[], OUT seq bigint)
LANGUAGE plpgsql AS $$
DECLARE
  latest bigint := @Q@.now_ms() + skew;
  cur record;
  st @Q@.states;
  topics text[] := '{}';
  k int;
BEGIN
  seq := @Q@.owner_write(p, node, ep);
  IF seq IS NULL THEN RETURN; END IF;
  fired := 0;
  early := '{}';
  -- Rows locked in the order of their ids, as by every call that locks several: two calls
  -- never wait for each other's rows in turn.
  PERFORM 1 FROM @Q@.states s WHERE s.part = p AND s.id = ANY(ids) ORDER BY s.id FOR UPDATE;
  FOR k IN 1..coalesce(cardinality(ids), 0) LOOP
    cur := @Q@.state_of(p, ids[k], buckets[k]);
    st := cur.st;
    CONTINUE WHEN st.id IS NULL OR st.status <> 'S' OR st.seg <> @Q@.seg_of(seg_names[k])
      OR st.idx <> idxs[k];
    IF st.due > latest THEN
      early := early || ids[k];
      CONTINUE;
    END IF;
    CONTINUE WHEN cur.birth AND NOT @Q@.leave_birth(st);
    st.status := 'R';
    st.at := nextval('@Q@.ready_order');
    PERFORM @Q@.save(st);
    PERFORM @Q@.tally(p, st.topic, 'S', -1);
    PERFORM @Q@.tally(p, st.topic, 'R', 1);
    IF NOT st.topic = ANY(topics) THEN topics := topics || st.topic; END IF;
    fired := fired + 1;
  END LOOP;
  PERFORM @Q@.publish(p, 'r ' || t) FROM unnest(topics) t;
END
$$;
