/**
 * `Queue`: the delay queue's public operations, whatever holds the messages (a data directory,
 * or Valkey/Redis): the checked facade (checked-queue.ts) over a backend (backend.ts). The
 * server, the CLI and applications that take "a queue" program against this interface.
 */

import type {
  ListOptions,
  ListPage,
  QueueStats,
  StatsOptions,
  TopicListOptions,
  TopicPage,
} from '../protocol/model.js';
import type { WheelSnapshot } from '../wheel/index.js';
import type { ScheduleRequest } from './message.js';
import type { RecoveryReport } from './store.js';
import type { QueueEvents } from './events.js';
import type { ScheduleInfo } from './recurring.js';
import type { RecurringSpec } from './recurring-spec.js';
import type { TopicInfo, TopicUpdate } from './topics.js';
import type {
  DueTimeline,
  ConsumeOptions,
  MessageHandler,
  MessageInfo,
  AckOptions,
  NackOptions,
  ReceivedMessage,
  ReceiveOptions,
  ScheduleOptions,
} from './types.js';

/** A new due time: a delay from now, or a Unix time in milliseconds. */
export type NewDueTime = { delayMs?: number; deliverAt?: number };

/**
 * The operations `tickwheel/client` shares with the queue, so code written against it runs
 * embedded or over HTTP (the client's take one more optional argument, CallOptions).
 */
export interface QueueOperations<Payload = unknown> {
  /** Schedules a message. Resolves once it is durable (as the store's settings define it). */
  schedule(request: ScheduleRequest<Payload>): Promise<{ id: string; deliverAt: number }>;
  /**
   * schedule() for many; every request is checked before any is written (a bad one schedules
   * nothing). If the backend fails part way any subset may be scheduled: give ids, and retry.
   */
  scheduleMany(
    requests: readonly ScheduleRequest<Payload>[],
  ): Promise<Array<{ id: string; deliverAt: number }>>;
  /** Cancels a message that has not been acknowledged. True if it was live. */
  cancel(id: string): Promise<boolean>;
  /** Moves a message that is scheduled or ready to a new due time; false if in flight or gone. */
  reschedule(id: string, when: NewDueTime): Promise<boolean>;
  /** reschedule(), resolving with the due time stored (delays round up, times down). */
  rescheduleTo(id: string, when: NewDueTime): Promise<number | undefined>;
  /** Puts a dead message back, due `delayMs` from now, its attempts reset. */
  requeue(id: string, options?: { delayMs?: number }): Promise<boolean>;
  /** Current state of a message, or undefined if unknown (or finished long ago). */
  get(id: string): Promise<MessageInfo | undefined>;

  /**
   * Takes up to `max` ready messages of a topic, waiting up to `waitMs` for the first. `signal`
   * ends the wait: an AbortError, unless messages were taken by then (they are answered).
   */
  receive(
    topic: string,
    options?: ReceiveOptions,
    call?: { signal?: AbortSignal },
  ): Promise<ReceivedMessage<Payload>[]>;
  /** The message is done; false for an unknown or stale receipt. See AckOptions.durable. */
  ack(receipt: string, options?: AckOptions): Promise<boolean>;
  /** Redelivered after `delayMs` (default: its backoff), or dead after its last attempt. */
  nack(receipt: string, options?: NackOptions): Promise<boolean>;
  /** results[i] is what ack(receipts[i]) gives; every receipt is checked before any is used. */
  ackMany(receipts: readonly string[], options?: AckOptions): Promise<boolean[]>;
  nackMany(receipts: readonly string[], options?: NackOptions): Promise<boolean[]>;
  /**
   * Runs `handler` for each message of a topic: acks when it resolves, nacks when it throws. Only
   * close() (of the consumer or the queue) ends the loop; the rules are the Worker's (worker.ts).
   */
  consume(
    topic: string,
    handler: MessageHandler<Payload>,
    options?: ConsumeOptions,
  ): { close(): Promise<void> };
  /**
   * A topic's pending messages due in [from, until), in due-time order, a page of up to `limit`
   * at a time: pass `cursor` back for the next (absent on the last; a page may hold fewer than
   * `limit` and still carry one). See docs/storage.md, "Browsing what is scheduled".
   */
  list(options: ListOptions): Promise<ListPage>;
  /** Dead messages of a topic, oldest first (in the order they died). */
  deadLetters(topic: string, limit?: number): Promise<MessageInfo[]>;

  /**
   * Counters and counts (docs/http-api.md, "Stats"; the parts one backend has are optional);
   * per topic, of the `options.topics` topics with the most messages.
   */
  stats(options?: StatsOptions): Promise<QueueStats>;
  close(): Promise<void>;
}

/** Every operation of the delay queue: those the client shares, and the ones only a queue has. */
export interface Queue<Payload = unknown> extends QueueOperations<Payload> {
  /** schedule(); with `client`, in the application's open transaction (PostgreSQL). */
  schedule(
    request: ScheduleRequest<Payload>,
    options?: ScheduleOptions,
  ): Promise<{ id: string; deliverAt: number }>;
  scheduleMany(
    requests: readonly ScheduleRequest<Payload>[],
    options?: ScheduleOptions,
  ): Promise<Array<{ id: string; deliverAt: number }>>;
  /** Message events (events.ts); on Valkey/Redis, those of the operations made through it. */
  readonly events: QueueEvents;
  /** The visibility timeout of a delivery whose receive or consume names none. */
  readonly visibilityMs: number;

  /** Stops deliveries of a topic until resumed (durable); schedules are still accepted. */
  pause(topic: string): Promise<TopicInfo>;
  resume(topic: string): Promise<TopicInfo>;
  /** Changes a topic's settings (paused, rateLimit: src/queue/topics.ts); durable. */
  configureTopic(topic: string, update: TopicUpdate): Promise<TopicInfo>;
  topicInfo(topic: string): Promise<TopicInfo>;
  /** A page of the topics with messages or settings other than the defaults, by name. */
  topicList(options?: TopicListOptions): Promise<TopicPage>;

  /** Recurring schedules (recurring.ts): occurrences of a cron or interval become messages. */
  putSchedule(name: string, spec: RecurringSpec): Promise<ScheduleInfo>;
  updateSchedule(name: string, patch: Partial<RecurringSpec>): Promise<ScheduleInfo | undefined>;
  getSchedule(name: string): Promise<ScheduleInfo | undefined>;
  listSchedules(): Promise<ScheduleInfo[]>;
  deleteSchedule(name: string): Promise<boolean>;

  /** Scheduled messages by time until due: dueTimeline(edgesMs).counts. */
  dueHistogram(edgesMs: readonly number[]): Promise<number[]>;
  /** The same counts and the edges they are exact for (see dueTimeline in insights.ts). */
  dueTimeline(edgesMs: readonly number[]): Promise<DueTimeline>;
  /** The start of a live or dead message's payload, for people looking at it. */
  payloadPreview(
    id: string,
    maxChars?: number,
  ): Promise<{ preview: string; truncated: boolean } | undefined>;
  wheelSnapshot(maxRows?: number): WheelSnapshot;
  /** What opening found on disk; undefined where nothing is recovered (Valkey/Redis). */
  readonly recovery: RecoveryReport | undefined;
  /**
   * Why the queue cannot fully serve now (no answer from Valkey/Redis, loads or index writes
   * failing), or undefined; GET /healthz says it.
   */
  problem(): Promise<string | undefined>;
  /**
   * True once the store takes no more writes: a log write failed (disk full, read-only, failing);
   * a restart recovers. Also `stats().store.stopped`. A queue on Valkey/Redis or PostgreSQL never is.
   */
  stopped(): boolean;
  settled(): Promise<void>;
}
