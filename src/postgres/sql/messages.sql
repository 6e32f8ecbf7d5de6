-- A partition's messages as producers and the queue's users change them: schedule, get,
-- cancel, reschedule, requeue, and a message's record.
--
-- A message due before the partition's loaded_until goes to its current near segment (the
-- owner has loaded that stretch of time) and the channel says so: 'n <segment> <index of the
-- first> <id> <bucket> <deliverAt> ...' (bucket '-' for a located id), enough for the owner to
-- arm them without reading the segment, or 'n' alone when that would not fit a notification.
-- One due later goes to a segment of its window (window_seg: its level by how far ahead it is),
-- which nobody reads until the owner loads it.

-- Schedules a batch, in order: one entry per record k. ids[k] NULL: a record of run runs[k]
-- (1-based, located, placed by the store); else a message with an id, due at dues[k] in window
-- wins[k] of topic topics[k]. Runs: their window, earliest and latest due, topic.
-- -> {existing: per message with an id, null (created) or the due time of the pending one;
--     loadedUntil; where: per run [segment, first index], two for a run straddling
--     loadedUntil (near first; -1 for a part with none)}
-- `make`: a segment whose table is not there has it made here; else nothing is done and the
-- call fails with SQLSTATE TW001, those segments in its DETAIL, for the caller to make them in
-- a transaction of their own (hold_span) and call again. Making a table locks `records`
-- whole until the transaction ends: every other call waits behind a schedule that made one.
-- Generic plans: the custom plans of its small statements cost more to make than to run
-- (a custom plan a call made a one-message schedule 20% slower).
CREATE OR REPLACE FUNCTION @Q@.tw_schedule(p int, ids text[], buckets int[], dues float8[],
  wins bigint[], topics text[], recs bytea[], runs int[], run_wins bigint[],
  run_earliest float8[], run_latest float8[], run_topics text[], make boolean)
RETURNS jsonb
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  h @Q@.horizons;
  near bigint;
  n int := cardinality(recs);
  prior float8[];
  target bigint[] := array_fill(NULL::bigint, ARRAY[n]);
  idx int[] := array_fill(NULL::int, ARRAY[n]);
  segs bigint[];
  nexts int[];
  j int;
  at int;
  note text := '';
  note_first int;
  existing jsonb;
  places jsonb;
  now_win bigint := @Q@.now_window();
  run_segs bigint[];
  -- Whether any record has an id (a batch of located records only skips the statements for ids).
  with_ids boolean := coalesce(cardinality(array_remove(ids, NULL)) > 0, false);
  missing text;
BEGIN
  IF cardinality(ids) <> n OR cardinality(runs) <> n OR cardinality(dues) <> n
      OR cardinality(wins) <> n OR cardinality(topics) <> n OR cardinality(buckets) <> n THEN
    RAISE EXCEPTION 'tickwheel: tw_schedule expects one id, bucket, due, window, topic and run per record'
      USING ERRCODE = '22023';
  END IF;
  SELECT * INTO h FROM @Q@.horizons WHERE part = p FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'tickwheel: no partition %', p USING ERRCODE = '22023';
  END IF;
  near := -1 - h.near;
  -- (Expressions without a statement where they can be: each statement of a PL/pgSQL function
  -- costs an executor start, most of what a small batch costs.)
  IF cardinality(run_wins) = 1 THEN
    run_segs := ARRAY[@Q@.window_seg(run_wins[1], now_win)];
  ELSIF cardinality(run_wins) > 1 THEN
    SELECT array_agg(@Q@.window_seg(w, now_win) ORDER BY k) INTO run_segs
    FROM unnest(run_wins) WITH ORDINALITY AS x(w, k);
  END IF;
  -- Per message with an id: the due time of the pending one (stored, or earlier in the batch).
  IF with_ids THEN
    SELECT array_agg(CASE WHEN m.id IS NULL THEN NULL
        ELSE coalesce(s.due, CASE WHEN f.k1 = m.k THEN NULL ELSE f.due1 END) END ORDER BY m.k)
    INTO prior
    FROM unnest(ids, dues) WITH ORDINALITY AS m(id, due, k)
    LEFT JOIN (SELECT DISTINCT ON (id) id, k AS k1, due AS due1
               FROM unnest(ids, dues) WITH ORDINALITY AS x(id, due, k)
               WHERE id IS NOT NULL ORDER BY id, k) f ON f.id = m.id
    LEFT JOIN @Q@.states s ON s.part = p AND s.id = m.id AND s.id = ANY(ids);
  ELSE
    prior := array_fill(NULL::float8, ARRAY[n]);
  END IF;
  FOR k IN 1..n LOOP
    j := runs[k];
    IF ids[k] IS NOT NULL THEN
      IF prior[k] IS NULL THEN
        target[k] := CASE WHEN dues[k] < h.loaded_until THEN near
          ELSE @Q@.window_seg(wins[k], now_win) END;
      END IF;
    ELSIF run_latest[j] < h.loaded_until THEN
      target[k] := near;
    ELSIF run_earliest[j] >= h.loaded_until THEN
      target[k] := run_segs[j];
    ELSE
      -- Straddling: the part due before loaded_until goes near, the rest to the window.
      target[k] := CASE WHEN @Q@.located_due(recs[k])::float8 < h.loaded_until
        THEN near ELSE run_segs[j] END;
    END IF;
    IF target[k] < 0 AND target[k] <> near THEN
      RAISE EXCEPTION 'tickwheel: a window before 1970' USING ERRCODE = '22023';
    END IF;
  END LOOP;
  -- Segments in order, so that two batches never wait for each other's rows in turn.
  SELECT array_agg(s ORDER BY s), array_agg(c ORDER BY s) INTO segs, nexts
  FROM (SELECT t AS s, count(*)::int AS c FROM unnest(target) t WHERE t IS NOT NULL GROUP BY t) g;
  IF NOT make THEN
    FOR i IN 1..coalesce(cardinality(segs), 0) LOOP
      IF to_regclass(format('%I.%I', @S@, 'records_' || (@Q@.span_of(segs[i])).suffix)) IS NULL
      THEN
        missing := concat_ws(',', missing, segs[i]);
      END IF;
    END LOOP;
    IF missing IS NOT NULL THEN
      RAISE EXCEPTION 'tickwheel: tables of segments % not made yet', missing
        USING ERRCODE = 'TW001', DETAIL = missing;
    END IF;
  END IF;
  FOR i IN 1..coalesce(cardinality(segs), 0) LOOP
    nexts[i] := @Q@.reserve(p, segs[i], nexts[i]);
  END LOOP;
  FOR k IN 1..n LOOP
    CONTINUE WHEN target[k] IS NULL;
    at := array_position(segs, target[k]);
    idx[k] := nexts[at];
    nexts[at] := nexts[at] + 1;
    -- The first index near, for the note (indexes of a segment rise with k).
    IF target[k] = near AND note_first IS NULL THEN note_first := idx[k]; END IF;
  END LOOP;
  INSERT INTO @Q@.records (seg, part, idx, rec)
  SELECT t, p, i, r FROM unnest(target, idx, recs) AS x(t, i, r) WHERE t IS NOT NULL;
  IF with_ids THEN
    INSERT INTO @Q@.states (seg, due, part, idx, bucket, status, id, topic)
    SELECT t, d, p, i, b, 'S', id, tp FROM unnest(target, idx, dues, buckets, ids, topics)
      AS x(t, i, d, b, id, tp)
    WHERE t IS NOT NULL AND id IS NOT NULL;
  END IF;
  PERFORM @Q@.tally(p, tp, 'S', c) FROM (
    SELECT coalesce(run_topics[r], tp) AS tp, count(*) AS c
    FROM unnest(target, runs, topics) AS x(t, r, tp) WHERE t IS NOT NULL GROUP BY 1) g;
  -- The owner arms what the note names without reading the segment.
  IF note_first IS NOT NULL THEN
    SELECT string_agg(CASE WHEN id IS NOT NULL THEN id || ' ' || b || ' ' || d::text
        ELSE '@' || p || '.' || @Q@.seg_name(near) || '.' || i || '.' || @Q@.located_tag(r)
          || ' - ' || @Q@.located_due(r) END, ' ' ORDER BY i)
    INTO note
    FROM unnest(target, idx, ids, buckets, dues, recs) AS x(t, i, id, b, d, r) WHERE t = near;
    note := 'n ' || @Q@.seg_name(near) || ' ' || note_first || ' ' || note;
    IF octet_length(note) > @NOTE_BYTES@ THEN note := 'n'; END IF;
    PERFORM @Q@.publish(p, note);
  END IF;
  -- Per run, in order: where its first record went, near and/or in its window's segment (both,
  -- -1 for a part with none, when it straddles loadedUntil or has none). One statement for all
  -- runs: a batch spread over many windows has a run a message.
  SELECT coalesce(jsonb_agg(CASE
      WHEN (g.fn IS NULL) = (g.ff IS NULL) THEN jsonb_build_array(@Q@.seg_name(near),
        coalesce(g.fn, -1), @Q@.seg_name(run_segs[g.r]), coalesce(g.ff, -1))
      WHEN g.fn IS NOT NULL THEN jsonb_build_array(@Q@.seg_name(near), g.fn)
      ELSE jsonb_build_array(@Q@.seg_name(run_segs[g.r]), g.ff) END ORDER BY g.r), '[]')
  INTO places
  FROM (SELECT n.r, f.fn, f.ff
        FROM generate_series(1, coalesce(cardinality(run_wins), 0)) AS n(r)
        LEFT JOIN (SELECT x.rn, min(x.i) FILTER (WHERE x.t = near) AS fn,
                     min(x.i) FILTER (WHERE x.t <> near) AS ff
                   FROM unnest(target, idx, runs) AS x(t, i, rn) GROUP BY x.rn) f
          ON f.rn = n.r) g;
  existing := '[]';
  IF with_ids THEN
    SELECT coalesce(jsonb_agg(to_jsonb(x.due) ORDER BY x.k), '[]') INTO existing
    FROM unnest(ids, prior) WITH ORDINALITY AS x(id, due, k) WHERE x.id IS NOT NULL;
  END IF;
  RETURN jsonb_build_object('existing', existing, 'loadedUntil', h.loaded_until, 'where', places);
END
$$;

-- A live message's state, or a recently finished one's: [status, due, attempts, topic].
CREATE OR REPLACE FUNCTION @Q@.tw_get(p int, mid text, b int) RETURNS text[]
LANGUAGE plpgsql STABLE AS $$
DECLARE
  st @Q@.states;
  d @Q@.done;
BEGIN
  SELECT * INTO st FROM @Q@.states WHERE part = p AND id = mid;
  IF NOT FOUND AND left(mid, 1) = '@' THEN st := @Q@.birth_state(p, mid, b); END IF;
  IF st.id IS NOT NULL THEN
    RETURN ARRAY[st.status::text, st.due::text, st.attempts::text, st.topic];
  END IF;
  SELECT * INTO d FROM @Q@.done WHERE part = p AND id = mid;
  IF NOT FOUND THEN RETURN NULL; END IF;
  RETURN ARRAY[d.status::text, d.due::text, d.attempts::text, d.topic];
END
$$;

-- A live or dead message's record, with the due time its state holds.
CREATE OR REPLACE FUNCTION @Q@.tw_record(p int, mid text, b int, OUT due float8, OUT rec bytea)
LANGUAGE plpgsql STABLE AS $$
DECLARE
  st @Q@.states;
BEGIN
  SELECT * INTO st FROM @Q@.states WHERE part = p AND id = mid;
  IF NOT FOUND AND left(mid, 1) = '@' THEN st := @Q@.birth_state(p, mid, b); END IF;
  IF st.id IS NULL THEN RETURN; END IF;
  due := st.due;
  SELECT r.rec INTO rec FROM @Q@.records r WHERE seg = st.seg AND part = p AND idx = st.idx;
END
$$;

-- Cancels a live message (scheduled, ready, in flight or dead): what it was, or nothing.
CREATE OR REPLACE FUNCTION @Q@.tw_cancel(p int, mid text, b int,
  OUT topic text, OUT due float8, OUT attempts int)
LANGUAGE plpgsql AS $$
DECLARE
  cur record := @Q@.state_of(p, mid, b);
  st @Q@.states := cur.st;
BEGIN
  IF st.id IS NULL THEN RETURN; END IF;
  IF cur.birth THEN
    IF NOT @Q@.leave_birth(st) THEN RETURN; END IF;
  ELSE
    DELETE FROM @Q@.states s WHERE s.part = p AND s.id = mid;
    DELETE FROM @Q@.reasons s WHERE s.part = p AND s.id = mid;
  END IF;
  -- A cancelled occurrence of a recurring schedule may be made again.
  DELETE FROM @Q@.once_marks m WHERE m.part = p AND m.id = mid;
  PERFORM @Q@.tally(p, st.topic, st.status, -1);
  PERFORM @Q@.release(p, st.seg);
  PERFORM @Q@.remember(st, 'C');
  topic := st.topic;
  due := st.due;
  attempts := st.attempts;
END
$$;

-- reschedule: a scheduled (or ready) message due at `due`; requeue: a dead one, attempts 0.
CREATE OR REPLACE FUNCTION @Q@.tw_move(kind text, p int, mid text, b int, due float8, win bigint)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  cur record := @Q@.state_of(p, mid, b);
  st @Q@.states := cur.st;
  was "char" := st.status;
  moved record;
BEGIN
  IF st.id IS NULL THEN RETURN false; END IF;
  IF kind = 'reschedule' AND st.status NOT IN ('S', 'R') OR kind = 'requeue' AND st.status <> 'D'
      OR kind NOT IN ('reschedule', 'requeue') THEN
    RETURN false;
  END IF;
  IF cur.birth AND NOT @Q@.leave_birth(st) THEN RETURN false; END IF;
  moved := @Q@.relocate(st, due, win);
  st := moved.st;
  st.status := 'S';
  st.at := 0;
  IF kind = 'requeue' THEN st.attempts := 0; END IF;
  PERFORM @Q@.save(st);
  IF was <> 'S' THEN
    PERFORM @Q@.tally(p, st.topic, was, -1);
    PERFORM @Q@.tally(p, st.topic, 'S', 1);
  END IF;
  IF moved.tell THEN PERFORM @Q@.publish(p, 'n'); END IF;
  RETURN true;
END
$$;
