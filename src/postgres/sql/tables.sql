-- A queue's tables (docs/postgres.md), all in its own schema @Q@. Installed by install.ts in one
-- transaction; every statement may run again (IF NOT EXISTS), so two nodes opening at once, or a
-- node opening a queue made before, change nothing.
--
-- Segments. A record's place is (seg, part, idx). seg numbers a segment: a window w (its
-- messages due from w * windowMs) is seg = w >= 0; near segment k is seg = -1 - k. Near numbers
-- come from one sequence for the whole queue, so a near segment belongs to one partition.
-- `records` and `tombs` are partitioned by range of seg: one table holds WINDOW_SPAN windows, or
-- NEAR_SPAN near segments (segments.sql). Such a table is only ever appended to, and is dropped
-- whole once no segment in it holds a live record: space comes back at once, nothing is
-- vacuumed row by row.

CREATE TABLE IF NOT EXISTS @Q@.config (key text PRIMARY KEY, value text NOT NULL);

CREATE SEQUENCE IF NOT EXISTS @Q@.near_numbers;
-- The order in which messages became ready (states.at of status R), for every partition.
CREATE SEQUENCE IF NOT EXISTS @Q@.ready_order;
-- The order of finished ids remembered in `done`.
CREATE SEQUENCE IF NOT EXISTS @Q@.done_order;
CREATE SEQUENCE IF NOT EXISTS @Q@.sched_versions;

-- A partition's lease. born: the store's time (ms) of its first grant, '' before any.
CREATE TABLE IF NOT EXISTS @Q@.leases (
  part int PRIMARY KEY,
  owner text NOT NULL DEFAULT '',
  epoch bigint NOT NULL DEFAULT 0,
  until bigint NOT NULL DEFAULT 0,
  born text NOT NULL DEFAULT ''
);
-- The owner-write count: drawn by every owner-only change in the statement that checks its
-- epoch. A count not above one answered before means writes were lost (a failover).
CREATE SEQUENCE IF NOT EXISTS @Q@.owner_writes;

-- A partition's loaded horizon: schedules due before loaded_until go to near segment `near`.
-- A schedule holds this row FOR UPDATE: schedules of a partition, and its loads, take turns.
CREATE TABLE IF NOT EXISTS @Q@.horizons (
  part int PRIMARY KEY,
  loaded_until bigint NOT NULL DEFAULT 0,
  near bigint NOT NULL
);

-- The latest time of death (µs) in a partition: deaths get rising times, even within one call.
CREATE TABLE IF NOT EXISTS @Q@.deaths (part int PRIMARY KEY, last bigint NOT NULL DEFAULT 0);

CREATE TABLE IF NOT EXISTS @Q@.records (
  seg bigint NOT NULL,
  part int NOT NULL,
  idx int NOT NULL,
  rec bytea NOT NULL,
  PRIMARY KEY (seg, part, idx)
) PARTITION BY RANGE (seg);

-- A located record that left its birth state (fired, cancelled, moved): its place.
CREATE TABLE IF NOT EXISTS @Q@.tombs (
  seg bigint NOT NULL,
  part int NOT NULL,
  idx int NOT NULL,
  PRIMARY KEY (seg, part, idx)
) PARTITION BY RANGE (seg);

-- Per segment and partition: the next index, which is also how many records were appended.
-- Appends lock the row; releases never do (a record that stops being live, as a message's
-- current record or a located one at its birth place, is a row of `releases`): a call that
-- releases in one segment and appends in another never waits for one doing the reverse.
-- Live records of a segment: next - sum(releases.n).
CREATE TABLE IF NOT EXISTS @Q@.segments (
  seg bigint NOT NULL,
  part int NOT NULL,
  next int NOT NULL DEFAULT 0,
  PRIMARY KEY (seg, part)
);
CREATE INDEX IF NOT EXISTS segments_by_part ON @Q@.segments (part, seg);
CREATE TABLE IF NOT EXISTS @Q@.releases (seg bigint NOT NULL, part int NOT NULL, n int NOT NULL);
CREATE INDEX IF NOT EXISTS releases_by_seg ON @Q@.releases (seg, part);

-- A message's state, for every message with an id and every located one past its birth.
-- at: for R the ready order, for I the visibility deadline (ms), for D the time of death (µs).
CREATE TABLE IF NOT EXISTS @Q@.states (
  seg bigint NOT NULL,
  due float8 NOT NULL,
  at bigint NOT NULL DEFAULT 0,
  part int NOT NULL,
  idx int NOT NULL,
  attempts int NOT NULL DEFAULT 0,
  bucket smallint NOT NULL,
  status "char" NOT NULL,
  id text NOT NULL,
  topic text NOT NULL,
  PRIMARY KEY (part, id)
);
CREATE INDEX IF NOT EXISTS states_ready ON @Q@.states (part, topic, at) WHERE status = 'R';
CREATE INDEX IF NOT EXISTS states_inflight ON @Q@.states (part, at) WHERE status = 'I';
CREATE INDEX IF NOT EXISTS states_dead ON @Q@.states (part, topic, at) WHERE status = 'D';

-- Live messages per partition, topic and status: the sum of n. Only ever inserted (no call
-- waits for another's count), folded into one row each by reap().
CREATE TABLE IF NOT EXISTS @Q@.counts (
  part int NOT NULL,
  topic text NOT NULL,
  status "char" NOT NULL,
  n bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS counts_by_part ON @Q@.counts (part, topic, status);

-- Finished messages (A acked, C cancelled), the latest DONE_KEPT of a partition, for get().
CREATE TABLE IF NOT EXISTS @Q@.done (
  part int NOT NULL,
  id text NOT NULL,
  status "char" NOT NULL,
  due float8 NOT NULL,
  attempts int NOT NULL,
  topic text NOT NULL,
  n bigint NOT NULL,
  PRIMARY KEY (part, id)
);
CREATE INDEX IF NOT EXISTS done_by_order ON @Q@.done (part, n);

CREATE TABLE IF NOT EXISTS @Q@.reasons (
  part int NOT NULL,
  id text NOT NULL,
  reason text NOT NULL,
  PRIMARY KEY (part, id)
);

-- An occurrence of a recurring schedule, made at most once while its mark lives (until, ms).
CREATE TABLE IF NOT EXISTS @Q@.once_marks (
  part int NOT NULL,
  id text NOT NULL,
  until bigint NOT NULL,
  PRIMARY KEY (part, id)
);

CREATE TABLE IF NOT EXISTS @Q@.members (node text PRIMARY KEY, until bigint NOT NULL);

-- A rate-limited topic's token bucket; gone (as if absent) from `expires` on, when full again.
CREATE TABLE IF NOT EXISTS @Q@.buckets (
  topic text PRIMARY KEY,
  tokens float8 NOT NULL,
  at bigint NOT NULL,
  rate text NOT NULL,
  burst text NOT NULL,
  expires bigint NOT NULL
);

-- Topics' settings (kind 'settings', field '<topic>|<name>') and push targets ('push', topic).
CREATE TABLE IF NOT EXISTS @Q@.topic_fields (
  kind text NOT NULL,
  field text NOT NULL,
  value text NOT NULL,
  PRIMARY KEY (kind, field)
);

-- Recurring schedules' records; config 'schedChanges' moves with every put and del.
INSERT INTO @Q@.config (key, value) VALUES ('schedChanges', '0') ON CONFLICT (key) DO NOTHING;
CREATE TABLE IF NOT EXISTS @Q@.sched (
  name text PRIMARY KEY,
  version bigint NOT NULL,
  record text NOT NULL
);
-- Their count, kept by tw_sched (recurring.sql); counted again here, with the changes held
-- (each takes the schedChanges row first).
SELECT 1 FROM @Q@.config WHERE key = 'schedChanges' FOR UPDATE;
INSERT INTO @Q@.config (key, value) SELECT 'schedCount', count(*)::text FROM @Q@.sched
ON CONFLICT (key) DO UPDATE SET value = excluded.value;
