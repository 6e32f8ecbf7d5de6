/**
 * QueueEngine: the delay queue's operations. The near horizon in memory, everything else in
 * the store.
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
 * Every operation that changes one message runs under that message's id lock (locks.ts), so
 * concurrent schedule / cancel / ack calls for one id happen one after another, in call order.
 * ack() skips the lock when nothing else runs on the id: its change to memory and to the
 * store's tables is synchronous, so later calls on the id see it done.
 *
 * This file is the queue's public face: it checks arguments and the closed state, and hands
 * each operation to the part that owns it, each in its own file:
 *
 *   producer.ts    schedule, scheduleMany, cancel, reschedule, requeue
 *   deliveries.ts  receive, ack, nack, visibility timeouts, retries and dead letters
 *   worker.ts      consume() (the same Worker as the client's)
 *   near.ts        the messages held in memory and their states (ready-list.ts, receipts.ts)
 *   horizon.ts     what is in memory and what stays with the store; loading the next slice
 *   waiters.ts     long polls and the process keep-alive
 *   locks.ts       per-id locks          finished.ts   finished ids get() still reports
 *   topics.ts      pause, resume, rate limits: every receive goes through its TopicGate
 *   push.ts        topics with a push target: their messages sent over HTTP by the queue
 *   events.ts      message events (scheduled, delivered, acked, failed, dead, cancelled)
 *   recurring.ts   recurring schedules (cron, intervals) whose occurrences become messages
 *   insights.ts    counters, stats(), dueTimeline()
 *   options.ts     options and argument checks (types.ts: the public types)
 */

import { TickwheelStateError } from '../errors.js';
import { checkCallback, checkOption } from '../validate.js';
import { TimerWheel } from '../timer/index.js';
import type { WheelSnapshot } from '../wheel/index.js';
import { QueueEvents } from './events.js';
import { Scheduler, type ScheduleInfo } from './recurring.js';
import type { RecurringSpec } from './recurring-spec.js';
import { FinishedMemory } from './finished.js';
import { Horizon } from './horizon.js';
import { dueTimeline, QueueInsights, type DueTimeline } from './insights.js';
import { IdLocks } from './locks.js';
import {
  checkId,
  checkRequest,
  checkTopic,
  decodePayload,
  heldPayload,
  payloadPreview,
  type MessageState,
  type MessageStatus,
  type ScheduleRequest,
} from './message.js';
import { delivering, type DueGroup, type Lease, type NearMessage } from './near-message.js';
import { NearHorizon } from './near.js';
import {
  checkNack,
  checkQueueOptions,
  checkReceipts,
  checkReceiveOptions,
  EMBEDDED_RECEIVE_BYTES,
  type QueueSettings,
} from './options.js';
import { Deliveries } from './deliveries.js';
import type { QueueParts } from './parts.js';
import { Producer } from './producer.js';
import type { RecoveryReport, Store } from './store.js';
import { Pushers } from './push.js';
import {
  LocalBuckets,
  settingsView,
  storeSettings,
  TopicGate,
  type TopicInfo,
  type TopicSettings,
  type TopicUpdate,
} from './topics.js';
import type {
  ConsumeOptions,
  DelayQueueOptions,
  MessageHandler,
  MessageInfo,
  NackOptions,
  ReceivedMessage,
  ReceiveOptions,
} from './types.js';
import { Waiters } from './waiters.js';
import { checkConsumeOptions, Worker, type WorkerSource } from './worker.js';

/** The long-poll wait of each receive of the embedded consume(): woken at once when ready. */
const CONSUME_WAIT_MS = 1000;

export class QueueEngine {
  protected readonly store: Store;
  private readonly settings: QueueSettings;
  private readonly wheel: TimerWheel<NearMessage | Lease | DueGroup>;
  private readonly insights = new QueueInsights();
  private readonly waiters: Waiters;
  private readonly near: NearHorizon;
  private readonly horizon: Horizon;
  private readonly locks = new IdLocks();
  private readonly finished: FinishedMemory;
  private readonly producer: Producer;
  private readonly deliveries: Deliveries;
  private readonly topics: TopicGate;
  private readonly recurring: Scheduler;
  private readonly pushers: Pushers;
  /** Message events as they happen (events.ts): an EventEmitter, and watch() for an iterator. */
  readonly events: QueueEvents;
  private readonly consumers = new Set<{ close(): Promise<void> }>();
  /** What consume()'s workers receive from, ack and nack to. */
  private readonly source: WorkerSource;
  private closed = false;
  recovery: RecoveryReport | undefined;

  protected constructor(store: Store, options: DelayQueueOptions = {}) {
    this.store = store;
    this.settings = checkQueueOptions(options);
    const clock = this.settings.clock;
    this.wheel = new TimerWheel<NearMessage | Lease | DueGroup>({
      clock,
      unref: true,
      alignTicks: true, // due order across the wheel and near.arm's due-at-once path
      onExpire: (due) => this.deliveries.onTimer(due),
      onError: (err) => process.emitWarning(err as Error),
    });
    this.waiters = new Waiters(this.wheel);
    // Only a store that reads payloads back can hold messages without theirs.
    const payloadLimit = store.usePayloadBudget ? this.settings.payloadMemoryBytes : Infinity;
    this.near = new NearHorizon(clock, this.wheel, this.insights, this.waiters, payloadLimit);
    store.usePayloadBudget?.(this.near.payloads);
    store.useDeliveries?.({ delivering, inFlight: () => this.near.inFlight() });
    this.horizon = new Horizon(store, clock, this.near, this.settings.horizonMs);
    this.finished = new FinishedMemory(this.settings.rememberFinished);
    const now = () => clock.now();
    this.events = new QueueEvents(now);
    this.topics = new TopicGate(
      storeSettings(store),
      new LocalBuckets(now),
      now,
      (ms, signal) => this.waiters.sleep(ms, signal),
      (topic) => this.waiters.wakeTopic(topic),
    );
    const parts: QueueParts = {
      store,
      clock,
      settings: this.settings,
      near: this.near,
      horizon: this.horizon,
      waiters: this.waiters,
      locks: this.locks,
      insights: this.insights,
      finished: this.finished,
      topics: this.topics,
      events: this.events,
    };
    this.producer = new Producer(parts);
    this.deliveries = new Deliveries(parts);
    this.recurring = new Scheduler(
      clock,
      {
        schedule: (request) => this.producer.schedule(request),
        check: (request) => {
          checkRequest(request, clock.now(), this.settings.maxPayloadBytes, '', false);
        },
        cancel: (id) => this.producer.cancel(id),
        isLive: async (id) => {
          const status = (await this.get(id))?.status;
          return status === 'scheduled' || status === 'ready' || status === 'inflight';
        },
      },
      store,
      (err) => process.emitWarning(err as Error),
    );
    this.source = {
      receive: (topic, { max, waitMs, visibilityMs }, signal) =>
        this.topics.receive(topic, max, waitMs, signal, {
          receive: (granted, left) =>
            this.deliveries.receive(
              topic,
              granted,
              left,
              visibilityMs ?? this.settings.visibilityMs,
              EMBEDDED_RECEIVE_BYTES,
              signal,
            ),
          waitReady: (ms, aborts) => this.waiters.wait(topic, ms, aborts),
        }),
      // A topic with settings of its own (paused, limited) is received from through its gate.
      receiveNow: (topic, { max, visibilityMs }) =>
        this.closed || this.topics.has(topic)
          ? undefined
          : this.deliveries.receiveNow(
              topic,
              max,
              visibilityMs ?? this.settings.visibilityMs,
              EMBEDDED_RECEIVE_BYTES,
            ),
      ack: (receipt, message) => this.deliveries.ackQuietly(receipt, message),
      nack: (receipt, reason) => this.deliveries.nack(receipt, reason, undefined),
    };
    // A topic with a push target runs a Worker over the queue's receive, as a consumer does:
    // while it waits for messages it keeps the process alive, until close().
    this.pushers = new Pushers(
      (topic, handler, settings) =>
        new Worker(this.source, topic, handler, { ...settings, waitMs: CONSUME_WAIT_MS }),
      this.settings.push,
    );
    this.pushers.follow(this.topics);
  }

  /**
   * Recovers the store and starts the horizon loader. Called once by open(). `push: false`
   * starts no pushes (a queue opened only to repair its directory delivers nothing).
   */
  protected async start(options: { push?: boolean } = {}): Promise<void> {
    // Before any message is made ready: a paused topic delivers nothing after a restart.
    await this.topics.load();
    // Before any message is made ready: lateness after a restart counts from the last write.
    await this.insights.noteLastWrite(this.settings.clock, this.store);
    this.recovery = await this.horizon.start(this.wheel);
    // Every schedule brought up to date before open() returns: no consumer can receive yet.
    try {
      await this.recurring.start();
    } catch (err) {
      await this.recurring.close();
      throw err;
    }
    if (options.push !== false) this.pushers.start();
  }

  // ---- producer ---------------------------------------------------------------------------

  /** Schedules a message. Resolves once it is durable. */
  schedule(request: ScheduleRequest): Promise<{ id: string; deliverAt: number }> {
    return this.closed ? rejectClosed() : this.producer.schedule(request);
  }

  /**
   * Schedules many messages at once, like `schedule` for each but cheaper: one promise for the
   * batch, and the records share the store's group commit. Every request is checked before any
   * is written, so a bad one (the error names its index) schedules nothing. Resolves, in request
   * order, once all are durable. If the store fails part way (an I/O error), the promise rejects
   * and any subset may have been scheduled: give ids, and retry, to make that harmless.
   */
  scheduleMany(
    requests: readonly ScheduleRequest[],
  ): Promise<Array<{ id: string; deliverAt: number }>> {
    return this.closed ? rejectClosed() : this.producer.scheduleMany(requests);
  }

  /** Cancels a message that has not been acknowledged. True if it was live. */
  cancel(id: string): Promise<boolean> {
    return this.closed ? rejectClosed() : this.producer.cancel(id);
  }

  /** Moves a message that is scheduled or ready to a new due time. False if in flight or gone. */
  async reschedule(id: string, when: { delayMs?: number; deliverAt?: number }): Promise<boolean> {
    return (await this.rescheduleTo(id, when)) !== undefined;
  }

  /**
   * Like reschedule(), but resolves with the due time the queue stored (delays round up to
   * the next ms, times down), or undefined where reschedule() gives false.
   */
  rescheduleTo(
    id: string,
    when: { delayMs?: number; deliverAt?: number },
  ): Promise<number | undefined> {
    return this.closed ? rejectClosed() : this.producer.rescheduleTo(id, when);
  }

  /** Puts a dead message back: due `delayMs` from now (default 0) with its attempts reset. */
  requeue(id: string, options: { delayMs?: number } = {}): Promise<boolean> {
    return this.closed ? rejectClosed() : this.producer.requeue(id, options);
  }

  /** Current state of a message, or undefined if unknown (or finished long ago). */
  async get(id: string): Promise<MessageInfo | undefined> {
    this.checkOpen();
    checkId(id);
    const near = this.near.get(id);
    if (near !== undefined) return info(near, near.status);
    const stored = await this.store.lookup(id);
    if (stored !== undefined) return info(stored, stored.status);
    const done = this.finished.get(id);
    return done === undefined ? undefined : info(done, done.status);
  }

  // ---- consumer ---------------------------------------------------------------------------

  /** Takes up to `max` ready messages of a topic, waiting up to `waitMs` for the first. */
  receive(topic: string, options: ReceiveOptions = {}): Promise<ReceivedMessage[]> {
    try {
      this.checkOpen();
      checkTopic(topic);
      const { max, waitMs, visibilityMs, maxBytes } = checkReceiveOptions(options, this.settings);
      return this.topics.receive(topic, max, waitMs, undefined, {
        receive: (granted, left) =>
          this.deliveries.receive(topic, granted, left, visibilityMs, maxBytes, undefined),
        waitReady: (ms, aborts) => this.waiters.wait(topic, ms, aborts),
      });
    } catch (err) {
      return Promise.reject(err as Error);
    }
  }

  /** Acknowledges a delivery: the message is done. False for an unknown or stale receipt. */
  ack(receipt: string): Promise<boolean> {
    return this.closed ? rejectClosed() : this.deliveries.ack(receipt);
  }

  /**
   * Gives a delivery back: redelivered after `delayMs` (default: the message's backoff), or
   * dead if it has used up its attempts. `reason` (why it failed) is kept as the message's
   * `lastError`, with the dead letter too.
   */
  nack(receipt: string, options: NackOptions = {}): Promise<boolean> {
    try {
      this.checkOpen();
      return this.deliveries.nack(receipt, checkNack(options), options.delayMs);
    } catch (err) {
      return Promise.reject(err as Error);
    }
  }

  /**
   * ack() for several deliveries: results[i] is what ack(receipts[i]) would give (a receipt
   * repeated in the list is true once). Every receipt is checked before any is acknowledged.
   * Resolves once all are durable (under group commit they share the fsync); if the store
   * fails, it rejects, and any subset may have been acknowledged.
   */
  async ackMany(receipts: readonly string[]): Promise<boolean[]> {
    this.checkOpen();
    checkReceipts(receipts, 'ackMany');
    return Promise.all(receipts.map((receipt) => this.ack(receipt)));
  }

  /** nack() for several deliveries, with the same options for all; results as ackMany. */
  async nackMany(receipts: readonly string[], options: NackOptions = {}): Promise<boolean[]> {
    this.checkOpen();
    checkReceipts(receipts, 'nackMany');
    checkNack(options, 'nackMany');
    return Promise.all(receipts.map((receipt) => this.nack(receipt, options)));
  }

  /**
   * Runs `handler` for each message of a topic; acks when it resolves, nacks when it throws
   * (the error's message becomes the delivery's `lastError`, kept with a dead letter). Options
   * are checked here, at once. The loop never stops on its own: a failed receive, ack or nack
   * goes to `onError` and the loop carries on (after a pause, for a receive); only close() (of
   * the consumer or the queue) ends it. The rules are the Worker's (worker.ts), the same as the
   * client's consume().
   */
  consume(
    topic: string,
    handler: MessageHandler,
    options: ConsumeOptions = {},
  ): { close(): Promise<void> } {
    this.checkOpen();
    checkTopic(topic);
    checkCallback(handler, 'handler');
    const worker = new Worker(
      this.source,
      topic,
      handler,
      checkConsumeOptions(options, CONSUME_WAIT_MS),
    );
    // A running consumer keeps the process alive, like an open server.
    this.waiters.hold();
    let closing: Promise<void> | undefined;
    const consumer = {
      close: () => {
        if (closing === undefined) {
          this.waiters.release();
          this.consumers.delete(consumer);
          closing = worker.close();
        }
        return closing;
      },
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

  // ---- topics -----------------------------------------------------------------------------

  /** Stops deliveries of a topic (durable): see topics.ts. Schedules are still accepted. */
  async pause(topic: string): Promise<TopicInfo> {
    return this.configureTopic(topic, { paused: true });
  }

  /** Delivers a paused topic's messages again. */
  async resume(topic: string): Promise<TopicInfo> {
    return this.configureTopic(topic, { paused: false });
  }

  /** Changes a topic's settings (paused, rateLimit); resolves once durable. */
  async configureTopic(topic: string, update: TopicUpdate): Promise<TopicInfo> {
    this.checkOpen();
    const settings = await this.topics.update(topic, update);
    return this.topicOf(topic, settings);
  }

  /** A topic's settings and counts (any topic name: one never used has zero of each). */
  async topicInfo(topic: string): Promise<TopicInfo> {
    this.checkOpen();
    checkTopic(topic);
    return this.topicOf(topic, this.topics.get(topic));
  }

  /** Every topic with messages (live or dead) or settings other than the defaults, by name. */
  async topicList(): Promise<TopicInfo[]> {
    this.checkOpen();
    const counts = this.store.counts().topics;
    const names = new Set([...counts.keys(), ...this.topics.all().keys()]);
    return [...names].sort().map((topic) => this.topicOf(topic, this.topics.get(topic), counts));
  }

  private topicOf(
    topic: string,
    settings: TopicSettings,
    all = this.store.counts().topics,
  ): TopicInfo {
    const counts = all.get(topic);
    return {
      topic,
      ...settingsView(settings),
      pending: counts?.pending ?? 0,
      dead: counts?.dead ?? 0,
    };
  }

  // ---- recurring schedules (recurring.ts) ----------------------------------------------------

  /** Creates or replaces a recurring schedule; resolves once it is durable. */
  putSchedule(name: string, spec: RecurringSpec): Promise<ScheduleInfo> {
    return this.closed ? rejectClosed() : this.recurring.put(name, spec);
  }

  /** Changes some fields of a schedule; undefined if there is none by that name. */
  updateSchedule(name: string, patch: Partial<RecurringSpec>): Promise<ScheduleInfo | undefined> {
    return this.closed ? rejectClosed() : this.recurring.update(name, patch);
  }

  getSchedule(name: string): Promise<ScheduleInfo | undefined> {
    return this.closed ? rejectClosed() : this.recurring.get(name);
  }

  listSchedules(): Promise<ScheduleInfo[]> {
    return this.closed ? rejectClosed() : this.recurring.list();
  }

  /** Deletes a schedule (and its occurrence created ahead); false if there is none. */
  deleteSchedule(name: string): Promise<boolean> {
    return this.closed ? rejectClosed() : this.recurring.delete(name);
  }

  // ---- insights ---------------------------------------------------------------------------

  async stats(): Promise<Record<string, unknown>> {
    return {
      ...this.insights.stats({
        held: this.near,
        store: this.store,
        loadedUntil: this.horizon.loadedUntil,
        timers: this.wheel.stats(),
      }),
      /** 1 while bringing due messages from the store into memory fails (see problem()). */
      loadFailing: this.horizon.problem() === undefined ? 0 : 1,
      push: this.pushers.stats(),
    };
  }

  /** What keeps the queue from working fully now (QueueApi.problem); GET /healthz says it. */
  async problem(): Promise<string | undefined> {
    if (this.closed) return 'the queue is closed';
    const problems = [this.horizon.problem(), this.store.problem?.()].filter(
      (problem) => problem !== undefined,
    );
    return problems.length === 0 ? undefined : problems.join('; ');
  }

  /** Scheduled messages by time until due, exact for the edges returned (see insights.ts). */
  dueTimeline(edgesMs: readonly number[]): DueTimeline {
    const { clock } = this.settings;
    const minutes = this.store.dueMinutes?.() ?? new Map<number, number>();
    return dueTimeline(edgesMs, clock.now(), this.near, minutes, this.horizon.loadedUntil);
  }

  /** dueTimeline(edgesMs).counts: edges past the in-memory horizon are whole minutes. */
  dueHistogram(edgesMs: readonly number[]): number[] {
    return this.dueTimeline(edgesMs).counts;
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
    const held = heldPayload(message) ?? (await this.store.payloadOf(message));
    return payloadPreview(decodePayload(message.payloadKind, held), maxChars);
  }

  /** The in-memory timer wheel (due and visibility timers), level by level. */
  wheelSnapshot(maxRows?: number): WheelSnapshot {
    return this.wheel.wheelSnapshot(maxRows);
  }

  // ---- life cycle -------------------------------------------------------------------------

  /**
   * Resolves once background work started so far (bringing the next slice of the horizon into
   * memory) has finished. Useful with a ManualClock: advance, await settled(), advance(0).
   */
  async settled(): Promise<void> {
    await this.horizon.settled();
    await this.topics.settled();
    await this.recurring.settled();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    // Receives waiting in the gate (paused, out of tokens) end empty now.
    this.topics.close();
    await this.recurring.close();
    await this.pushers.close();
    await Promise.all([...this.consumers].map((consumer) => consumer.close()));
    this.closed = true;
    this.deliveries.stop();
    this.horizon.stop();
    await this.horizon.settled();
    this.waiters.wakeAll();
    await this.locks.settled();
    this.wheel.close();
    this.near.stop();
    await this.topics.settled();
    await this.store.close();
  }

  private checkOpen(): void {
    if (this.closed) throw closedError();
  }
}

function closedError(): TickwheelStateError {
  return new TickwheelStateError('ERR_TICKWHEEL_CLOSED', 'this DelayQueue is closed');
}

function rejectClosed(): Promise<never> {
  return Promise.reject(closedError());
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
