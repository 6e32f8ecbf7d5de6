/**
 * The partitioned engine's store (docs/architecture.md, "Partitioned backends"): what a node of
 * a queue spread over partitions asks of the database that holds them. Valkey/Redis
 * (src/cluster/) and PostgreSQL implement it; the engine (this folder) never names a key, a
 * table or a command. Every call is atomic on its own: a change is made whole or not at all.
 *
 * Places. A partition's messages are in segments: `w<window>` holds those scheduled for one
 * window (due from window * windowMs, before the next) once that window is past the partition's
 * `loadedUntil`; `n<k>` (near) those scheduled below it. A record's place is (segment, index),
 * its index counted from 0 in schedule order; a place is never reused while the segment lives.
 * A message's state: S scheduled, R ready, I in flight, D dead (A acked and C cancelled for a
 * while after they end).
 *
 * Owner-only calls (load, fire, expire, a recurring save) carry the caller's `Owner`, and answer
 * undefined (or `fenced`) when it no longer holds the partition's lease under that epoch: the
 * check is made in the same atomic step as the change. Each answers the partition's owner-write
 * count (`seq`), which only grows: a count not above one seen before means writes were lost.
 *
 * Events: each partition publishes short texts that its owner and the consumers subscribe to:
 * `r <topic>` messages of a topic became ready; `a <at> <topic>` messages of a topic fired ahead
 * of their due time are ready at `at` (a store whose takes hand out only messages due by the
 * caller's clock; told also by its take, on this node only, when a take left some for that);
 * `n` a near segment grew; `n <seg> <index> (<id>
 * <bucket or -> <deliverAt>)...` what a schedule appended to a near segment from that index;
 * `i <deadline>` deliveries taken, visible again at that time; `i` in-flight deliveries changed.
 * Events may be lost: the engine polls as well.
 */

import { TickwheelUnavailableError } from '../errors.js';
import type { MessageInfo, TransactionClient } from '../queue/types.js';
import type { RateLimit } from '../queue/topics.js';

/** The caller of an owner-only call: a node, under the epoch of its lease. */
export type Owner = { node: string; epoch: number };

/** The letters of the live statuses in the partitions' counts (scheduled, ready, in flight, dead). */
export const STATUS_LETTERS = ['S', 'R', 'I', 'D'] as const;

/**
 * A window's segments are numbered `level * WINDOW_LEVEL_STRIDE + window`: a store that keeps
 * records of far windows in tables of their own (PostgreSQL) has levels above 0, Valkey none.
 */
export const WINDOW_LEVEL_STRIDE = 2 ** 44;

/** The window a window segment's number belongs to. */
export function windowOfSegment(segment: number): number {
  return segment % WINDOW_LEVEL_STRIDE;
}

/** A message's id and its id bucket in its partition (record.ts, placeOf). */
export type Id = { id: string; bucket: number };

/** A message by its id, in its partition. */
export type At = Id & { partition: number };

/** A delivery of a message, named by its attempt (as a receipt names it). */
export type Delivery = Id & { attempt: number };

/** A delivery failed: scheduled again at `due` (in `window`), or dead. */
export type Retry = Delivery & { due: number; window: number };

/** One scheduling of a message: where its record is. */
export type Placed = Id & { seg: string; index: number };

/** A message with an id to schedule, in `window` (floor(deliverAt / windowMs)). */
export type ToSchedule = Id & { deliverAt: number; window: number; topic: string; record: Buffer };

/**
 * Messages without ids of one window and topic, due from `earliest` to `latest`: the store
 * places them and answers where (ScheduleAnswer.where), which makes their located ids.
 */
export type LocatedRun = {
  window: number;
  earliest: number;
  latest: number;
  topic: string;
  records: Buffer[];
};

/** A partition's schedule call: messages and runs, written in this order. */
export type ScheduleEntry = ({ kind: 'message' } & ToSchedule) | ({ kind: 'run' } & LocatedRun);

export interface ScheduleAnswer {
  /** Per message with an id: undefined if created, else the due time of the one pending. */
  existing: ReadonlyArray<number | undefined>;
  /** With runs: the partition's loadedUntil, by which a straddling run's parts are told apart. */
  loadedUntil: number;
  /** Per run, its segment and first index; two for a run straddling loadedUntil (near first). */
  where: Array<{ segment: string; first: number }>;
}

/** A live message's stored parts, as read back for the owner, a list or the consumer. */
export interface StoredRow {
  id: string;
  index: number;
  /** S R I D (A C while they linger). */
  status: string;
  deliverAt: number;
  attempts: number;
  record: Buffer;
}

/**
 * A change of a recurring schedule's record, made only if its version is still `version`. A put
 * of a name that has no record is made only while fewer than `most` records exist.
 */
export type SchedChange =
  | { op: 'put'; name: string; version: number; record: string; most: number }
  | { op: 'del'; name: string; version: number }
  | { op: 'save'; name: string; version: number; record: string; by: Owner };

/**
 * `done`, with the new version (0: deleted); else `version` is the current one (changed
 * meanwhile), or `fenced` (a save by a node that no longer holds partition 0), or `full`: the
 * records counted when a put of a new name found `most` or more (`version` 0).
 */
export type SchedAnswer = { done: boolean; fenced: boolean; version: number; full?: number };

/** Topics' settings (`<topic>|paused`, `<topic>|rateLimit`: JSON) or push targets (topic: JSON). */
export type TopicFields = 'settings' | 'push';

export interface PartitionDriver {
  /** The queue's fixed settings, as the first node wrote them (these if none did). */
  config(partitions: number, windowMs: number): Promise<{ partitions: number; windowMs: number }>;
  /** `node` a member for `ttlMs` more (0: it leaves); answers the members, sorted. */
  heartbeat(node: string, ttlMs: number): Promise<string[]>;
  /** Up to `want` tokens of a topic's bucket (`want` < 0 gives them back). */
  tokens(
    topic: string,
    limit: RateLimit,
    want: number,
  ): Promise<{ granted: number; retryInMs: number }>;
  /** The stored fields of topics' settings or push targets, and a name for errors about them. */
  topicFields(kind: TopicFields): Promise<{ where: string; fields: Record<string, string> }>;
  /** Sets and clears fields of topics' settings or push targets, durably (`what`: for errors). */
  setTopicFields(
    kind: TopicFields,
    set: Record<string, string>,
    clear: string[],
    what: string,
  ): Promise<void>;

  /**
   * Renews several of `node`'s leases in one round trip, each under its epoch: the partitions
   * renewed. Optional: without it, each is renewed by lease().
   */
  renewMany?(
    node: string,
    held: ReadonlyArray<{ partition: number; epoch: number }>,
    leaseMs: number,
  ): Promise<number[]>;

  /**
   * A partition's lease: acquire (a new epoch, whatever `by.epoch` says), renew or release.
   * `born`: the store's time of the partition's first grant ('' before any); a change means its
   * data was lost.
   */
  lease(
    partition: number,
    op: 'acquire' | 'renew' | 'release',
    by: Owner,
    leaseMs: number,
  ): Promise<{ granted: boolean; epoch: number; born: string }>;
  /** Whether a lease grant just made will outlive a failover of the store (within `timeoutMs`). */
  grantKept(partition: number, timeoutMs: number): Promise<boolean>;
  /**
   * The lease holder of each of partitions 0 .. `partitions` - 1 and its lease's end by the
   * store's clock ('' and 0: none).
   */
  leaseHolders(partitions: number): Promise<Array<{ owner: string; until: number }>>;

  schedule(partition: number, entries: readonly ScheduleEntry[]): Promise<ScheduleAnswer>;
  /**
   * schedule() as a statement of the caller's open transaction (`client`): the records and
   * their events exist from its commit, not at all if it rolls back. Absent where the store has
   * no transactions to join.
   */
  scheduleIn?(
    client: TransactionClient,
    partition: number,
    entries: readonly ScheduleEntry[],
  ): Promise<ScheduleAnswer>;
  /** Made at most once while its mark lives (`markMs`): true when made now. */
  scheduleOnce(partition: number, markMs: number, message: ToSchedule): Promise<boolean>;
  /** Resolves once this node's writes to `partition` so far are as durable as the node keeps them. */
  durable(partition: number, what: string): Promise<void>;
  /** A live message's state, or a recently finished one's. */
  get(at: At): Promise<MessageInfo | undefined>;
  /** A live or dead message's record, with the due time its state holds. */
  stored(at: At): Promise<{ deliverAt: number; record: Buffer } | undefined>;
  /** Cancels a live message: what it was (read in the same step). */
  cancel(at: At): Promise<{ topic: string; deliverAt: number; attempts: number } | undefined>;
  /** reschedule: a scheduled or ready message due at `due`; requeue: a dead one, attempts 0. */
  move(kind: 'reschedule' | 'requeue', at: At, due: number, window: number): Promise<boolean>;

  /** Raises loadedUntil to at least `to`; with `rotate`, a new near segment. */
  load(
    partition: number,
    by: Owner,
    to: number,
    rotate: boolean,
  ): Promise<{ loadedUntil: number; near: string; seq: number } | undefined>;
  /** The partition's near segments that still hold records. */
  nearSegments(partition: number): Promise<string[]>;
  /**
   * The window segments holding records of windows from `from` (-Infinity: all) to before
   * `before`, in window order, named `w<segment>`: a store may keep one window in several
   * segments (windowOfSegment); `limit` counts windows, each with all its segments.
   */
  windows(partition: number, from: number, before: number, limit?: number): Promise<number[]>;
  /** Up to `max` records of a segment from index `from`: how many were looked at, the live ones. */
  read(
    partition: number,
    seg: string,
    from: number,
    max: number,
  ): Promise<{ scanned: number; live: StoredRow[] }>;
  /** Scheduled -> ready where still so; `early`: ids due after the store's time + `skewMs`. */
  fire(
    partition: number,
    by: Owner,
    skewMs: number,
    at: readonly Placed[],
  ): Promise<{ fired: number; early: string[]; seq: number } | undefined>;
  /**
   * Several partitions' fires in one round trip, each as fire() would make it (its own fence):
   * an answer per call, in order. Optional: without it, each partition fires on its own.
   */
  fireMany?(
    calls: ReadonlyArray<{ partition: number; by: Owner; at: readonly Placed[] }>,
    skewMs: number,
  ): Promise<Array<{ fired: number; early: string[]; seq: number } | undefined>>;
  /** Up to `max` deliveries whose visibility ran out by `upTo`, oldest first. */
  overdue(
    partition: number,
    upTo: number,
    max: number,
  ): Promise<Array<Id & { attempts: number; record: Buffer; deliverAt: number }>>;
  /** Deliveries past their visibility failed as by a nack, due again at their `due`. */
  expire(
    partition: number,
    by: Owner,
    deliveries: readonly Retry[],
  ): Promise<{ seq: number; outcomes: Array<'left' | 'retried' | 'dead'> } | undefined>;
  /** The earliest visibility deadline of the partition's deliveries (Infinity: none out). */
  earliestVisibility(partition: number): Promise<number>;

  /** Up to `max` ready messages of `topic` in flight, within `maxBytes` of records. */
  take(
    partition: number,
    topic: string,
    max: number,
    visibilityMs: number,
    maxBytes: number,
  ): Promise<Array<{ id: string; attempts: number; deliverAt: number; record: Buffer }>>;
  /**
   * The partitions (of 0 .. partitions - 1) holding ready messages of `topic`, ascending: one
   * call for all, however many there are, and whatever the number ready in each.
   */
  readyPartitions(topic: string, partitions: number): Promise<number[]>;
  /** For each delivery, whether it was still out (and is now done); `durable`: waited for. */
  ack(partition: number, deliveries: readonly Delivery[], durable: boolean): Promise<boolean[]>;
  /** Several partitions' acks (not durable) in one round trip: answers per call, in order. Optional. */
  ackMany?(
    calls: ReadonlyArray<{ partition: number; deliveries: readonly Delivery[] }>,
  ): Promise<boolean[][]>;
  /** A delivery failed: 'retry' (due again at `due`), 'dead', or undefined (not out). */
  nack(
    partition: number,
    retry: Retry,
    reason: string,
    durable: boolean,
  ): Promise<'retry' | 'dead' | undefined>;

  /** Live messages per `<topic>|<status letter>`. */
  counts(partition: number): Promise<Record<string, number>>;
  /** Live messages of one topic per status letter (S, R, I, D); a letter with none is absent. */
  topicCounts(partition: number, topic: string): Promise<Record<string, number>>;
  /** Records per segment still holding some. */
  segmentSizes(partition: number): Promise<Record<string, number>>;
  loadedUntil(partition: number): Promise<number>;
  /** Up to `limit` dead messages of `topic`, oldest death first, with the store's time of it. */
  dead(
    partition: number,
    topic: string,
    limit: number,
  ): Promise<Array<{ id: string; died: number }>>;
  /** The reason each message's latest delivery failed ('' or undefined: none). */
  reasons(partition: number, ids: readonly string[]): Promise<Array<string | undefined>>;

  /** Recurring schedules' records, kept with partition 0. */
  sched(change: SchedChange): Promise<SchedAnswer>;
  schedRecord(name: string): Promise<string | undefined>;
  schedRecords(): Promise<Record<string, string>>;
  /** A count that moves with every change of the records. */
  schedChanges(): Promise<string | null>;

  /**
   * How often a partition's owner looks for what lost events may have hidden (default 1,000
   * ms). A store that loses events only while its listener reconnects, and then sends each
   * partition `n` and `i`, can make it rare.
   */
  readonly ownerPollMs?: number;
  /**
   * Messages without an id sent to one partition before the next one's turn (default 128): runs
   * spread a batch over partitions (over a cluster's shards), longer runs make fewer calls (a
   * store whose calls cost more than their rows).
   */
  readonly locatedRun?: number;
  /** Calls `listener` with each event of the partition; resolves to a stop. */
  subscribe(partition: number, listener: (event: string) => void): Promise<() => Promise<void>>;
  /** Undefined when the store answers within a second; else why not, in words. */
  problem(): Promise<string | undefined>;
  /** What `stats()` says of durability. */
  readonly durability: { setting: string; option: string; reason: string };
  close(): Promise<void>;
}

/**
 * The rows of a take or an expiry's list that have their record. One without (`record` null or
 * false) is a message the store no longer had the record of, after it lost writes (a failover to
 * a replica behind, a restore): the store dropped it in that call; each is reported here
 * (ERR_TICKWHEEL_DATA_LOST, `docs`: where the durability of that store is explained).
 */
export function withRecords<R extends { id: unknown; record: unknown }>(
  rows: readonly R[],
  partition: number,
  was: string,
  docs: string,
  onError: (err: Error) => void,
): Array<R & { record: Buffer }> {
  const kept: Array<R & { record: Buffer }> = [];
  for (const row of rows) {
    if (Buffer.isBuffer(row.record)) {
      kept.push(row as R & { record: Buffer });
      continue;
    }
    onError(
      new TickwheelUnavailableError(
        'ERR_TICKWHEEL_DATA_LOST',
        `message ${String(row.id)} (partition ${partition}) was ${was} but its record is gone ` +
          `from the store: it cannot be delivered and was dropped (the store lost writes; see ` +
          `${docs})`,
      ),
    );
  }
  return kept;
}
