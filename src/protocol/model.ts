/**
 * The queue's model as a caller sees it, embedded or over HTTP: the queue and the wire types
 * (wire.ts) both take it from here, so that neither imports the other's layer.
 */

import type { StoreDamage } from '../errors.js';
import type { TimerWheelStats } from '../timer/index.js';

export type MessageStatus = 'scheduled' | 'ready' | 'inflight' | 'acked' | 'cancelled' | 'dead';

export interface Backoff {
  type: 'fixed' | 'exponential';
  /** Base delay in ms: fixed waits this long; exponential waits delayMs * 2^(attempt-1). */
  delayMs: number;
  /** Spread each wait by up to this fraction at random (0..1). Default 0 for fixed, 0.2 for exponential. */
  jitter?: number;
  /** Upper bound of one wait. Default one day. */
  maxDelayMs?: number;
}

export interface MessageInfo {
  id: string;
  topic: string;
  status: MessageStatus;
  deliverAt: number;
  attempts: number;
  /** Why its latest delivery failed, if one did (kept with a dead letter). */
  lastError?: string;
}

/**
 * What list() browses: the pending messages (scheduled, ready, in flight) of one topic whose
 * due time is in [from, until), in due-time order, a page at a time.
 */
export interface ListOptions {
  topic: string;
  /** Due at or after this (epoch ms). Default: no lower bound. */
  from?: number;
  /** Due before this (epoch ms). Default: no upper bound. */
  until?: number;
  /** Messages a page holds at most, 1 to 1,000. Default 100. */
  limit?: number;
  /** The `cursor` of the previous page: this page starts right after its last message. */
  cursor?: string;
}

/**
 * A page of list(). `cursor` is absent on the last page. A page may hold fewer than `limit`
 * messages (even none) and still carry a cursor: the embedded queue bounds the work of one
 * page (docs/storage.md, "Browsing what is scheduled").
 */
export interface ListPage {
  messages: MessageInfo[];
  cursor?: string;
}

export type CatchUp = 'latest' | 'all' | 'none';

export type Overlap = 'allow' | 'skip';

/** What a user gives to create or replace a schedule. */
export interface RecurringSpec {
  topic: string;
  /** Each occurrence's message payload (JSON). Default null. */
  payload?: unknown;
  /** A cron expression: 5 fields, or 6 with seconds first. One of cron / everyMs. */
  cron?: string;
  /** IANA time zone of `cron`. Default 'UTC'. */
  timezone?: string;
  /** A fixed interval, 1,000 ms to 366 days. */
  everyMs?: number;
  /** No occurrence before this (epoch ms); with everyMs, the first occurrence. */
  startAt?: number;
  /** No occurrence after this (epoch ms). */
  endAt?: number;
  /** Occurrences missed while the queue was not running: see docs. Default 'latest'. */
  catchUp?: CatchUp;
  /** 'skip': no occurrence while the previous one's message is still live. Default 'allow'. */
  overlap?: Overlap;
  /** Of each occurrence's message. */
  maxAttempts?: number;
  backoff?: Backoff;
  /** No occurrences while paused (they are skipped, not made up later). */
  paused?: boolean;
}

/** A checked spec, every default filled in. */
export interface ScheduleSpec {
  topic: string;
  payload: unknown;
  cron: string | null;
  timezone: string | null;
  everyMs: number | null;
  startAt: number | null;
  endAt: number | null;
  catchUp: CatchUp;
  overlap: Overlap;
  maxAttempts: number;
  backoff: Backoff | null;
  paused: boolean;
}

/** A schedule as get / list answer it. */
export interface ScheduleInfo extends ScheduleSpec {
  name: string;
  createdAt: number;
  updatedAt: number;
  /** The latest occurrence whose message was created, or null. */
  lastAt: number | null;
  /** The next occurrence, or null (paused, or past endAt). */
  nextAt: number | null;
  /** Occurrences created, and skipped (missed, overlapping, or while paused). */
  created: number;
  skipped: number;
}

/** Deliveries per second, as a token bucket. */
export interface RateLimit {
  /** Tokens added a second: 0.001 (one every 1,000 s) to 1,000,000. */
  perSecond: number;
  /** Most tokens saved up, an integer from 1 to 1,000,000. Default ceil(perSecond). */
  burst: number;
}

export type PushMethod = 'POST' | 'PUT' | 'PATCH';

/** A push target as given: url and secret, the rest has defaults (push.ts). */
export interface PushTargetInput {
  url: string;
  secret: string;
  method?: PushMethod;
  headers?: Record<string, string>;
  timeoutMs?: number;
  concurrency?: number;
}

/** A target as read back: its headers' names only, its secret not at all. */
export interface PushTargetView {
  url: string;
  method: PushMethod;
  headerNames: string[];
  timeoutMs: number;
  concurrency: number;
}

/**
 * A change of a topic's settings: what is absent stays as it is; rateLimit null removes the
 * limit, push null the push target (a push target given replaces the one before, whole).
 */
export interface TopicUpdate {
  paused?: boolean;
  rateLimit?: { perSecond: number; burst?: number } | null;
  push?: PushTargetInput | null;
}

/**
 * A topic's settings with its counts, as topicInfo() and GET /v1/topics/:topic answer. A push
 * target shows without its secret and its headers' values.
 */
export interface TopicInfo {
  topic: string;
  paused: boolean;
  rateLimit: RateLimit | null;
  push: PushTargetView | null;
  /** Live messages that are not dead: scheduled, ready or in flight. */
  pending: number;
  dead: number;
}

/** The names of QueueCounters, in the order stats(), /metrics and the dashboard list them. */
export const COUNTER_NAMES = [
  'scheduled',
  'deduplicated',
  'fired',
  'delivered',
  'acked',
  'nacked',
  'expired',
  'dead',
  'cancelled',
  'rescheduled',
] as const satisfies ReadonlyArray<keyof QueueCounters>;

/**
 * What went through the queue since it opened (on Valkey/Redis: through this node, and what it
 * fired as a partition's owner). Monotonic; /metrics exposes each as a counter.
 */
export interface QueueCounters {
  /** Messages scheduled (deduplicated ones not counted). */
  scheduled: number;
  /** Schedules that matched a pending message with the same id. */
  deduplicated: number;
  /** Messages that came due and became ready. */
  fired: number;
  /** Deliveries to consumers (redeliveries included). */
  delivered: number;
  acked: number;
  nacked: number;
  /** Deliveries whose visibility timeout ran out before an ack. */
  expired: number;
  /** Messages moved to the dead letters after their last attempt. */
  dead: number;
  cancelled: number;
  rescheduled: number;
}

/** Fire lateness (due → ready), in ms: quantiles of the last 4096 fires; null before any. */
export interface FireLateness {
  p50: number | null;
  p99: number | null;
  max: number | null;
  /** Fires since the queue opened, and the sum of their lateness. */
  count: number;
  sum: number;
}

/** First-delivery lateness (due → first hand-over to a consumer), in ms, as a histogram. */
export interface DeliveryLateness {
  /** Cumulative: [upper bound in ms, first deliveries at most that late]. */
  buckets: Array<[upperBoundMs: number, count: number]>;
  count: number;
  sum: number;
}

/** Live messages of a topic by state. */
export interface TopicStateCounts {
  /** Not yet due, in memory or on disk. */
  scheduled: number;
  ready: number;
  inflight: number;
  /** Dead letters. */
  dead: number;
}

/** Counts of one topic's pushes since the queue opened (in this process). */
export interface PushStats {
  /** Requests under way. */
  inFlight: number;
  /** Attempts answered 2xx. */
  succeeded: number;
  /** Attempts that failed (their messages nacked). */
  failed: number;
  /** Why the latest attempt failed, if one did, and when (ms since the Unix epoch). */
  lastError?: string;
  lastErrorAt?: number;
}

/**
 * The figures of the embedded queue's store. The file store has every one listed (the memory
 * store only `live` and `waiting`); a store of your own reports whatever numbers it has.
 */
export interface StoreStats {
  /** Messages not finished: scheduled, ready, in flight or dead. */
  live?: number;
  /** Dead letters. */
  dead?: number;
  /** Bytes of the id table, of the message log, and the log's segment and index files. */
  idTableBytes?: number;
  logBytes?: number;
  segments?: number;
  indexFiles?: number;
  /** fsyncs of the log, and their longest and mean duration in ms. */
  fsyncs?: number;
  fsyncMsMax?: number;
  fsyncMsAvg?: number;
  snapshots?: number;
  snapshotBytes?: number;
  snapshotCaptureMsMax?: number;
  snapshotWriteMsLast?: number;
  /** Log bytes written since the last checkpoint. */
  uncoveredLogBytes?: number;
  /** Damaged records skipped when read. */
  damagedSkipped?: number;
  /** 1 once a log write failed: the store takes no more changes until reopened. */
  stopped?: number;
  /** 1 while a checkpoint is written. */
  checkpointing?: number;
  /** 1 while writes of the schedule index fail (retried), and those failures so far. */
  indexFailing?: number;
  indexWriteFailures?: number;
  /** 1 while checkpoints fail (retried), and those failures so far. */
  checkpointFailing?: number;
  checkpointFailures?: number;
  /** The memory store: messages waiting for their due time. */
  waiting?: number;
  [figure: string]: number | undefined;
}

/** Durability of a node's writes on Valkey/Redis (docs/cluster.md, "Durability settings"). */
export type ClusterDurability = 'async' | 'replicated' | 'fsynced';

/** A queue on Valkey/Redis as this node sees it. */
export interface ClusterStats {
  node: string;
  queue: string;
  partitions: number;
  durability: ClusterDurability;
  /** The option the node was opened with ('auto': chosen by the replicas found). */
  durabilityOption: ClusterDurability | 'auto';
  /** Why it keeps that durability: 'as set', or what 'auto' found. */
  durabilityReason: string;
  /** Nodes that heartbeat, as the last heartbeat answered. */
  members: string[];
  /** Partitions this node owns. */
  owned: number[];
  /** Partitions by the node whose lease holds them ('(none)': no owner now). */
  owners: Record<string, number[]>;
  /** Partition leases this node took or lost. */
  leaseChanges: number;
  /** Partitions this node saw made anew on the server: their data was lost. */
  dataLosses: number;
}

/**
 * stats() of a queue, embedded or on Valkey/Redis, and the body of GET /v1/stats (which adds
 * `recovery` and `server`). Parts only one backend has are optional: `store`, `loadedUntil`,
 * `payloadMemory` and `loadFailing` are the embedded queue's; `totals` and `cluster` a queue on
 * Valkey/Redis's.
 */
export interface QueueStats extends QueueCounters {
  latenessMs: FireLateness;
  deliveryLatenessMs: DeliveryLateness;
  /** Messages held in this process's memory (due within the horizon, ready or in flight). */
  inMemory: number;
  /** Live messages by topic and state: the whole queue's. */
  topics: Record<string, TopicStateCounts>;
  /** The in-memory timer wheel of this process. */
  timers: TimerWheelStats;
  /** Pushes by topic (docs/push.md), of this process. */
  push: Record<string, PushStats>;
  /** Embedded: messages due before this time (epoch ms) are in memory, the rest on disk. */
  loadedUntil?: number;
  /**
   * Embedded: payload bytes held in memory, and the budget (payloadMemoryBytes; Infinity, null
   * over HTTP, for a store that cannot read payloads back).
   */
  payloadMemory?: { heldBytes: number; limitBytes: number };
  /** Embedded: 1 while bringing due messages from the store into memory fails. */
  loadFailing?: number;
  /** Embedded: the store's figures. */
  store?: StoreStats;
  /** Valkey/Redis: live messages of the whole queue by state. */
  totals?: TopicStateCounts;
  /** Valkey/Redis: the cluster as this node sees it. */
  cluster?: ClusterStats;
}

/** What opening an embedded queue found on disk (GET /v1/stats: `recovery`). */
export interface RecoveryReport {
  /** Live messages found (scheduled, ready or in flight before the stop, and dead). */
  live: number;
  /** Damaged records skipped. */
  corrupt: Array<{ where: string; reason: string }>;
  /** Bytes of a torn last record cut from the log. */
  truncatedBytes: number;
  /**
   * Whether recovery started from a snapshot of the store's tables and replayed only the log
   * after it ('used'), found none ('none'), or found one it could not trust and replayed the
   * whole log instead ('rejected: <why>').
   */
  snapshot: 'used' | 'none' | `rejected: ${string}`;
  /** Bytes of log read by the replay. */
  replayedBytes: number;
  durationMs: number;
  /**
   * The repair this open made (`repair: true`), or else the last one made on this data
   * directory (its full report is kept in `repair.json` there).
   */
  repair?: RepairReport;
}

/**
 * What a repair of a damaged data directory found and dropped (or, planned but not applied,
 * would drop): see docs/storage.md, Recovery.
 */
export interface RepairReport {
  /** When it was made (or planned), ISO 8601. */
  at: string;
  /** False for a plan (`tickwheel repair` without --yes): nothing was changed. */
  applied: boolean;
  /** The damaged stretches of the log; empty if there were none (nothing to repair). */
  damage: StoreDamage[];
  /** Every message that cannot be recovered: those in `dropped` and the `unnamed` ones. */
  lost: number;
  /**
   * Messages that cannot be recovered, by id: not delivered, not counted, "not found". A report
   * read back at a later open names the first 100; `repair.json` names them all.
   */
  dropped: Array<{ id: string; topic: string; reason: string }>;
  /** Messages that cannot be recovered whose ids were only in the damaged bytes. */
  unnamed: number;
  /**
   * Whether `dropped` and `unnamed` are every message the damage touched. Without a snapshot
   * taken after the damaged bytes, a change recorded there (a cancel, an ack, a reschedule) of a
   * message whose earlier records are intact cannot be known: such a message keeps its last
   * readable state. `notes` says where.
   */
  exact: boolean;
  /** What else the repair found or could not know, in words. */
  notes: string[];
}
