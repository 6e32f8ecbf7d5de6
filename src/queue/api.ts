/**
 * `Queue`: the delay queue's public operations, whatever holds the messages. `DelayQueue.open`
 * gives one on a data directory (the embedded engine on the file store) or on Valkey/Redis
 * (`{ redis }`: one node of a queue shared by many); both are the checked facade
 * (checked-queue.ts) over a backend (backend.ts). The server, the CLI and
 * applications that take "a queue" program against this interface, so that both behave the same
 * to them: same arguments, same results, same error codes.
 *
 * Types only: importing this module runs no code.
 */

import type { ListOptions, ListPage, QueueStats } from '../protocol/model.js';
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
} from './types.js';

/**
 * The operations `tickwheel/client` shares with the queue: the same names, leading arguments and
 * results, so that code written against this interface runs embedded or over HTTP. `Payload`
 * is the type of the messages' payloads (unknown unless the queue or client is typed with one). The client
 * implements it (src/client/client.ts), each method taking one more optional argument at the
 * end (CallOptions: signal, timeoutMs), its consume() one more option (`waitMs`), and its
 * stats() resolving with the server's figures too (StatsResponse, a QueueStats).
 */
export interface QueueOperations<Payload = unknown> {
  /** Schedules a message. Resolves once it is durable (as the store's settings define it). */
  schedule(request: ScheduleRequest<Payload>): Promise<{ id: string; deliverAt: number }>;
  /** schedule() for many; every request is checked before any is written. */
  scheduleMany(
    requests: readonly ScheduleRequest<Payload>[],
  ): Promise<Array<{ id: string; deliverAt: number }>>;
  /** Cancels a message that has not been acknowledged. True if it was live. */
  cancel(id: string): Promise<boolean>;
  /** Moves a message that is scheduled or ready to a new due time. */
  reschedule(id: string, when: { delayMs?: number; deliverAt?: number }): Promise<boolean>;
  /** reschedule(), resolving with the due time stored, or undefined where it gives false. */
  rescheduleTo(
    id: string,
    when: { delayMs?: number; deliverAt?: number },
  ): Promise<number | undefined>;
  /** Puts a dead message back, due `delayMs` from now, its attempts reset. */
  requeue(id: string, options?: { delayMs?: number }): Promise<boolean>;
  /** Current state of a message, or undefined if unknown (or finished long ago). */
  get(id: string): Promise<MessageInfo | undefined>;

  receive(topic: string, options?: ReceiveOptions): Promise<ReceivedMessage<Payload>[]>;
  ack(receipt: string, options?: AckOptions): Promise<boolean>;
  nack(receipt: string, options?: NackOptions): Promise<boolean>;
  ackMany(receipts: readonly string[], options?: AckOptions): Promise<boolean[]>;
  nackMany(receipts: readonly string[], options?: NackOptions): Promise<boolean[]>;
  consume(
    topic: string,
    handler: MessageHandler<Payload>,
    options?: ConsumeOptions,
  ): { close(): Promise<void> };
  /**
   * A topic's pending messages (scheduled, ready, in flight) due in [from, until), in due-time
   * order, a page of up to `limit` (default 100, at most 1,000) at a time: pass the page's
   * `cursor` back for the next (absent on the last page). A page may hold fewer than `limit`
   * messages and still carry a cursor. See docs/storage.md, "Browsing what is scheduled".
   */
  list(options: ListOptions): Promise<ListPage>;
  /** Dead messages of a topic, oldest first (in the order they died). */
  deadLetters(topic: string, limit?: number): Promise<MessageInfo[]>;

  /** Counters and counts (QueueStats: the parts one backend has are optional). */
  stats(): Promise<QueueStats>;
  close(): Promise<void>;
}

/** Every operation of the delay queue: those the client shares, and the ones only a queue has. */
export interface Queue<Payload = unknown> extends QueueOperations<Payload> {
  /**
   * Message events as they happen (src/queue/events.ts). On Valkey/Redis, a node's events are
   * those of the operations made through it: see docs/cluster.md.
   */
  readonly events: QueueEvents;

  /** Stops deliveries of a topic until resumed (durable); schedules are still accepted. */
  pause(topic: string): Promise<TopicInfo>;
  /** Delivers a paused topic's messages again. */
  resume(topic: string): Promise<TopicInfo>;
  /** Changes a topic's settings (paused, rateLimit: src/queue/topics.ts); durable. */
  configureTopic(topic: string, update: TopicUpdate): Promise<TopicInfo>;
  /** A topic's settings and counts. */
  topicInfo(topic: string): Promise<TopicInfo>;
  /** Every topic with messages or settings other than the defaults, by name. */
  topicList(): Promise<TopicInfo[]>;

  /**
   * Recurring schedules (src/queue/recurring.ts): occurrences of a cron expression or an
   * interval become messages. On Valkey/Redis any node changes them and one node runs them
   * (src/cluster/schedules.ts).
   */
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
  /** The in-memory timer wheel of this process, level by level. */
  wheelSnapshot(maxRows?: number): WheelSnapshot;
  /** What opening found on disk; undefined where nothing is recovered (Valkey/Redis). */
  readonly recovery: RecoveryReport | undefined;
  /**
   * Why the queue cannot fully serve now, if it cannot: a queue on Valkey/Redis that gets no
   * answer; an embedded queue whose due messages cannot be loaded, or whose index or
   * checkpoint writes fail and are being retried. Undefined when it can. (A failed log write,
   * which stops the embedded store until a restart, shows in stats().store.stopped.)
   */
  problem(): Promise<string | undefined>;
  /** Resolves once background work started so far has finished. */
  settled(): Promise<void>;
}
