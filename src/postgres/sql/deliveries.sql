-- Deliveries: ready messages taken in flight, acked, nacked, and expired when their
-- visibility runs out.

-- Ready -> in flight for up to `most` messages of a topic, in the order they became ready,
-- with a visibility deadline by the store's clock; stops before max_bytes of records (but
-- always takes one). Rows another take holds are passed over.
CREATE OR REPLACE FUNCTION @Q@.tw_take(p int, t text, most int, visibility bigint,
  max_bytes bigint)
RETURNS TABLE (id text, attempts int, due float8, rec bytea)
LANGUAGE plpgsql AS $$
DECLARE
  deadline bigint := @Q@.now_ms() + visibility;
  bytes bigint := 0;
  taken int := 0;
  st @Q@.states;
  r bytea;
BEGIN
  FOR st IN
    SELECT * FROM @Q@.states s WHERE s.part = p AND s.topic = t AND s.status = 'R'
    ORDER BY s.at LIMIT most FOR UPDATE SKIP LOCKED
  LOOP
    SELECT x.rec INTO r FROM @Q@.records x WHERE x.seg = st.seg AND x.part = p AND x.idx = st.idx;
    EXIT WHEN taken > 0 AND bytes + octet_length(r) > max_bytes;
    bytes := bytes + octet_length(r);
    UPDATE @Q@.states s SET status = 'I', attempts = s.attempts + 1, at = deadline
      WHERE s.part = p AND s.id = st.id;
    taken := taken + 1;
    id := st.id;
    attempts := st.attempts + 1;
    due := st.due;
    rec := r;
    RETURN NEXT;
  END LOOP;
  IF taken > 0 THEN
    PERFORM @Q@.tally(p, t, 'R', -taken);
    PERFORM @Q@.tally(p, t, 'I', taken);
    -- The owner arms a timer for the new visibility deadline (store time) from this alone.
    PERFORM @Q@.publish(p, 'i ' || deadline);
  END IF;
END
$$;

-- The in-flight delivery (id, attempt), its row locked; NULL when it is not out (any more).
CREATE OR REPLACE FUNCTION @Q@.delivery(p int, mid text, attempt int) RETURNS @Q@.states
LANGUAGE sql AS $$
  SELECT * FROM @Q@.states
  WHERE part = p AND id = mid AND status = 'I' AND attempts = attempt FOR UPDATE
$$;

-- For each delivery (id, attempt), whether it was still out (and is now done).
CREATE OR REPLACE FUNCTION @Q@.tw_ack(p int, ids text[], attempts int[]) RETURNS boolean[]
LANGUAGE plpgsql AS $$
DECLARE
  st @Q@.states;
  answers boolean[] := array_fill(false, ARRAY[cardinality(ids)]);
  k int;
BEGIN
  -- Rows locked in the order of their ids, as by every call that locks several: two calls
  -- never wait for each other's rows in turn.
  PERFORM 1 FROM @Q@.states s WHERE s.part = p AND s.id = ANY(ids) ORDER BY s.id FOR UPDATE;
  FOR k IN 1..coalesce(cardinality(ids), 0) LOOP
    st := @Q@.delivery(p, ids[k], attempts[k]);
    CONTINUE WHEN st.id IS NULL;
    DELETE FROM @Q@.states s WHERE s.part = p AND s.id = st.id;
    DELETE FROM @Q@.reasons s WHERE s.part = p AND s.id = st.id;
    PERFORM @Q@.tally(p, st.topic, 'I', -1);
    PERFORM @Q@.release(p, st.seg);
    PERFORM @Q@.remember(st, 'A');
    answers[k] := true;
  END LOOP;
  RETURN answers;
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

-- In-flight deliveries whose visibility deadline is at or before upto, oldest first.
CREATE OR REPLACE FUNCTION @Q@.tw_overdue(p int, upto bigint, most int)
RETURNS TABLE (id text, bucket int, attempts int, rec bytea, due float8)
LANGUAGE sql STABLE AS $$
  SELECT s.id, s.bucket::int, s.attempts, r.rec, s.due
  FROM @Q@.states s JOIN @Q@.records r ON r.seg = s.seg AND r.part = s.part AND r.idx = s.idx
  WHERE s.part = p AND s.status = 'I' AND s.at <= upto
  ORDER BY s.at LIMIT most
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
