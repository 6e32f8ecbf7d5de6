-- Message states (tables.sql, `states`), the helpers every message function uses.
--
-- A message scheduled without an id has a located id, '@<partition>.<segment>.<index>.<tag>',
-- made from where its record went (src/partitioned/record.ts). While it waits there it has no state
-- row: it is scheduled unless its place is in `tombs`, and its record carries its tag, due
-- time and topic. It gets a tomb whenever it leaves that state (fired, cancelled, moved), and
-- from then on a state row like any other message.

-- The state of a located id still at its birth place (birth = true), or nothing.
CREATE OR REPLACE FUNCTION @Q@.birth_state(p int, mid text, b int) RETURNS @Q@.states
LANGUAGE plpgsql STABLE AS $$
DECLARE
  m text[] := regexp_match(mid,
    '^@(0|[1-9][0-9]{0,4})\.([nw](?:0|[1-9][0-9]{0,15}))\.(0|[1-9][0-9]{0,8})\.([A-Za-z0-9_-]{1,16})$');
  s bigint;
  i int;
  r bytea;
  st @Q@.states;
BEGIN
  IF m IS NULL OR m[1]::int <> p THEN RETURN NULL; END IF;
  s := @Q@.seg_of(m[2]);
  i := m[3]::int;
  SELECT rec INTO r FROM @Q@.records WHERE seg = s AND part = p AND idx = i;
  IF r IS NULL OR get_byte(r, 0) <> 0 OR @Q@.located_tag(r) <> m[4] THEN RETURN NULL; END IF;
  IF EXISTS (SELECT 1 FROM @Q@.tombs WHERE seg = s AND part = p AND idx = i) THEN
    RETURN NULL;
  END IF;
  st.seg := s; st.idx := i; st.part := p; st.id := mid; st.bucket := b;
  st.due := @Q@.located_due(r)::float8; st.at := 0; st.attempts := 0; st.status := 'S';
  st.topic := @Q@.record_topic(r);
  RETURN st;
END
$$;

-- A message's state, its row locked for the rest of the transaction; `birth`: a located
-- message at its birth place (no row). NULL when it has none.
CREATE OR REPLACE FUNCTION @Q@.state_of(p int, mid text, b int, OUT st @Q@.states, OUT birth boolean)
LANGUAGE plpgsql AS $$
BEGIN
  birth := false;
  SELECT * INTO st FROM @Q@.states WHERE part = p AND id = mid FOR UPDATE;
  IF FOUND THEN RETURN; END IF;
  st := NULL;
  IF left(mid, 1) = '@' THEN
    st := @Q@.birth_state(p, mid, b);
    birth := st.id IS NOT NULL;
  END IF;
END
$$;

-- A located message leaves its birth state: false when another call made it leave first (the
-- caller then leaves it alone).
CREATE OR REPLACE FUNCTION @Q@.leave_birth(st @Q@.states) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  n int;
BEGIN
  INSERT INTO @Q@.tombs (seg, part, idx) VALUES (st.seg, st.part, st.idx) ON CONFLICT DO NOTHING;
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n = 1;
END
$$;

CREATE OR REPLACE FUNCTION @Q@.tally(p int, t text, s "char", k bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO @Q@.counts (part, topic, status, n) VALUES (p, t, s, k);
END
$$;

-- A finished message (A or C) is remembered for get(): the latest @DONE_KEPT@ of a partition.
CREATE OR REPLACE FUNCTION @Q@.remember(st @Q@.states, s "char") RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  ord bigint := nextval('@Q@.done_order');
BEGIN
  INSERT INTO @Q@.done AS d (part, id, status, due, attempts, topic, n)
  VALUES (st.part, st.id, s, st.due, st.attempts, st.topic, ord)
  ON CONFLICT (part, id) DO UPDATE SET status = s, due = st.due, attempts = st.attempts,
    topic = st.topic, n = excluded.n;
  IF ord % 64 = 0 THEN PERFORM @Q@.trim_done(st.part); END IF;
END
$$;

-- Forgets a partition's finished messages but the latest @DONE_KEPT@.
CREATE OR REPLACE FUNCTION @Q@.trim_done(p int) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM @Q@.done x WHERE x.part = p AND x.n < (
    SELECT d.n FROM @Q@.done d WHERE d.part = p ORDER BY d.n DESC OFFSET @DONE_KEPT@ - 1 LIMIT 1);
END
$$;

-- The partition's event channel: "<partition> <event>".
CREATE OR REPLACE FUNCTION @Q@.publish(p int, event text) RETURNS void
LANGUAGE sql AS $$
  SELECT pg_notify(@CHANNEL@, p || ' ' || event)
$$;

-- Copies a message's record to where `due` belongs and points its state there (the caller
-- saves the state; a located message left its birth before). True when the owner must hear of
-- it: the old or the new place is inside the loaded horizon.
CREATE OR REPLACE FUNCTION @Q@.relocate(INOUT st @Q@.states, due float8, win bigint,
  OUT tell boolean)
LANGUAGE plpgsql AS $$
DECLARE
  h @Q@.horizons;
  r bytea;
  s bigint;
BEGIN
  SELECT * INTO h FROM @Q@.horizons WHERE part = st.part FOR SHARE;
  s := CASE WHEN due < h.loaded_until THEN -1 - h.near
    ELSE @Q@.window_seg(win, @Q@.now_window()) END;
  IF s < 0 AND due >= h.loaded_until THEN
    RAISE EXCEPTION 'tickwheel: window % is before 1970', win USING ERRCODE = '22023';
  END IF;
  -- The target's table is made (if it must be) before the old record is read: making one locks
  -- `records` whole, and a transaction that read it first can deadlock with another doing the
  -- same (PostgreSQL then cancels one, answered as ERR_TICKWHEEL_UNAVAILABLE).
  PERFORM @Q@.hold_span(s);
  SELECT rec INTO r FROM @Q@.records WHERE seg = st.seg AND part = st.part AND idx = st.idx;
  tell := st.due < h.loaded_until OR due < h.loaded_until;
  r := @Q@.with_id(r, st.id, st.bucket);
  PERFORM @Q@.release(st.part, st.seg);
  st.idx := @Q@.append(st.part, s, r);
  st.seg := s;
  st.due := due;
END
$$;

-- Saves a state (insert or update of its row).
CREATE OR REPLACE FUNCTION @Q@.save(st @Q@.states) RETURNS void
LANGUAGE sql AS $$
  INSERT INTO @Q@.states SELECT (st).*
  ON CONFLICT (part, id) DO UPDATE SET seg = st.seg, due = st.due, at = st.at, idx = st.idx,
    attempts = st.attempts, bucket = st.bucket, status = st.status, topic = st.topic
$$;

-- A delivery failed: scheduled again at `due`, or dead once its attempts reach the record's
-- maxAttempts. 'retry' or 'dead'.
CREATE OR REPLACE FUNCTION @Q@.fail(st @Q@.states, due float8, win bigint, reason text)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  r bytea;
  moved record;
  died bigint;
BEGIN
  PERFORM @Q@.tally(st.part, st.topic, 'I', -1);
  IF reason <> '' THEN
    INSERT INTO @Q@.reasons AS x (part, id, reason) VALUES (st.part, st.id, reason)
    ON CONFLICT (part, id) DO UPDATE SET reason = excluded.reason;
  END IF;
  SELECT rec INTO r FROM @Q@.records WHERE seg = st.seg AND part = st.part AND idx = st.idx;
  IF st.attempts >= @Q@.max_attempts(r) THEN
    INSERT INTO @Q@.deaths AS d (part, last)
    VALUES (st.part, floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint)
    ON CONFLICT (part) DO UPDATE SET last = greatest(d.last + 1, excluded.last)
    RETURNING last INTO died;
    st.status := 'D';
    st.at := died;
    PERFORM @Q@.save(st);
    PERFORM @Q@.tally(st.part, st.topic, 'D', 1);
    RETURN 'dead';
  END IF;
  moved := @Q@.relocate(st, due, win);
  st := moved.st;
  st.status := 'S';
  st.at := 0;
  PERFORM @Q@.save(st);
  PERFORM @Q@.tally(st.part, st.topic, 'S', 1);
  IF moved.tell THEN PERFORM @Q@.publish(st.part, 'n'); END IF;
  RETURN 'retry';
END
$$;
