/** The queue's model as a caller sees it, embedded or over HTTP (wire.ts builds on it). */

import type { StoreDamage } from '../errors.js';
import type { TimerWheelStats } from '../timer/index.js';

export type MessageStatus = 'scheduled' | 'ready' | 'inflight' | 'acked' | 'cancelled' | 'dead';

export interface Backoff {
  type: 'fixed' | 'exponential';
  /** Base delay in ms: fixed waits this long; exponential waits delayMs * 2^(attempt-1). */
  delayMs: number;
  /** Random spread, a fraction 0..1 of the wait. Default 0 fixed, 0.2 exponential. */
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
  /** Why its latest delivery failed, if one did. */
  lastError?: string;
}

/** list(): a topic's pending messages due in [from, until), in due-time order, by pages. */
export interface ListOptions {
  topic: string;
  /** Epoch ms; default: unbounded. */
  from?: number;
  until?: number;
  /** Messages a page holds at most, 1 to 1,000. Default 100. */
  limit?: number;
  /** The `cursor` of the previous page: this page starts right after its last message. */
  cursor?: string;
}

/**
 * `cursor` is absent on the last page only: the embedded queue bounds the work of a page, so one
 * may hold fewer than `limit` messages, even none (docs/storage.md).
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
  created: number;
  /** Occurrences missed, overlapping, or while paused. */
  skipped: number;
}

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

/** What is absent stays; null removes a rateLimit or push target; a push target given replaces. */
export interface TopicUpdate {
  paused?: boolean;
  rateLimit?: { perSecond: number; burst?: number } | null;
  push?: PushTargetInput | null;
}

/** stats(): how many topics to name (0 to 1,000; default 100): those with the most messages. */
export interface StatsOptions {
  topics?: number;
}

/** topicList() and GET /v1/topics: a page of topics, by name. */
export interface TopicListOptions {
  /** Topics a page holds at most, 1 to 1,000. Default 100. */
  limit?: number;
  /** The `cursor` of the previous page: this page starts after it. */
  cursor?: string;
}

/** `cursor` is absent on the last page only. */
export interface TopicPage {
  topics: TopicInfo[];
  cursor?: string;
}

/** topicInfo() and GET /v1/topics/:topic. */
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

/** Monotonic counts since the queue opened (on Valkey/Redis: of this node). */
export interface QueueCounters {
  /** Messages scheduled (deduplicated ones not counted). */
  scheduled: number;
  /** Schedules that matched a pending message with the same id. */
  deduplicated: number;
  /** Messages that came due and became ready. */
  fired: number;
  /** Redeliveries included. */
  delivered: number;
  acked: number;
  nacked: number;
  /** Deliveries whose visibility timeout ran out before an ack. */
  expired: number;
  dead: number;
  cancelled: number;
  rescheduled: number;
}

/** Fire lateness (due → ready), in ms: quantiles of the last 4096 fires; null before any. */
export interface FireLateness {
  p50: number | null;
  p99: number | null;
  max: number | null;
  count: number;
  sum: number;
}

/** First-delivery lateness (due → first hand-over to a consumer), in ms. */
export interface DeliveryLateness {
  /** Cumulative: [upper bound in ms, first deliveries at most that late]. */
  buckets: Array<[upperBoundMs: number, count: number]>;
  count: number;
  sum: number;
}

/** Live messages of a topic by state. */
export interface TopicStateCounts {
  scheduled: number;
  ready: number;
  inflight: number;
  dead: number;
}

/** One topic's pushes since the queue opened, in this process. */
export interface PushStats {
  inFlight: number;
  /** Attempts answered 2xx; failed ones nacked their message. */
  succeeded: number;
  failed: number;
  /** The latest failure, and when (epoch ms). */
  lastError?: string;
  lastErrorAt?: number;
}

/** The embedded queue's store's figures: the file store's, `waiting` the memory store's. */
export interface StoreStats {
  /** Messages not finished: scheduled, ready, in flight or dead. */
  live?: number;
  dead?: number;
  /** Bytes of the id table and of the log; the log's segment and index files. */
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
  /** Since the last checkpoint. */
  uncoveredLogBytes?: number;
  damagedSkipped?: number;
  /** Messages compaction carried forward since open (docs/storage.md, Compaction). */
  relocated?: number;
  /** 1 once a log write failed: the store takes no more changes until reopened. */
  stopped?: number;
  checkpointing?: number;
  /** 1 while index writes or checkpoints fail (retried), and those failures so far. */
  indexFailing?: number;
  indexWriteFailures?: number;
  checkpointFailing?: number;
  checkpointFailures?: number;
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
  /** As opened ('auto': chosen by the replicas found), and why: 'as set', or what auto found. */
  durabilityOption: ClusterDurability | 'auto';
  durabilityReason: string;
  /** Nodes that heartbeat, as the last heartbeat answered. */
  members: string[];
  /** Partitions this node owns, and all by owner ('(none)': no owner now). */
  owned: number[];
  owners: Record<string, number[]>;
  /** Partition leases this node took or lost. */
  leaseChanges: number;
  /** Partitions this node saw made anew on the server: their data was lost. */
  dataLosses: number;
}

/** stats(), embedded or on Valkey/Redis; optional parts are one backend's only. */
export interface QueueStats extends QueueCounters {
  latenessMs: FireLateness;
  deliveryLatenessMs: DeliveryLateness;
  /** Messages held in this process's memory (due within the horizon, ready or in flight). */
  inMemory: number;
  /** The whole queue's topics with the most live messages, `StatsOptions.topics` of them. */
  topics: Record<string, TopicStateCounts>;
  /** Topics with live messages, named in `topics` or not. */
  topicCount: number;
  /** What the topics not named in `topics` hold, summed. */
  otherTopics: TopicStateCounts;
  /** This process's. */
  timers: TimerWheelStats;
  push: Record<string, PushStats>;
  /** Embedded: messages due before this time (epoch ms) are in memory, the rest on disk. */
  loadedUntil?: number;
  /** Embedded: bytes held, and payloadMemoryBytes (Infinity, null over HTTP: not evictable). */
  payloadMemory?: { heldBytes: number; limitBytes: number };
  /** Embedded: 1 while bringing due messages from the store into memory fails. */
  loadFailing?: number;
  store?: StoreStats;
  /** Valkey/Redis: live messages of the whole queue, and the cluster as this node sees it. */
  totals?: TopicStateCounts;
  cluster?: ClusterStats;
}

/** What opening an embedded queue found on disk (GET /v1/stats: `recovery`). */
export interface RecoveryReport {
  /** Live messages found, dead ones included. */
  live: number;
  /** Damaged records skipped. */
  corrupt: Array<{ where: string; reason: string }>;
  /** Bytes of a torn last record cut from the log. */
  truncatedBytes: number;
  /** Replayed the log after a snapshot ('used'), or all of it: none found, or not trusted. */
  snapshot: 'used' | 'none' | `rejected: ${string}`;
  replayedBytes: number;
  durationMs: number;
  /** This open's repair (`repair: true`), else the directory's last (all of it in repair.json). */
  repair?: RepairReport;
}

/** What a repair of a damaged data directory dropped, or would (docs/storage.md, Recovery). */
export interface RepairReport {
  /** ISO 8601. */
  at: string;
  /** False for a plan (`tickwheel repair` without --yes): nothing was changed. */
  applied: boolean;
  /** Empty: nothing to repair. */
  damage: StoreDamage[];
  /** Every message that cannot be recovered: those in `dropped` and the `unnamed` ones. */
  lost: number;
  /** Now "not found"; a report read back at a later open names 100, repair.json all. */
  dropped: Array<{ id: string; topic: string; reason: string }>;
  /** Messages that cannot be recovered whose ids were only in the damaged bytes. */
  unnamed: number;
  /**
   * Whether those are every message the damage touched: without a later snapshot, a change
   * recorded in the damage (cancel, ack, reschedule) of a message with intact earlier records is
   * unknown, and it keeps its last readable state (`notes` says where).
   */
  exact: boolean;
  /** What else the repair found or could not know, in words. */
  notes: string[];
}
