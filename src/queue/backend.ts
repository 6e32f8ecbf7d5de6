/**
 * The backend contract behind the checked facade (checked-queue.ts), implemented by the embedded
 * engine (engine.ts) and the Valkey/Redis node (src/cluster/backend.ts); docs/architecture.md
 * says how to write another. Arguments come checked, and nothing is called once closed. Its
 * promises: never early (by `now()`; equal due times in one process's scheduling order); at
 * least once (a message leaves only by ack, cancel or burial); durable when resolved (a write
 * that may have happened rejects with TickwheelOutcomeError, never as if nothing happened);
 * fenced where shared. It keeps no counters and emits no events: it tells the QueueReport.
 */

import type { QueueCounters, QueueStats, TopicStateCounts } from '../protocol/model.js';
import type { WheelSnapshot } from '../wheel/index.js';
import type { BackendListPage, ListQuery } from './list.js';
import type { CheckedRequest } from './message.js';
import type { ScheduleInfo } from './recurring.js';
import type { ScheduleSpec } from './recurring-spec.js';
import type { RecoveryReport } from './store.js';
import type { TopicGate } from './topics.js';
import type { DueTimeline, MessageInfo, ReceivedMessage, TransactionClient } from './types.js';
import type { WorkerSource } from './worker.js';

/**
 * stats() of a backend: the facade adds the report's counters and figures, and `push`, and
 * names the largest of `topics`: every topic with live messages, read once, at once (an entry
 * may be reused for the next: a reader copies what it keeps).
 */
export type BackendStats = Omit<
  QueueStats,
  | 'push'
  | 'latenessMs'
  | 'deliveryLatenessMs'
  | 'topics'
  | 'topicCount'
  | 'otherTopics'
  | keyof QueueCounters
> & { topics: Iterable<readonly [string, TopicStateCounts]> };

export interface Scheduled {
  id: string;
  deliverAt: number;
}

/** Counts of a topic's messages: pending (scheduled, ready or in flight) and dead. */
export interface TopicCounts {
  pending: number;
  dead: number;
}

/** receive() options, checked, with the queue's defaults filled in. */
export interface ReceiveLimits {
  max: number;
  waitMs: number;
  visibilityMs: number;
  maxBytes: number;
}

export interface QueueBackend {
  /** The backend's time, Unix epoch milliseconds: due times are computed from it. */
  now(): number;
  /** Each receive of consume() waits up to this long (a backend wakes it early when it can). */
  readonly consumeWaitMs: number;
  readonly recovery: RecoveryReport | undefined;

  /** Adds a message. `message.id === ''`: the backend makes one; otherwise dedup by id. */
  schedule(message: CheckedRequest): Promise<Scheduled>;
  /** schedule() for many, in order; any subset may be written when it rejects. */
  scheduleMany(messages: readonly CheckedRequest[]): Promise<Scheduled[]>;
  /**
   * scheduleMany() as writes of the caller's open transaction: they exist if and only if it
   * commits. Only a backend whose store can join one has it.
   */
  readonly scheduleIn?: (
    messages: readonly CheckedRequest[],
    client: TransactionClient,
  ) => Promise<Scheduled[]>;
  cancel(id: string): Promise<boolean>;
  /** Moves a scheduled or ready message; the due time stored, or undefined (in flight, gone). */
  moveTo(id: string, deliverAt: number): Promise<number | undefined>;
  /** A dead message due again at `deliverAt` with its attempts reset; false if not dead. */
  requeue(id: string, deliverAt: number): Promise<boolean>;
  get(id: string): Promise<MessageInfo | undefined>;
  payload(id: string): Promise<{ value: unknown } | undefined>;

  receive(topic: string, limits: ReceiveLimits, signal?: AbortSignal): Promise<ReceivedMessage[]>;
  /**
   * Resolves once applied: this process never hands the message out again. `durable`: only once
   * the ack survives what a schedule survives. Otherwise its write follows (a failure goes to the
   * fault handler), and a crash before it may deliver the message again, nothing else.
   */
  ack(receipt: string, durable: boolean): Promise<boolean>;
  /** `reason` is clipped already; `delayMs` undefined: the message's backoff. `durable`: as ack. */
  nack(
    receipt: string,
    reason: string | undefined,
    delayMs: number | undefined,
    durable: boolean,
  ): Promise<boolean>;
  /** What consume()'s workers and the pushes receive from and settle to. */
  readonly source: WorkerSource;
  /** A consumer started: returns what to call when it stops (the embedded queue holds the process). */
  holdConsumer?(): () => void;
  deadLetters(topic: string, limit: number): Promise<MessageInfo[]>;
  /**
   * A page of a topic's pending messages in key order (list.ts), those after `query.after` due in
   * [from, until): at most `query.limit`, and `next`, the key the next page starts after
   * (undefined: no more). A backend may bound its work and answer fewer messages (even none)
   * with a `next`, which must then be after `query.after`. Read-only.
   */
  list(query: ListQuery): Promise<BackendListPage>;

  /** The topic gate (topics.ts): every receive of the backend goes through it. */
  readonly topics: TopicGate;
  /** Every topic with live messages; may be the backend's own map, read at once. */
  topicCounts(): Promise<ReadonlyMap<string, TopicCounts>>;
  /** One topic's live messages (zeros for a topic with none). */
  topicCountsOf(topic: string): Promise<TopicCounts>;

  /** Recurring schedules: a checked spec, stored durably; see recurring.ts. */
  putSchedule(name: string, spec: ScheduleSpec): Promise<ScheduleInfo>;
  /**
   * Changes a stored schedule: `change` takes its spec and gives the new one, checked (or
   * throws); run in the schedule's turn, so that two updates at once both land.
   */
  updateSchedule(
    name: string,
    change: (spec: ScheduleSpec) => ScheduleSpec,
  ): Promise<ScheduleInfo | undefined>;
  getSchedule(name: string): Promise<ScheduleInfo | undefined>;
  listSchedules(): Promise<ScheduleInfo[]>;
  deleteSchedule(name: string): Promise<boolean>;

  /** What the backend holds where (counts, memory, its storage); the report adds the counters. */
  stats(): Promise<BackendStats>;
  dueTimeline(edgesMs: readonly number[]): Promise<DueTimeline>;
  wheelSnapshot(maxRows?: number): WheelSnapshot;
  /** Why the backend cannot fully serve now, if it cannot. */
  problem(): Promise<string | undefined>;
  /** True once its store takes no more writes (a failed log write); a shared backend never is. */
  stopped(): boolean;
  settled(): Promise<void>;
  /** Stops everything and releases what it holds; called once, after the facade's consumers stopped. */
  close(): Promise<void>;
}
