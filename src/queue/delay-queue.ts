/**
 * The delay queue engine: the near horizon in memory, everything else in the store.
 *
 *   schedule ─► store.add (durable) ─► due within the horizon? ─► timer on the wheel
 *   wheel fires ─► READY in its topic ─► receive: IN FLIGHT, visibility timer on the wheel
 *   ack ─► store.finish            nack / visibility timeout ─► store.move with backoff
 *                                  attempts used up ─► store.bury (dead letter)
 *   every horizonMs / 4: store.loadUntil(now + horizonMs) brings the next slice into memory
 *
 * Time is Unix epoch milliseconds from the queue's clock (by default a monotonic clock anchored
 * to the wall clock at process start). Messages are never delivered before their due time; a
 * burst due at the same instant is delivered in scheduling order.
 *
 * Every operation that changes one message runs under that message's id lock, so concurrent
 * schedule / cancel / ack calls for one id happen one after another, in call order.
 */

import { randomBytes } from 'node:crypto';
import { checkAlarmClock, SystemClock, type Clock } from '../clock/index.js';
import {
  TickwheelStateError,
  TickwheelTypeError,
  checkCallback,
  checkOption,
  describe,
} from '../errors.js';
import { TimerWheel } from '../timer/index.js';
import type { WheelSnapshot } from '../wheel/index.js';
import {
  checkBackoff,
  checkId,
  checkMaxAttempts,
  checkTopic,
  decodePayload,
  dueTime,
  encodePayload,
  payloadBytes,
  reasonOf,
  MAX_REASON_CHARS,
  newMessageId,
  retryDelay,
  type MessageState,
  type MessageStatus,
  type ScheduleRequest,
} from './message.js';
import type { RecoveryReport, Store } from './store.js';

export interface DelayQueueOptions {
  /** Epoch-millisecond clock. Default: `new SystemClock({ epoch: true })`; a ManualClock in tests. */
  clock?: Clock;
  /** How far ahead messages are held in memory. Default 60,000 ms. */
  horizonMs?: number;
  /** Largest encoded payload accepted. Default 1 MiB. */
  maxPayloadBytes?: number;
  /** Default visibility timeout of a received message. Default 30,000 ms. */
  visibilityMs?: number;
  /** Longest long-poll wait accepted by receive(). Default 60,000 ms. */
  maxWaitMs?: number;
  /** Finished messages whose status get() still reports. Default 10,000. */
  rememberFinished?: number;
}

export interface ReceivedMessage {
  id: string;
  topic: string;
  payload: unknown;
  deliverAt: number;
  /** Deliveries so far, this one included. */
  attempts: number;
  /** Pass to ack() or nack(); valid for this delivery only. */
  receipt: string;
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

export interface NackOptions {
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
   * Payload bytes at most (as stored: UTF-8 JSON or raw bytes), so that a batch of large
   * messages cannot exhaust memory. The first message is always delivered, however large;
   * messages that do not fit stay ready for the next receive, with no attempt used. Default
   * 16 MiB.
   */
  maxBytes?: number;
}

/** Default `maxBytes` of receive(). */
export const DEFAULT_RECEIVE_BYTES = 16 * 1024 * 1024;

export interface ConsumeOptions {
  /** Handlers running at once. Default 1, at most 1000. */
  concurrency?: number;
  /** Redeliver unless the handler is done within this long. Default: the queue's visibilityMs. */
  visibilityMs?: number;
  /**
   * Failures of the loop: a handler that threw (the message is nacked and retried with its
   * backoff), a failed receive, ack or nack. Default: a process warning naming the topic, the
   * message id and the attempt.
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

export type MessageHandler = (message: ReceivedMessage) => Promise<void> | void;

interface NearMessage extends MessageState {
  status: 'scheduled' | 'ready' | 'inflight';
  /** Timer on the wheel: the due timer while scheduled, the visibility timer while in flight. */
  timer: number;
  receipt: string | undefined;
  /** Bumped on every change of state, so stale entries in ready lists are skipped. */
  version: number;
  /** In `near` (cheaper to test than a lookup there). */
  held: boolean;
  /** Its slot among the in-flight messages while in flight (named by its receipt), else -1. */
  slot: number;
  /** Its topic's counts of held messages, while held. */
  tally: HeldTally | undefined;
}

/** Held messages of one topic that are ready or in flight (the rest held are scheduled). */
interface HeldTally {
  ready: number;
  inflight: number;
}

interface FinishedMessage extends MessageState {
  status: 'acked' | 'cancelled';
}

interface Waiter {
  wake: () => void;
}

const HOUR_MS = 3_600_000;
/** Upper bounds (ms) of the first-delivery lateness buckets stats() reports. */
const DELIVERY_LATENESS_BUCKETS_MS = [1, 5, 10, 25, 50, 100, 250, 500, 1000, 5000, 30_000, 300_000];

/**
 * Unguessable per process. It starts with a letter: base64url may start with '-', and a receipt
 * that looks like an option is misread by command lines (`tickwheel ack -x...`).
 */
const receiptPrefix = `r${randomBytes(9).toString('base64url')}`;
let receiptCounter = 0;

/**
 * A FIFO of (message, version) pairs in two parallel arrays (no object per entry) that does
 * not shift arrays: the consumed head is cut off in one go once it is most of the list.
 */
class ReadyList {
  private messages: NearMessage[] = [];
  private versions: number[] = [];
  private head = 0;

  push(message: NearMessage): void {
    this.messages.push(message);
    this.versions.push(message.version);
  }

  /** The next message whose version is still the one it was pushed with, if any; kept. */
  peekCurrent(): NearMessage | undefined {
    while (this.head < this.messages.length) {
      const message = this.messages[this.head];
      if (message.version === this.versions[this.head]) return message;
      this.dropHead();
    }
    return undefined;
  }

  /** Removes the head entry. */
  dropHead(): void {
    this.head++;
    if (this.head > 1024 && this.head * 2 > this.messages.length) {
      this.messages = this.messages.slice(this.head);
      this.versions = this.versions.slice(this.head);
      this.head = 0;
    }
  }

  /** Puts messages back in front, in the order given (into consumed room when there is some). */
  putBack(messages: NearMessage[]): void {
    if (this.head < messages.length) {
      this.messages = [...messages, ...this.messages.slice(this.head)];
      this.versions = [...messages.map((m) => m.version), ...this.versions.slice(this.head)];
      this.head = 0;
      return;
    }
    for (let i = messages.length - 1; i >= 0; i--) {
      this.head--;
      this.messages[this.head] = messages[i];
      this.versions[this.head] = messages[i].version;
    }
  }

  get length(): number {
    return this.messages.length - this.head;
  }
}

export class QueueEngine {
  protected readonly store: Store;
  private readonly clock: Clock;
  private readonly wheel: TimerWheel<NearMessage>;
  private readonly horizonMs: number;
  private readonly maxPayloadBytes: number;
  private readonly visibilityMs: number;
  private readonly maxWaitMs: number;
  private readonly rememberFinished: number;
  private readonly near = new Map<string, NearMessage>();
  /**
   * Counts of the held messages, kept with every change of state so that stats() and
   * dueHistogram() never walk memory (at a million held messages that took ~100 ms): per
   * topic, how many are ready and in flight; by the hour of their due time, all held; by due
   * time (ms from `countBase`, small integers), the scheduled ones.
   */
  private readonly heldTallies = new Map<string, HeldTally>();
  private readonly heldHours = new Map<number, number>();
  private readonly scheduledDue = new Map<number, number>();
  private readonly countBase: number;
  /**
   * In-flight messages by slot. A receipt names its slot, so ack() finds the message with an
   * array index instead of a lookup by string; the receipt itself is then compared in full.
   */
  private readonly inflight: Array<NearMessage | undefined> = [];
  private readonly freeSlots: number[] = [];
  private readonly ready = new Map<string, ReadyList>();
  private readonly waiters = new Map<string, Set<Waiter>>();
  private readonly idLocks = new Map<string, Promise<unknown>>();
  /**
   * Finished messages get() still reports, in two generations: when the newer one holds
   * rememberFinished, it becomes the older one and the oldest are dropped in one go. The
   * message objects themselves are kept (payload dropped), so finishing allocates nothing.
   */
  private finished = new Map<string, FinishedMessage>();
  private finishedBefore = new Map<string, FinishedMessage>();
  private readonly consumers = new Set<{ close(): Promise<void> }>();
  /**
   * Long polls waiting and consumers running. While there are any, one ref'd native timer keeps
   * the process alive, as awaiting a `setTimeout` would; the wheel itself is unref'd, so a queue
   * that only holds scheduled messages never keeps a process from ending, and close() ends every
   * wait, so a closed queue holds nothing.
   */
  private waiting = 0;
  private keepAlive: ReturnType<typeof setInterval> | undefined;
  private horizonTimer: ReturnType<TimerWheel['setInterval']> | undefined;
  private loadedUntil = 0;
  /** Messages handed in while a horizon load runs: they join the wheel after it, in order. */
  private deferred: NearMessage[] | undefined;
  /**
   * Ids cancelled or moved through the store (not in memory) while a horizon load runs. The load
   * may have read such a message before that change: its copy is stale and must not be taken
   * over, or a cancelled message would still be delivered (or a moved one at its old time).
   */
  private superseded: Set<string> | undefined;
  private loading: Promise<void> | undefined;
  private closed = false;
  private counters = {
    scheduled: 0,
    deduplicated: 0,
    fired: 0,
    delivered: 0,
    acked: 0,
    nacked: 0,
    expired: 0,
    dead: 0,
    cancelled: 0,
    rescheduled: 0,
  };
  private readonly lateness: Float64Array = new Float64Array(4096);
  private latenessCount = 0;
  private latenessSum = 0;
  /**
   * Messages handed in (scheduled, rescheduled) with a due time already past, by id, with the
   * time they were handed in: their lateness counts from then, not from a due time that may be
   * months earlier. An entry lives until the message's first delivery (or its removal).
   */
  private readonly lateFrom = new Map<string, number>();
  /** First deliveries by lateness: counts per DELIVERY_LATENESS_BUCKETS_MS bucket, then the rest. */
  private readonly deliveryLateness = new Float64Array(DELIVERY_LATENESS_BUCKETS_MS.length + 1);
  private deliveryLatenessSum = 0;
  recovery: RecoveryReport | undefined;

  protected constructor(store: Store, options: DelayQueueOptions = {}) {
    this.store = store;
    this.clock = options.clock ?? new SystemClock({ epoch: true });
    checkAlarmClock(this.clock);
    this.horizonMs = checkOption(options.horizonMs ?? 60_000, 'horizonMs', 10, 86_400_000);
    this.maxPayloadBytes = checkOption(
      options.maxPayloadBytes ?? 1024 * 1024,
      'maxPayloadBytes',
      0,
      16 * 1024 * 1024 - 1024,
      true,
    );
    this.visibilityMs = checkOption(options.visibilityMs ?? 30_000, 'visibilityMs', 1, 43_200_000);
    this.maxWaitMs = checkOption(options.maxWaitMs ?? 60_000, 'maxWaitMs', 0, 3_600_000);
    this.rememberFinished = checkOption(
      options.rememberFinished ?? 10_000,
      'rememberFinished',
      0,
      10_000_000,
      true,
    );
    this.countBase = Math.floor(this.clock.now());
    this.wheel = new TimerWheel<NearMessage>({
      clock: this.clock,
      unref: true,
      onExpire: (message) => this.onTimer(message),
      onError: (err) => process.emitWarning(err as Error),
    });
  }

  /** Recovers the store and starts the horizon loader. Called once by open(). */
  protected async start(): Promise<void> {
    const horizon = this.store.horizonEnd(this.clock.now() + this.horizonMs);
    this.loadedUntil = horizon;
    this.recovery = await this.store.recover(horizon, (message) => this.takeOver(message));
    this.horizonTimer = this.wheel.setInterval(
      () => void this.advanceHorizon(),
      Math.max(5, this.horizonMs / 4),
    );
  }

  /** Schedules a message. Resolves once it is durable. */
  async schedule(request: ScheduleRequest): Promise<{ id: string; deliverAt: number }> {
    this.checkOpen();
    const now = this.clock.now();
    const message = this.prepare(request, now, '');
    if (request.id === undefined) return this.add(message, now);
    return this.addUnique(message, now);
  }

  /**
   * Schedules many messages at once, like `schedule` for each but cheaper: one promise for the
   * batch, and the records share the store's group commit. Every request is checked before any
   * is written, so a bad one (the error names its index) schedules nothing. Resolves, in request
   * order, once all are durable. If the store fails part way (an I/O error), the promise rejects
   * and any subset may have been scheduled: give ids, and retry, to make that harmless.
   */
  async scheduleMany(
    requests: readonly ScheduleRequest[],
  ): Promise<Array<{ id: string; deliverAt: number }>> {
    this.checkOpen();
    if (!Array.isArray(requests)) {
      throw new TickwheelTypeError(
        'ERR_TICKWHEEL_INVALID_MESSAGE',
        `scheduleMany takes an array of messages, got ${describe(requests)}`,
      );
    }
    const now = this.clock.now();
    const messages = new Array<NearMessage>(requests.length);
    for (let i = 0; i < requests.length; i++) {
      messages[i] = this.prepare(requests[i], now, `messages[${i}]: `);
    }
    const results = new Array<{ id: string; deliverAt: number }>(messages.length);
    const unique: Array<Promise<unknown>> = [];
    const plain: NearMessage[] = [];
    // Each plain message's promise; records of one group commit share theirs, so the distinct
    // ones (usually one or two per batch) are what is waited for.
    const durables: Array<Promise<void>> = [];
    const distinct: Array<Promise<void>> = [];
    const horizon = this.loadedUntil;
    for (let i = 0; i < messages.length; i++) {
      const message = messages[i];
      if (requests[i].id !== undefined) {
        unique.push(this.addUnique(message, now).then((result) => (results[i] = result)));
        continue;
      }
      results[i] = { id: message.id, deliverAt: message.deliverAt };
      plain.push(message);
      if (message.deliverAt < now) this.lateFrom.set(message.id, now);
      const durable = this.store.add(message, message.deliverAt < horizon);
      durables.push(durable);
      if (durable !== distinct[distinct.length - 1]) distinct.push(durable);
    }
    let failure: { error: unknown } | undefined;
    let failed: Set<Promise<void>> | undefined;
    try {
      await Promise.all(distinct);
    } catch (error) {
      failure = { error };
      const outcomes = await Promise.allSettled(distinct);
      failed = new Set(distinct.filter((_, i) => outcomes[i].status === 'rejected'));
    }
    for (let i = 0; i < plain.length; i++) {
      if (failed?.has(durables[i])) {
        this.lateFrom.delete(plain[i].id);
        continue;
      }
      const message = plain[i];
      this.counters.scheduled++;
      // Taken over only now, after the batch is durable, like a single schedule().
      this.added(message, message.deliverAt < horizon, true);
    }
    try {
      await Promise.all(unique);
    } catch (error) {
      failure ??= { error };
    }
    if (failure !== undefined) throw failure.error;
    return results;
  }
  /** Cancels a message that has not been acknowledged. True if it was live. */
  async cancel(id: string): Promise<boolean> {
    this.checkOpen();
    checkId(id);
    return this.withIdLock(id, async () => {
      let message: MessageState | undefined = this.near.get(id);
      if (message === undefined) {
        const stored = await this.store.lookup(id);
        // A horizon load may have taken the message into memory while lookup ran.
        message = this.near.get(id) ?? stored;
        if (message === undefined) return false;
      }
      if (this.near.get(id) === message) this.forget(message as NearMessage);
      else this.superseded?.add(id);
      await this.store.finish(message, 'cancelled');
      this.remember(message, 'cancelled');
      this.counters.cancelled++;
      return true;
    });
  }

  /** Moves a message that is scheduled or ready to a new due time. False if in flight or gone. */
  async reschedule(id: string, when: { delayMs?: number; deliverAt?: number }): Promise<boolean> {
    return (await this.rescheduleTo(id, when)) !== undefined;
  }

  /**
   * Like reschedule(), but resolves with the due time the queue stored (delays round up to
   * the next ms, times down), or undefined where reschedule() gives false.
   */
  async rescheduleTo(
    id: string,
    when: { delayMs?: number; deliverAt?: number },
  ): Promise<number | undefined> {
    this.checkOpen();
    checkId(id);
    if (typeof when !== 'object' || when === null) {
      throw new TickwheelTypeError(
        'ERR_TICKWHEEL_INVALID_MESSAGE',
        'give { delayMs } or { deliverAt }',
      );
    }
    const now = this.clock.now();
    const deliverAt = dueTime(when, now, true);
    return this.withIdLock(id, async () => {
      let near = this.near.get(id);
      let message: MessageState | undefined = near;
      if (message === undefined) {
        const stored = await this.store.lookup(id);
        // A horizon load may have taken the message into memory while lookup ran.
        near = this.near.get(id);
        message = near ?? stored;
      }
      if (message === undefined || (near !== undefined && near.status === 'inflight')) {
        return undefined;
      }
      if (near === undefined && (message as { status?: string }).status === 'dead') {
        return undefined;
      }
      if (near !== undefined) this.forget(near);
      else this.superseded?.add(id);
      const previous = message.deliverAt;
      message.deliverAt = deliverAt;
      if (deliverAt < now) this.lateFrom.set(id, now);
      try {
        await this.relocate(message, previous);
      } catch (err) {
        this.lateFrom.delete(id);
        throw err;
      }
      this.counters.rescheduled++;
      return deliverAt;
    });
  }

  /** Current state of a message, or undefined if unknown (or finished long ago). */
  async get(id: string): Promise<MessageInfo | undefined> {
    this.checkOpen();
    checkId(id);
    const near = this.near.get(id);
    if (near !== undefined) return info(near, near.status);
    const stored = await this.store.lookup(id);
    if (stored !== undefined) return info(stored, stored.status);
    const done = this.finished.get(id) ?? this.finishedBefore.get(id);
    return done === undefined ? undefined : info(done, done.status);
  }

  /** Takes up to `max` ready messages of a topic, waiting up to `waitMs` for the first. */
  async receive(topic: string, options: ReceiveOptions = {}): Promise<ReceivedMessage[]> {
    this.checkOpen();
    checkTopic(topic);
    const max = checkOption(options.max ?? 1, 'max', 1, 1000, true);
    const waitMs = checkOption(options.waitMs ?? 0, 'waitMs', 0, this.maxWaitMs);
    const visibilityMs = checkOption(
      options.visibilityMs ?? this.visibilityMs,
      'visibilityMs',
      1,
      43_200_000,
    );
    const maxBytes = checkOption(
      options.maxBytes ?? DEFAULT_RECEIVE_BYTES,
      'maxBytes',
      1,
      Number.MAX_SAFE_INTEGER,
      true,
    );
    let taken = this.take(topic, max, visibilityMs, maxBytes);
    if (taken.length === 0 && waitMs > 0) {
      await this.waitForReady(topic, waitMs);
      if (this.closed) return [];
      taken = this.take(topic, max, visibilityMs, maxBytes);
    }
    for (const message of taken) {
      if (message.payload === undefined) return this.readTaken(topic, taken, maxBytes);
    }
    // All payloads in memory (the usual case): no promise per message.
    for (const message of taken) if (message.attempts === 1) this.observeDelivery(message);
    return taken.map((message) => received(message, message.payload as Uint8Array));
  }

  /**
   * Reads the payloads of taken messages some of which are not in memory. Those past `maxBytes`
   * (sizes known only now) and, if a read fails, all of them are handed back unused.
   */
  private async readTaken(
    topic: string,
    taken: NearMessage[],
    maxBytes: number,
  ): Promise<ReceivedMessage[]> {
    const receipts = taken.map((message) => message.receipt);
    let payloads: Uint8Array[];
    try {
      payloads = await Promise.all(
        taken.map((message) => message.payload ?? this.store.payloadOf(message)),
      );
    } catch (err) {
      this.handBack(topic, taken, receipts, 0);
      throw err;
    }
    let bytes = 0;
    let fit = 0;
    while (fit < taken.length) {
      bytes += payloads[fit].byteLength;
      if (fit > 0 && bytes > maxBytes) break;
      fit++;
    }
    this.handBack(topic, taken, receipts, fit);
    const answer: ReceivedMessage[] = [];
    for (let i = 0; i < fit; i++) {
      if (taken[i].attempts === 1) this.observeDelivery(taken[i]);
      answer.push(received(taken[i], payloads[i]));
    }
    return answer;
  }

  /** Acknowledges a delivery: the message is done. False for an unknown or stale receipt. */
  ack(receipt: string): Promise<boolean> {
    let message: NearMessage | undefined;
    try {
      this.checkOpen();
      message = this.receiptOwner(receipt);
    } catch (err) {
      return Promise.reject(err as Error);
    }
    if (message === undefined) return Promise.resolve(false);
    // The common case, nothing else running on this id: the change to memory and the store's
    // tables is synchronous, so no lock is needed, only the wait for durability. Later calls
    // on the id see the message gone, and their own records land after this one in the log.
    if (!this.idLocks.has(message.id)) return this.finishAcked(message);
    const owner = message;
    return this.withIdLock(owner.id, () =>
      this.receiptOwner(receipt) === owner ? this.finishAcked(owner) : Promise.resolve(false),
    );
  }

  private finishAcked(message: NearMessage): Promise<boolean> {
    return this.finishQuietly(message).then(() => true);
  }

  /**
   * Ends an acknowledged delivery and returns the store's promise as it is: under group commit
   * every ack of one batch shares it, so a consumer waits once per batch, not once per ack.
   * (get() reports the message acked from here on; the promise says when that is durable.)
   */
  private finishQuietly(message: NearMessage): Promise<unknown> {
    this.forget(message);
    const durable = this.store.finish(message, 'acked');
    this.remember(message, 'acked');
    this.counters.acked++;
    return durable;
  }

  /** ack() for the built-in consumer: the store's promise, no promise of its own. */
  private ackQuietly(receipt: string): Promise<unknown> {
    const message = this.receiptOwner(receipt);
    if (message === undefined || this.idLocks.has(message.id)) return this.ack(receipt);
    return this.finishQuietly(message);
  }

  /**
   * Gives a delivery back: redelivered after `delayMs` (default: the message's backoff), or
   * dead if it has used up its attempts. `reason` (why it failed) is kept as the message's
   * `lastError`, with the dead letter too.
   */
  async nack(receipt: string, options: NackOptions = {}): Promise<boolean> {
    this.checkOpen();
    if (options.delayMs !== undefined) checkOption(options.delayMs, 'delayMs', 0, 86_400_000 * 365);
    const reason = options.reason === undefined ? undefined : checkReason(options.reason);
    const message = this.receiptOwner(receipt);
    if (message === undefined) return false;
    return this.withIdLock(message.id, async () => {
      if (this.receiptOwner(receipt) !== message) return false;
      this.counters.nacked++;
      message.lastError = reason ?? 'nacked';
      await this.retry(message, options.delayMs);
      return true;
    });
  }

  /**
   * ack() for several deliveries: results[i] is what ack(receipts[i]) would give (a receipt
   * repeated in the list is true once). Every receipt is checked before any is acknowledged.
   * Resolves once all are durable (under group commit they share the fsync); if the store
   * fails, it rejects, and any subset may have been acknowledged.
   */
  async ackMany(receipts: readonly string[]): Promise<boolean[]> {
    this.checkOpen();
    this.checkReceipts(receipts, 'ackMany');
    return Promise.all(receipts.map((receipt) => this.ack(receipt)));
  }

  /** nack() for several deliveries, with the same options for all; results as ackMany. */
  async nackMany(receipts: readonly string[], options: NackOptions = {}): Promise<boolean[]> {
    this.checkOpen();
    this.checkReceipts(receipts, 'nackMany');
    if (typeof options !== 'object' || options === null) {
      throw new TickwheelTypeError(
        'ERR_TICKWHEEL_INVALID_OPTION',
        `nackMany options must be an object such as { delayMs: 5000 }, got ${describe(options)}`,
      );
    }
    if (options.delayMs !== undefined) checkOption(options.delayMs, 'delayMs', 0, 86_400_000 * 365);
    return Promise.all(receipts.map((receipt) => this.nack(receipt, options)));
  }

  private checkReceipts(receipts: readonly string[], method: string): void {
    if (!Array.isArray(receipts)) {
      throw new TickwheelTypeError(
        'ERR_TICKWHEEL_INVALID_MESSAGE',
        `${method} takes an array of receipts, got ${describe(receipts)}`,
      );
    }
    for (let i = 0; i < receipts.length; i++) {
      if (typeof receipts[i] !== 'string') {
        throw new TickwheelTypeError(
          'ERR_TICKWHEEL_INVALID_MESSAGE',
          `receipts[${i}] must be the string receive() returned, got ${describe(receipts[i])}`,
        );
      }
    }
  }

  /**
   * Runs `handler` for each message of a topic; acks when it resolves, nacks when it throws
   * (the error's message becomes the delivery's `lastError`, kept with a dead letter). Options
   * are checked here, at once. The loop never stops on its own: a failed receive, ack or nack
   * goes to `onError` and the loop carries on after a pause; only close() (of the consumer or
   * the queue) ends it.
   */
  consume(
    topic: string,
    handler: MessageHandler,
    options: ConsumeOptions = {},
  ): { close(): Promise<void> } {
    this.checkOpen();
    checkTopic(topic);
    checkCallback(handler, 'handler');
    if (typeof options !== 'object' || options === null) {
      throw new TickwheelTypeError(
        'ERR_TICKWHEEL_INVALID_OPTION',
        `consume options must be an object, got ${describe(options)}`,
      );
    }
    const concurrency = checkOption(options.concurrency ?? 1, 'concurrency', 1, 1000, true);
    const visibilityMs =
      options.visibilityMs === undefined
        ? undefined
        : checkOption(options.visibilityMs, 'visibilityMs', 1, 43_200_000);
    if (options.onError !== undefined) checkCallback(options.onError, 'onError');
    const onError = options.onError ?? reportConsumeError;
    const report = (err: unknown, context: ConsumeErrorContext) => {
      try {
        onError(err, context);
      } catch (thrown) {
        process.emitWarning(thrown as Error);
      }
    };
    let open = true;
    let active = 0;
    let slotFreed: (() => void) | undefined;
    let pause: { timer: ReturnType<typeof setTimeout>; wake: () => void } | undefined;
    // A running consumer keeps the process alive, like an open server.
    this.holdProcess();
    // Acks and nacks under way, by the promise they wait on: acks of one group commit share one.
    const settling = new Set<Promise<unknown>>();
    const track = (wait: Promise<unknown>, message: ReceivedMessage) => {
      if (settling.has(wait)) return;
      settling.add(wait);
      const done = () => {
        settling.delete(wait);
        slotFreed?.();
      };
      wait.then(done, (err: unknown) => {
        done();
        if (!this.closed) report(err, contextOf(topic, message));
      });
    };
    // The slot is free once the handler is done; the ack's fsync need not hold up the next
    // message (the ack still completes before close() resolves). No async function per
    // message: a synchronous handler costs no promise of its own.
    const settle = (message: ReceivedMessage, failed: boolean, failure: unknown) => {
      active--;
      slotFreed?.();
      // Once closed, the message is redelivered after its visibility timeout.
      if (!this.closed) {
        track(
          failed
            ? this.nack(message.receipt, { reason: reasonOf(failure) })
            : this.ackQuietly(message.receipt),
          message,
        );
      }
      if (failed) report(failure, contextOf(topic, message));
    };
    const run = (message: ReceivedMessage) => {
      let result: unknown;
      try {
        result = handler(message);
      } catch (err) {
        settle(message, true, err);
        return;
      }
      if (isThenable(result)) {
        result.then(
          () => settle(message, false, undefined),
          (err: unknown) => settle(message, true, err),
        );
      } else settle(message, false, undefined);
    };
    const rest = (ms: number) =>
      new Promise<void>((wake) => {
        pause = { timer: setTimeout(wake, ms), wake };
      }).then(() => (pause = undefined));
    const loop = (async () => {
      let failures = 0;
      while (open && !this.closed) {
        if (active >= concurrency) {
          await new Promise<void>((resolve) => (slotFreed = resolve));
          slotFreed = undefined;
          continue;
        }
        let batch: ReceivedMessage[];
        try {
          batch = await this.receive(topic, {
            max: concurrency - active,
            waitMs: 1000,
            ...(visibilityMs === undefined ? {} : { visibilityMs }),
          });
          failures = 0;
        } catch (err) {
          if (!open || this.closed) break;
          report(err, { topic });
          // 100 ms, doubling to 5 s while receive keeps failing (a disk read error, say).
          await rest(Math.min(5000, 100 * 2 ** failures++));
          continue;
        }
        for (const message of batch) {
          active++;
          run(message);
        }
      }
    })();
    let closing: Promise<void> | undefined;
    const consumer = {
      close: () =>
        (closing ??= (async () => {
          open = false;
          this.releaseProcess();
          this.consumers.delete(consumer);
          if (pause !== undefined) {
            clearTimeout(pause.timer);
            pause.wake();
          }
          this.wakeAll(topic);
          await loop;
          while (active > 0 || settling.size > 0)
            await new Promise<void>((resolve) => (slotFreed = resolve));
        })()),
    };
    this.consumers.add(consumer);
    return consumer;
  }

  /** Dead messages of a topic (those that used up their attempts), oldest first. */
  async deadLetters(topic: string, limit = 100): Promise<MessageInfo[]> {
    this.checkOpen();
    checkTopic(topic);
    checkOption(limit, 'limit', 1, 10_000, true);
    const dead = await this.store.dead(topic, limit);
    return dead.map((message) => info(message, 'dead'));
  }

  /** Puts a dead message back: due `delayMs` from now (default 0) with its attempts reset. */
  async requeue(id: string, options: { delayMs?: number } = {}): Promise<boolean> {
    this.checkOpen();
    checkId(id);
    const deliverAt = dueTime({ delayMs: options.delayMs ?? 0 }, this.clock.now());
    return this.withIdLock(id, async () => {
      const stored = await this.store.lookup(id);
      if (stored === undefined || stored.status !== 'dead') return false;
      const previous = stored.deliverAt;
      stored.deliverAt = deliverAt;
      stored.attempts = 0;
      await this.relocate(stored, previous);
      return true;
    });
  }

  async stats(): Promise<Record<string, unknown>> {
    // Per topic: ready and in flight from memory; scheduled and dead from the store's counts,
    // which cover every live message wherever it is held (memory or disk).
    const byTopic: Record<
      string,
      { scheduled: number; ready: number; inflight: number; dead: number }
    > = {};
    const topicOf = (topic: string) =>
      (byTopic[topic] ??= { scheduled: 0, ready: 0, inflight: 0, dead: 0 });
    for (const [topic, { pending, dead }] of this.store.counts().topics) {
      const entry = topicOf(topic);
      entry.scheduled = pending;
      entry.dead = dead;
    }
    for (const [topic, { ready, inflight }] of this.heldTallies) {
      if (ready + inflight === 0) continue;
      const entry = topicOf(topic);
      entry.ready = ready;
      entry.inflight = inflight;
      entry.scheduled = Math.max(0, entry.scheduled - ready - inflight);
    }
    const samples = this.lateness
      .slice(0, Math.min(this.latenessCount, this.lateness.length))
      .sort();
    const pick = (q: number) =>
      samples.length === 0 ? null : samples[Math.floor(q * (samples.length - 1))];
    const cumulative = Array.from(this.deliveryLateness);
    for (let i = 1; i < cumulative.length; i++) cumulative[i] += cumulative[i - 1];
    return {
      ...this.counters,
      inMemory: this.near.size,
      loadedUntil: this.loadedUntil,
      topics: byTopic,
      latenessMs: {
        p50: pick(0.5),
        p99: pick(0.99),
        max: samples.length ? samples[samples.length - 1] : null,
        count: this.latenessCount,
        sum: this.latenessSum,
      },
      deliveryLatenessMs: {
        buckets: DELIVERY_LATENESS_BUCKETS_MS.map((le, i) => [le, cumulative[i]]),
        count: cumulative[cumulative.length - 1],
        sum: this.deliveryLatenessSum,
      },
      timers: this.wheel.stats(),
      store: this.store.stats(),
    };
  }

  /**
   * Every scheduled message (not yet due), by time until due: counts[i] holds those due before
   * `edgesMs[i]` from now and not before the previous edge; the last count holds the rest.
   * Messages in memory (due within the horizon) count by their exact due time; those still on
   * disk by the hour they are due in, taken as the start of that hour or the end of the
   * horizon, whichever is later (their due time is never earlier than that). Costs one step
   * per distinct due time in memory and per hour on disk, never a walk over messages.
   */
  dueHistogram(edgesMs: readonly number[]): number[] {
    const counts = new Array<number>(edgesMs.length + 1).fill(0);
    const now = this.clock.now();
    const bucketOf = (until: number) => {
      let bucket = 0;
      while (bucket < edgesMs.length && until >= edgesMs[bucket]) bucket++;
      return bucket;
    };
    // The store counts every live message by hour, including those in memory: take those out.
    const far = new Map(this.store.counts().hours);
    for (const [hourNumber, held] of this.heldHours) {
      const hour = hourNumber * HOUR_MS;
      const left = (far.get(hour) ?? 0) - held;
      if (left > 0) far.set(hour, left);
      else far.delete(hour);
    }
    // forEach, not for-of: no entry array per distinct due time.
    const since = this.countBase - now;
    this.scheduledDue.forEach((count, due) => (counts[bucketOf(since + due)] += count));
    for (const [hour, count] of far) {
      counts[bucketOf(Math.max(hour, this.loadedUntil) - now)] += count;
    }
    return counts;
  }

  /**
   * The start of a live or dead message's payload, for people looking at it: JSON text (or
   * base64 for bytes) cut to `maxChars`. Undefined when the message is not live or dead.
   */
  async payloadPreview(
    id: string,
    maxChars = 200,
  ): Promise<{ preview: string; truncated: boolean } | undefined> {
    this.checkOpen();
    checkId(id);
    const message: MessageState | undefined = this.near.get(id) ?? (await this.store.lookup(id));
    if (message === undefined) return undefined;
    const bytes = message.payload ?? (await this.store.payloadOf(message));
    const payload = decodePayload(message.payloadKind, bytes);
    const text =
      payload instanceof Uint8Array
        ? Buffer.from(payload).toString('base64')
        : (JSON.stringify(payload) ?? 'undefined');
    return { preview: text.slice(0, maxChars), truncated: text.length > maxChars };
  }

  /** The in-memory timer wheel (due and visibility timers), level by level. */
  wheelSnapshot(maxRows?: number): WheelSnapshot {
    return this.wheel.wheelSnapshot(maxRows);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    await Promise.all([...this.consumers].map((consumer) => consumer.close()));
    this.closed = true;
    await this.settled();
    for (const topic of this.waiters.keys()) this.wakeAll(topic);
    await Promise.allSettled([...this.idLocks.values()]);
    this.wheel.close();
    await this.store.close();
  }

  // ---- internals -------------------------------------------------------------------------

  /** Checks a schedule request and builds its message. `where` prefixes error messages. */
  private prepare(request: ScheduleRequest, now: number, where: string): NearMessage {
    if (typeof request !== 'object' || request === null) {
      throw new TickwheelTypeError(
        'ERR_TICKWHEEL_INVALID_MESSAGE',
        `${where}a message must be an object, got ${describe(request)}`,
      );
    }
    try {
      const topic = checkTopic(request.topic);
      const deliverAt = dueTime(request, now);
      const maxAttempts = checkMaxAttempts(request.maxAttempts);
      const backoff = checkBackoff(request.backoff);
      const { kind, bytes, text } = encodePayload(request.payload, this.maxPayloadBytes);
      const id = request.id === undefined ? newMessageId(now) : checkId(request.id);
      const message = newNear(id, topic, deliverAt, 0, maxAttempts, backoff, kind, bytes, 0);
      message.payloadText = text;
      return message;
    } catch (err) {
      if (where !== '' && err instanceof Error) err.message = where + err.message;
      throw err;
    }
  }

  /** Adds a message with a caller-given id, unless that id is pending already (dedup). */
  private addUnique(message: NearMessage, now: number): Promise<{ id: string; deliverAt: number }> {
    return this.withIdLock(message.id, async () => {
      const existing = this.near.get(message.id) ?? (await this.store.lookup(message.id));
      if (existing !== undefined && existing.status !== 'dead') {
        this.counters.deduplicated++;
        return { id: existing.id, deliverAt: existing.deliverAt };
      }
      return this.add(message, now);
    });
  }

  private async add(message: NearMessage, now: number): Promise<{ id: string; deliverAt: number }> {
    const inHorizon = message.deliverAt < this.loadedUntil;
    if (message.deliverAt < now) this.lateFrom.set(message.id, now);
    try {
      await this.store.add(message, inHorizon);
    } catch (err) {
      this.lateFrom.delete(message.id);
      throw err;
    }
    this.counters.scheduled++;
    this.added(message, inHorizon);
    return { id: message.id, deliverAt: message.deliverAt };
  }

  /**
   * A message the store has added: one due within the horizon is taken over with its payload
   * in memory (as bytes); any other keeps no payload here.
   */
  private added(message: NearMessage, inHorizon: boolean, fresh = false): void {
    if (inHorizon) {
      message.payload = payloadBytes(message);
      message.payloadText = undefined;
      this.takeOver(message, fresh);
    } else {
      message.payload = undefined;
      message.payloadText = undefined;
    }
  }

  /**
   * Records a new due time for a message not in memory (or just taken out of it).
   * `previousDeliverAt`: the due time the store had for it, which its counts move it from.
   */
  private async relocate(message: MessageState, previousDeliverAt: number): Promise<void> {
    const inHorizon = message.deliverAt < this.loadedUntil;
    await this.store.move(message, inHorizon, previousDeliverAt);
    if (inHorizon) this.takeOver(message);
  }

  /** Brings a message into memory as scheduled, with its due timer. */
  private takeOver(state: MessageState, fresh = false): void {
    // A fresh message (just scheduled, its id new) cannot be there already: no lookup.
    if (!fresh && this.near.has(state.id)) return;
    // A message from the store gets an object of the engine's own shape, all fields set at
    // once: adding them one by one to the store's object would leave every message loaded
    // from disk with a different hidden class (slow in every hot path after this).
    const message = 'held' in state ? (state as NearMessage) : nearMessage(state);
    message.status = 'scheduled';
    message.receipt = undefined;
    message.version++;
    message.slot = -1;
    this.near.set(message.id, message);
    message.held = true;
    let tally = this.heldTallies.get(message.topic);
    if (tally === undefined)
      this.heldTallies.set(message.topic, (tally = { ready: 0, inflight: 0 }));
    message.tally = tally;
    bump(this.heldHours, Math.floor(message.deliverAt / HOUR_MS), 1);
    bump(this.scheduledDue, message.deliverAt - this.countBase, 1);
    if (this.deferred !== undefined) this.deferred.push(message);
    else this.arm(message);
  }

  /** Due already: ready at once. Otherwise a timer for its due time. */
  private arm(message: NearMessage): void {
    if (message.deliverAt <= this.clock.now()) this.makeReady(message);
    else message.timer = this.wheel.scheduleAt(message.deliverAt, message);
  }

  /** When a message could first have been delivered: its due time, unless handed in later. */
  private dueFrom(message: NearMessage): number {
    if (this.lateFrom.size === 0) return message.deliverAt;
    return Math.max(message.deliverAt, this.lateFrom.get(message.id) ?? 0);
  }

  private makeReady(message: NearMessage): void {
    this.counters.fired++;
    const late = this.clock.now() - this.dueFrom(message);
    this.lateness[this.latenessCount++ % this.lateness.length] = late;
    this.latenessSum += late;
    message.status = 'ready';
    message.version++;
    bump(this.scheduledDue, message.deliverAt - this.countBase, -1);
    (message.tally as HeldTally).ready++;
    let list = this.ready.get(message.topic);
    if (list === undefined) this.ready.set(message.topic, (list = new ReadyList()));
    list.push(message);
    this.wakeOne(message.topic);
  }

  /**
   * Resolves once background work started so far (bringing the next slice of the horizon into
   * memory) has finished. Useful with a ManualClock: advance, await settled(), advance(0).
   */
  async settled(): Promise<void> {
    while (this.loading !== undefined) await this.loading;
  }

  private advanceHorizon(): Promise<void> {
    if (this.closed || this.loading !== undefined) return this.loading ?? Promise.resolve();
    this.loading = this.loadHorizon().finally(() => (this.loading = undefined));
    return this.loading;
  }

  private async loadHorizon(): Promise<void> {
    const until = Math.max(
      this.loadedUntil,
      this.store.horizonEnd(this.clock.now() + this.horizonMs),
    );
    const deferred: NearMessage[] = [];
    this.deferred = deferred;
    const superseded = new Set<string>();
    this.superseded = superseded;
    this.loadedUntil = until;
    const loaded: MessageState[] = [];
    try {
      await this.store.loadUntil(until, (message) => loaded.push(message));
    } catch (err) {
      // What did not load stays with the store, which tries it again on the next tick.
      process.emitWarning(err as Error);
    } finally {
      this.deferred = undefined;
      this.superseded = undefined;
    }
    if (!this.closed) {
      for (const message of loaded) if (!superseded.has(message.id)) this.takeOver(message);
      for (const message of deferred) {
        if (this.near.get(message.id) === message && message.status === 'scheduled') {
          this.arm(message);
        }
      }
    }
  }

  private onTimer(message: NearMessage): void {
    message.timer = 0;
    if (!message.held) return;
    if (message.status === 'scheduled') {
      this.makeReady(message);
    } else if (message.status === 'inflight') {
      this.counters.expired++;
      const receipt = message.receipt;
      void this.withIdLock(message.id, async () => {
        if (receipt === undefined || this.receiptOwner(receipt) !== message) return;
        message.lastError = 'visibility timeout: not acknowledged in time';
        await this.retry(message, undefined);
      }).catch((err: unknown) => process.emitWarning(err as Error));
    }
  }

  private observeDelivery(message: NearMessage): void {
    const late = Math.max(0, this.clock.now() - this.dueFrom(message));
    if (this.lateFrom.size !== 0) this.lateFrom.delete(message.id);
    let bucket = 0;
    while (
      bucket < DELIVERY_LATENESS_BUCKETS_MS.length &&
      late > DELIVERY_LATENESS_BUCKETS_MS[bucket]
    ) {
      bucket++;
    }
    this.deliveryLateness[bucket]++;
    this.deliveryLatenessSum += late;
  }

  /**
   * Takes up to `max` ready messages in flight, stopping before one whose payload (if in memory)
   * would bring the total past `maxBytes`; the first is always taken.
   */
  private take(topic: string, max: number, visibilityMs: number, maxBytes: number): NearMessage[] {
    const list = this.ready.get(topic);
    const taken: NearMessage[] = [];
    if (list === undefined) return taken;
    let bytes = 0;
    while (taken.length < max) {
      const message = list.peekCurrent();
      if (message === undefined) break;
      if (message.status !== 'ready' || !message.held) {
        list.dropHead();
        continue;
      }
      bytes += message.payload?.byteLength ?? 0;
      if (taken.length > 0 && bytes > maxBytes) break;
      list.dropHead();
      message.status = 'inflight';
      message.version++;
      const tally = message.tally as HeldTally;
      tally.ready--;
      tally.inflight++;
      message.attempts++;
      // Unguessable per process, unique per delivery, and cheap: no random bytes per receipt.
      const slot = this.freeSlots.pop() ?? this.inflight.length;
      this.inflight[slot] = message;
      message.slot = slot;
      message.receipt = `${receiptPrefix}${slot.toString(36)}.${(++receiptCounter).toString(36)}`;
      message.timer = this.wheel.schedule(visibilityMs, message);
      taken.push(message);
      this.counters.delivered++;
    }
    if (list.length === 0) this.ready.delete(topic);
    return taken;
  }

  /**
   * Undoes take() for `taken[from..]`, as if those were never received: ready again at the head
   * of their topic, in their order, the attempt not counted. A message changed meanwhile (its
   * receipt no longer the one it was taken with) is left as it is.
   */
  private handBack(
    topic: string,
    taken: NearMessage[],
    receipts: Array<string | undefined>,
    from: number,
  ): void {
    const back: NearMessage[] = [];
    for (let i = from; i < taken.length; i++) {
      const message = taken[i];
      if (message.receipt !== receipts[i] || message.status !== 'inflight') continue;
      this.wheel.clearTimeout(message.timer);
      message.timer = 0;
      message.receipt = undefined;
      this.inflight[message.slot] = undefined;
      this.freeSlots.push(message.slot);
      message.slot = -1;
      message.status = 'ready';
      message.version++;
      const tally = message.tally as HeldTally;
      tally.inflight--;
      tally.ready++;
      message.attempts--;
      this.counters.delivered--;
      back.push(message);
    }
    if (back.length === 0) return;
    let list = this.ready.get(topic);
    if (list === undefined) this.ready.set(topic, (list = new ReadyList()));
    list.putBack(back);
    this.wakeOne(topic);
  }

  /** A delivery failed: back off and redeliver, or bury when attempts are used up. */
  private async retry(message: NearMessage, delayMs: number | undefined): Promise<void> {
    this.forget(message);
    if (message.attempts >= message.maxAttempts) {
      await this.store.bury(message);
      this.counters.dead++;
      return;
    }
    const wait = delayMs ?? retryDelay(message.backoff, message.attempts);
    const previous = message.deliverAt;
    message.deliverAt = Math.ceil(this.clock.now() + wait);
    await this.relocate(message, previous);
  }

  /** Takes a message out of memory: timers, receipts, ready lists (lazily). */
  private forget(message: NearMessage): void {
    if (message.timer !== 0) this.wheel.clearTimeout(message.timer);
    message.timer = 0;
    message.receipt = undefined;
    if (message.slot >= 0) {
      this.inflight[message.slot] = undefined;
      this.freeSlots.push(message.slot);
      message.slot = -1;
    }
    message.version++;
    if (this.lateFrom.size !== 0) this.lateFrom.delete(message.id);
    if (message.held) {
      this.near.delete(message.id);
      message.held = false;
      // A horizon load running now may hand over a copy of it read before this change (an
      // index window read again): that copy is stale and must not be taken over.
      this.superseded?.add(message.id);
      bump(this.heldHours, Math.floor(message.deliverAt / HOUR_MS), -1);
      const tally = message.tally as HeldTally;
      if (message.status === 'scheduled')
        bump(this.scheduledDue, message.deliverAt - this.countBase, -1);
      else if (message.status === 'ready') tally.ready--;
      else tally.inflight--;
      message.tally = undefined;
    }
  }

  private receiptOwner(receipt: unknown): NearMessage | undefined {
    if (typeof receipt !== 'string') {
      throw new TickwheelTypeError(
        'ERR_TICKWHEEL_INVALID_MESSAGE',
        `receipt must be the string receive() returned, got ${describe(receipt)}`,
      );
    }
    // prefix, slot in base 36, '.', counter: read the slot without making strings.
    let slot = 0;
    let at = receiptPrefix.length;
    for (; at < receipt.length; at++) {
      const c = receipt.charCodeAt(at);
      if (c === 46) break;
      const digit = c >= 48 && c <= 57 ? c - 48 : c >= 97 && c <= 122 ? c - 87 : -1;
      if (digit < 0 || slot > 0x3fffffff) return undefined;
      slot = slot * 36 + digit;
    }
    const message = at < receipt.length ? this.inflight[slot] : undefined;
    return message !== undefined && message.status === 'inflight' && message.receipt === receipt
      ? message
      : undefined;
  }

  private remember(message: MessageState, status: 'acked' | 'cancelled'): void {
    if (this.rememberFinished === 0) return;
    const done = message as FinishedMessage;
    done.status = status;
    done.payload = undefined;
    // A copy in the older generation is shadowed by this one (get() looks here first).
    this.finished.set(message.id, done);
    if (this.finished.size >= this.rememberFinished) {
      this.finishedBefore = this.finished;
      this.finished = new Map();
    }
  }

  private waitForReady(topic: string, waitMs: number): Promise<void> {
    return new Promise<void>((resolve) => {
      let set = this.waiters.get(topic);
      if (set === undefined) this.waiters.set(topic, (set = new Set()));
      this.holdProcess();
      const waiter: Waiter = {
        wake: () => {
          this.wheel.clearTimeout(timer);
          if (!set.delete(waiter)) return;
          this.releaseProcess();
          if (set.size === 0 && this.waiters.get(topic) === set) this.waiters.delete(topic);
          resolve();
        },
      };
      const timer = this.wheel.setTimeout(() => waiter.wake(), waitMs);
      set.add(waiter);
    });
  }

  private wakeOne(topic: string): void {
    const set = this.waiters.get(topic);
    if (set === undefined) return;
    for (const waiter of set) {
      waiter.wake();
      return;
    }
  }

  private holdProcess(): void {
    if (this.waiting++ === 0) this.keepAlive = setInterval(() => {}, 1 << 30);
  }

  private releaseProcess(): void {
    if (--this.waiting === 0) {
      clearInterval(this.keepAlive);
      this.keepAlive = undefined;
    }
  }

  private wakeAll(topic: string): void {
    const set = this.waiters.get(topic);
    if (set === undefined) return;
    for (const waiter of [...set]) waiter.wake();
  }

  /** Runs fn after every earlier operation on the same id has settled. */
  private withIdLock<R>(id: string, fn: () => Promise<R>): Promise<R> {
    const previous = this.idLocks.get(id);
    const next = (previous === undefined ? fn() : previous.then(fn, fn)) as Promise<R>;
    const settled = next.catch(() => undefined);
    this.idLocks.set(id, settled);
    void settled.then(() => {
      if (this.idLocks.get(id) === settled) this.idLocks.delete(id);
    });
    return next;
  }

  private checkOpen(): void {
    if (this.closed) {
      throw new TickwheelStateError('ERR_TICKWHEEL_CLOSED', 'this DelayQueue is closed');
    }
  }
}

/** A message of the engine's own shape (one hidden class for all: every field set at once). */
function newNear(
  id: string,
  topic: string,
  deliverAt: number,
  attempts: number,
  maxAttempts: number,
  backoff: MessageState['backoff'],
  payloadKind: number,
  payload: Uint8Array | undefined,
  ref: number,
): NearMessage {
  return {
    id,
    topic,
    deliverAt,
    attempts,
    maxAttempts,
    backoff,
    payloadKind,
    payload,
    payloadText: undefined,
    ref,
    lastError: undefined,
    status: 'scheduled',
    timer: 0,
    receipt: undefined,
    version: 0,
    held: false,
    slot: -1,
    tally: undefined,
  };
}

/** Adds `by` to a count in a map of counts, dropping it at 0. */
function bump(counts: Map<number, number>, key: number, by: number): void {
  const count = (counts.get(key) ?? 0) + by;
  if (count === 0) counts.delete(key);
  else counts.set(key, count);
}

function nearMessage(state: MessageState): NearMessage {
  const { id, topic, deliverAt, attempts, maxAttempts, backoff, payloadKind, payload, ref } = state;
  const near = newNear(
    id,
    topic,
    deliverAt,
    attempts,
    maxAttempts,
    backoff,
    payloadKind,
    payload,
    ref,
  );
  near.lastError = state.lastError;
  return near;
}

function contextOf(topic: string, message: ReceivedMessage): ConsumeErrorContext {
  return { topic, id: message.id, attempts: message.attempts };
}

/** The default onError of consume(): a process warning that says where the failure was. */
function reportConsumeError(err: unknown, context: ConsumeErrorContext): void {
  const where =
    context.id === undefined
      ? `consumer of topic ${context.topic}`
      : `consumer of topic ${context.topic}, message ${context.id}, attempt ${context.attempts}`;
  const warning = new Error(`${where}: ${reasonOf(err)}`, { cause: err });
  warning.name = 'TickwheelConsumerWarning';
  process.emitWarning(warning);
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    value !== null &&
    (typeof value === 'object' || typeof value === 'function') &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}

function received(message: NearMessage, bytes: Uint8Array): ReceivedMessage {
  return {
    id: message.id,
    topic: message.topic,
    payload: decodePayload(message.payloadKind, bytes),
    deliverAt: message.deliverAt,
    attempts: message.attempts,
    receipt: message.receipt as string,
  };
}

function info(message: MessageState, status: MessageStatus): MessageInfo {
  const answer: MessageInfo = {
    id: message.id,
    topic: message.topic,
    status,
    deliverAt: message.deliverAt,
    attempts: message.attempts,
  };
  if (message.lastError !== undefined) answer.lastError = message.lastError;
  return answer;
}

function checkReason(reason: unknown): string {
  if (typeof reason !== 'string') {
    throw new TickwheelTypeError(
      'ERR_TICKWHEEL_INVALID_OPTION',
      `reason must be a string, got ${describe(reason)}`,
    );
  }
  return reason.length > MAX_REASON_CHARS ? `${reason.slice(0, MAX_REASON_CHARS - 1)}…` : reason;
}
