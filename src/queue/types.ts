/** The delay queue's public option and result types, shared by `tickwheel/client`. */

import type { Clock } from '../clock/index.js';
import type { FaultHandler } from './faults.js';
import type { PushOptions } from './push-guard.js';
import type { TraceContext } from '../protocol/trace-context.js';

export type { ListOptions, ListPage, MessageInfo } from '../protocol/model.js';

export interface QueueOptions {
  /** How far ahead messages are held in memory. Default 60,000 ms. */
  horizonMs?: number;
  /** Largest encoded payload accepted. Default 1 MiB. */
  maxPayloadBytes?: number;
  /** Default visibility timeout of a received message. Default 30,000 ms. */
  visibilityMs?: number;
  /** Longest long-poll wait accepted by receive(). Default 60,000 ms. */
  maxWaitMs?: number;
  /** Pushes (docs/push.md): `allow` lists the internal addresses push targets may reach. */
  push?: PushOptions;
  /**
   * Takes the queue's background faults (faults.ts): a store write retried, a lease lost, a push
   * target failing, a handler that threw. Default: a process warning with the same code and text.
   */
  onFault?: FaultHandler;
  /**
   * Whether ack(), ackMany(), nack() and nackMany() wait until their record is durable, as if
   * each passed `{ durable: true }`. Default false: a crash may deliver again the messages acked
   * or nacked in the last group-commit window (docs/storage.md, "Durability").
   */
  durableAcks?: boolean;
  /**
   * Recurring schedules the queue keeps at most. Creating one more (a new name; changing one is
   * always allowed) is refused with ERR_TICKWHEEL_CONFLICT until one is deleted. Default 100,000.
   */
  maxSchedules?: number;
}

export interface DelayQueueOptions extends QueueOptions {
  /** Epoch-millisecond clock. Default: `new SystemClock({ epoch: true })`; a ManualClock in tests. */
  clock?: Clock;
  /** Payload bytes held in memory at most (the rest read back when received). Default 128 MiB. */
  payloadMemoryBytes?: number;
  /** Finished messages whose status get() still reports. Default 10,000. */
  rememberFinished?: number;
}

/** A delivery of a message. `Payload`: the queue's type for it, not checked at run time. */
export interface ReceivedMessage<Payload = unknown> {
  id: string;
  topic: string;
  payload: Payload;
  deliverAt: number;
  /** Deliveries so far, this one included. */
  attempts: number;
  /** Pass to ack() or nack(); valid for this delivery only. */
  receipt: string;
  /** The W3C trace context stored when the message was scheduled (docs/observability.md). */
  trace?: TraceContext;
}

/**
 * A client of the application's PostgreSQL inside its open transaction: pg's Client or
 * PoolClient, or any object whose query() runs a parameterised statement and gives its rows.
 */
export interface TransactionClient {
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
}

export interface ScheduleOptions {
  /**
   * A queue on PostgreSQL: schedule in this client's open transaction, as one of its writes. The
   * messages exist if and only if it commits, and are delivered from its commit on.
   */
  client?: TransactionClient;
}

export interface AckOptions {
  /**
   * Resolve only once the ack survives a crash. Default: the queue's `durableAcks` (false):
   * once applied, its record written with the next group commit.
   */
  durable?: boolean;
}

export interface NackOptions {
  /**
   * `true`: resolve once the retry is durable and the message due again. Default: the queue's
   * `durableAcks` (false): once the delivery has ended, the retry written with the next group
   * commit (a nack that makes a dead letter still waits for its record).
   */
  durable?: boolean;
  /** Redeliver after this long. Default: the message's backoff. */
  delayMs?: number;
  /** Why the delivery failed, kept as the message's lastError (cut to 500 characters). */
  reason?: string;
}

export interface ReceiveOptions {
  /** Messages at most. Default 1, at most 1000. */
  max?: number;
  /** Wait up to this long for a message when none is ready. Default 0. */
  waitMs?: number;
  /** Redeliver unless acked within this long. Default: the queue's visibilityMs. */
  visibilityMs?: number;
  /**
   * Payload bytes at most (as stored). The first message is always delivered; those that do not
   * fit stay ready, with no attempt used. Default 16 MiB.
   */
  maxBytes?: number;
}

export interface ConsumeOptions {
  /** Handlers running at once. Default 1, at most 1000. */
  concurrency?: number;
  /**
   * Messages received ahead of a free handler, waiting in the consumer for one: fewer, larger
   * receives where each is a round trip (a queue on PostgreSQL or Valkey/Redis, the HTTP
   * client). Their visibility timeout runs from the receive; close() runs them too. Default 0,
   * at most 1000.
   */
  prefetch?: number;
  /** Redeliver unless the handler is done within this long. Default: the queue's visibilityMs. */
  visibilityMs?: number;
  /**
   * Failures of the loop: a handler that threw (its message is nacked), a failed receive, ack or
   * nack. Default: a process warning naming the topic, message and attempt.
   */
  onError?: (err: unknown, context: ConsumeErrorContext) => void;
}

/** What a consumer's onError is told besides the error. */
export interface ConsumeErrorContext {
  topic: string;
  /** The message involved, if any (none for a failed receive). */
  id?: string;
  /** Its delivery attempt, this one included. */
  attempts?: number;
}

export type MessageHandler<Payload = unknown> = (
  message: ReceivedMessage<Payload>,
) => Promise<void> | void;

export interface Consumer {
  /** Stops receiving at once, then waits for running handlers and their acks and nacks. */
  close(): Promise<void>;
}

/** Scheduled messages by time until due, and the edges they were counted at (dueTimeline). */
export interface DueTimeline {
  /** Each edge asked for, or, past the in-memory horizon, the whole minute at or before it. */
  edgesMs: number[];
  /** counts[i]: due before edgesMs[i] from now and not before the previous edge; last: the rest. */
  counts: number[];
}
