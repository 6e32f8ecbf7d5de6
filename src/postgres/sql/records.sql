-- Reading the head of a record (the bytes a node encodes, src/partitioned/record.ts): the store
-- treats a record as opaque but for these fields, which never move. Offsets are 0-based, as
-- get_byte counts; substring counts from 1. Plain SQL, not STRICT, and STABLE where they use
-- convert_from/convert_to (which are): so PostgreSQL inlines them into the statements that
-- call them (a NULL record gives NULL all the same).
--
--   idLength u8 | id | bucket u16 | maxAttempts u16 | backoff u8 | [f64 x 0..3] |
--   payloadKind u8 | topicLength u8 | topic | ...
--   located: 0 u8 | tagLength u8 | tag | dueLength u8 | deliverAt (decimal) | maxAttempts ...

-- Where maxAttempts starts.
CREATE OR REPLACE FUNCTION @Q@.attempts_at(rec bytea) RETURNS int
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN get_byte(rec, 0) = 0
    THEN 3 + get_byte(rec, 1) + get_byte(rec, 2 + get_byte(rec, 1))
    ELSE 3 + get_byte(rec, 0) END
$$;

CREATE OR REPLACE FUNCTION @Q@.max_attempts(rec bytea) RETURNS int
LANGUAGE sql IMMUTABLE AS $$
  SELECT get_byte(rec, @Q@.attempts_at(rec)) + 256 * get_byte(rec, @Q@.attempts_at(rec) + 1)
$$;

CREATE OR REPLACE FUNCTION @Q@.located_tag(rec bytea) RETURNS text
LANGUAGE sql STABLE AS $$
  SELECT convert_from(substring(rec FROM 3 FOR get_byte(rec, 1)), 'LATIN1')
$$;

-- A located record's deliverAt, as the node wrote it.
CREATE OR REPLACE FUNCTION @Q@.located_due(rec bytea) RETURNS text
LANGUAGE sql STABLE AS $$
  SELECT convert_from(
    substring(rec FROM 4 + get_byte(rec, 1) FOR get_byte(rec, 2 + get_byte(rec, 1))), 'LATIN1')
$$;

-- Where the topic's length is: after the back-off flags (1 + one f64 per flag set:
-- fixed/exponential, +4 jitter, +8 maxDelayMs) and the payload kind, from maxAttempts at `at`.
CREATE OR REPLACE FUNCTION @Q@.topic_at(rec bytea, at int) RETURNS int
LANGUAGE sql IMMUTABLE AS $$
  SELECT at + 4 + 8 * CASE WHEN get_byte(rec, at + 2) % 4 = 0 THEN 0
    ELSE 1 + (get_byte(rec, at + 2) / 4) % 2 + (get_byte(rec, at + 2) / 8) % 2 END
$$;

CREATE OR REPLACE FUNCTION @Q@.record_topic(rec bytea) RETURNS text
LANGUAGE sql STABLE AS $$
  SELECT convert_from(substring(rec FROM @Q@.topic_at(rec, @Q@.attempts_at(rec)) + 2
    FOR get_byte(rec, @Q@.topic_at(rec, @Q@.attempts_at(rec)))), 'LATIN1')
$$;

-- A located record copied away from its place gets its id and bucket written in (it can no
-- longer be found by where it is); any other record is returned as it is.
CREATE OR REPLACE FUNCTION @Q@.with_id(rec bytea, mid text, bucket int) RETURNS bytea
LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN get_byte(rec, 0) <> 0 THEN rec ELSE
    set_byte('\x00'::bytea, 0, octet_length(mid)) || convert_to(mid, 'LATIN1')
      || set_byte(set_byte('\x0000'::bytea, 0, bucket % 256), 1, bucket / 256)
      || substring(rec FROM @Q@.attempts_at(rec) + 1)
  END
$$;
