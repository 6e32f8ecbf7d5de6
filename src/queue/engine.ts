/**
 * QueueEngine: the embedded backend (backend.ts): the near horizon in memory (near.ts), the rest
 * in the store, loaded every horizonMs / 4 (horizon.ts). Every operation that changes one
 * message runs under its id lock (locks.ts), in call order; ack() skips the lock when nothing
 * else runs on the id (its change is synchronous).
 */

import { TimerWheel } from '../timer/index.js';
import type { WheelSnapshot } from '../wheel/index.js';
import type { BackendStats, QueueBackend, ReceiveLimits, TopicCounts } from './backend.js';
import { inRange, mergePages, SmallestKeys, type BackendListPage, type ListQuery } from './list.js';
import { Scheduler } from './recurring.js';
import type { ScheduleSpec } from './recurring-spec.js';
import { FinishedMemory } from './finished.js';
import { faultOf } from './faults.js';
import { Horizon } from './horizon.js';
import { dueTimeline, embeddedStats, noteLastWrite } from './insights.js';
import { IdLocks } from './locks.js';
import {
  checkRequest,
  decodePayload,
  heldPayload,
  type CheckedRequest,
  type MessageState,
  type MessageStatus,
} from './message.js';
import { delivering, type DueGroup, type Lease, type NearMessage } from './near-message.js';
import { NearHorizon } from './near.js';
import { EMBEDDED_RECEIVE_BYTES, type QueueSettings } from './options.js';
import { Deliveries } from './deliveries.js';
import type { QueueParts } from './parts.js';
import type { QueueReport } from './report.js';
import { Producer } from './producer.js';
import type { RecoveryReport, Store } from './store.js';
import { LocalBuckets, storeSettings, TopicGate } from './topics.js';
import type { DueTimeline, MessageInfo, ReceivedMessage } from './types.js';
import { Waiters } from './waiters.js';
import type { WorkerSource } from './worker.js';
import { invalidOption } from '../validate.js';

/** The long-poll wait of each receive of the embedded consume(): woken at once when ready. */
const CONSUME_WAIT_MS = 1000;

export class QueueEngine implements QueueBackend {
  private readonly wheel: TimerWheel<NearMessage | Lease | DueGroup>;
  private readonly waiters: Waiters;
  private readonly near: NearHorizon;
  private readonly horizon: Horizon;
  private readonly locks = new IdLocks();
  private readonly finished: FinishedMemory;
  private readonly producer: Producer;
  private readonly deliveries: Deliveries;
  readonly topics: TopicGate;
  private readonly recurring: Scheduler;
  readonly source: WorkerSource;
  readonly consumeWaitMs = CONSUME_WAIT_MS;
  private closed = false;
  recovery: RecoveryReport | undefined;

  /** `settings`: checkEmbeddedOptions's (options.ts). Started by start(). */
  constructor(
    readonly store: Store,
    private readonly settings: QueueSettings,
    private readonly report: QueueReport,
  ) {
    const clock = settings.clock;
    const onError = (err: unknown) => settings.onFault(faultOf(err));
    this.wheel = new TimerWheel<NearMessage | Lease | DueGroup>({
      clock,
      unref: true,
      alignTicks: true, // due order across the wheel and near.arm's due-at-once path
      onExpire: (due) => this.deliveries.onTimer(due),
      onError,
    });
    this.waiters = new Waiters(this.wheel);
    // Only a store that reads payloads back can hold messages without theirs.
    const payloadLimit = store.usePayloadBudget ? settings.payloadMemoryBytes : Infinity;
    this.near = new NearHorizon(clock, this.wheel, report, this.waiters, payloadLimit);
    store.usePayloadBudget?.(this.near.payloads);
    store.useDeliveries?.({
      delivering,
      inFlight: () => this.near.inFlight(),
      resting: (id) => this.near.resting(id),
    });
    this.horizon = new Horizon(store, clock, this.near, settings.horizonMs, settings.onFault);
    this.finished = new FinishedMemory(settings.rememberFinished);
    this.topics = new TopicGate(
      storeSettings(store),
      new LocalBuckets(this.now),
      this.now,
      (ms, signal) => this.waiters.sleep(ms, signal),
      (topic) => this.waiters.wake(topic, Infinity),
      onError,
    );
    const parts: QueueParts = {
      store,
      clock,
      settings,
      near: this.near,
      horizon: this.horizon,
      waiters: this.waiters,
      locks: this.locks,
      report,
      finished: this.finished,
      topics: this.topics,
    };
    this.producer = new Producer(parts);
    this.deliveries = new Deliveries(parts);
    this.recurring = new Scheduler(
      clock,
      {
        schedule: (request) =>
          this.producer.schedule(checkRequest(request, clock.now(), settings.maxPayloadBytes)),
        cancel: (id) => this.producer.cancel(id),
        isLive: async (id) => {
          const status = (await this.get(id))?.status;
          return status === 'scheduled' || status === 'ready' || status === 'inflight';
        },
      },
      store,
      onError,
      settings.maxSchedules,
    );
    this.source = {
      receive: (topic, { max, waitMs, visibilityMs }, signal) =>
        this.receive(
          topic,
          {
            max,
            waitMs,
            visibilityMs: visibilityMs ?? settings.visibilityMs,
            maxBytes: EMBEDDED_RECEIVE_BYTES,
          },
          signal,
        ),
      // A topic with settings of its own (paused, limited) is received from through its gate.
      receiveNow: (topic, { max, visibilityMs }) =>
        this.closed || this.topics.has(topic)
          ? undefined
          : this.deliveries.receiveNow(
              topic,
              max,
              visibilityMs ?? settings.visibilityMs,
              EMBEDDED_RECEIVE_BYTES,
            ),
      ack: (receipt, message) => this.deliveries.ackQuietly(receipt, message),
      nack: (receipt, reason) => this.deliveries.nack(receipt, reason, undefined, true),
    };
  }

  /** Called once by open(). */
  async start(): Promise<void> {
    // Before any message is made ready: a paused topic delivers nothing after a restart.
    await this.topics.load();
    // Before any message is made ready: lateness after a restart counts from the last write.
    await noteLastWrite(this.report, this.settings.clock, this.store);
    this.recovery = await this.horizon.start(this.wheel);
    // Every schedule brought up to date before open() returns: no consumer can receive yet.
    try {
      await this.recurring.start();
    } catch (err) {
      await this.recurring.close();
      throw err;
    }
  }

  readonly now = (): number => this.settings.clock.now();
  readonly schedule = (message: CheckedRequest) => this.producer.schedule(message);
  readonly scheduleMany = (messages: readonly CheckedRequest[]) =>
    this.producer.scheduleMany(messages);
  readonly cancel = (id: string) => this.producer.cancel(id);
  readonly moveTo = (id: string, deliverAt: number) => this.producer.rescheduleTo(id, deliverAt);
  readonly requeue = (id: string, deliverAt: number) => this.producer.requeue(id, deliverAt);

  async get(id: string): Promise<MessageInfo | undefined> {
    const found = this.near.get(id) ?? (await this.store.lookup(id)) ?? this.finished.get(id);
    return found === undefined ? undefined : info(found, found.status);
  }

  async payload(id: string): Promise<{ value: unknown } | undefined> {
    const message: MessageState | undefined = this.near.get(id) ?? (await this.store.lookup(id));
    if (message === undefined) return undefined;
    const held = heldPayload(message) ?? (await this.store.payloadOf(message));
    return { value: decodePayload(message.payloadKind, held) };
  }

  receive(
    topic: string,
    { max, waitMs, visibilityMs, maxBytes }: ReceiveLimits,
    signal?: AbortSignal,
  ): Promise<ReceivedMessage[]> {
    return this.topics.receive(topic, max, waitMs, signal, {
      receive: (granted, left) =>
        this.deliveries.receive(topic, granted, left, visibilityMs, maxBytes, signal),
      waitReady: (ms, aborts) => this.waiters.wait(topic, ms, aborts),
    });
  }

  readonly ack = (receipt: string, durable: boolean) => this.deliveries.ack(receipt, durable);
  readonly nack: QueueBackend['nack'] = (receipt, reason, delayMs, durable) =>
    this.deliveries.nack(receipt, reason, delayMs, durable);

  /** A running consumer keeps the process alive, like an open server. */
  holdConsumer(): () => void {
    this.waiters.hold();
    let held = true;
    return () => {
      if (held) this.waiters.release();
      held = false;
    };
  }

  async deadLetters(topic: string, limit: number): Promise<MessageInfo[]> {
    return (await this.store.dead(topic, limit)).map((message) => info(message, 'dead'));
  }

  /**
   * The store's part first (Store.listWaiting), then the held ones once no horizon load is under
   * way: a message the store handed over meanwhile is held by then, and listed once (as held).
   */
  async list(query: ListQuery): Promise<BackendListPage> {
    if (this.store.listWaiting === undefined) {
      throw invalidOption(
        'list() needs a store with listWaiting() (src/queue/store.ts); this store has none',
      );
    }
    const waiting = await this.store.listWaiting(query);
    await this.horizon.settled();
    const held = new SmallestKeys<MessageState & { status: MessageStatus }>(query.limit + 1);
    // Every held message is due before loadedUntil: a page that starts after it need not walk them.
    const start = Math.max(query.from, query.after?.deliverAt ?? -Infinity);
    const heldMessages = start >= this.horizon.loadedUntil ? [] : this.near.heldMessages();
    for (const message of heldMessages) {
      if (message.topic !== query.topic) continue;
      const key = { deliverAt: message.deliverAt, seq: message.ref, id: message.id };
      if (inRange(query, key)) held.push(message, key);
    }
    const page = mergePages(query.limit, [held.part(), waiting]);
    return {
      messages: page.items.map(({ message }) => info(message, message.status)),
      next: page.through,
    };
  }

  readonly topicCounts = async (): Promise<ReadonlyMap<string, TopicCounts>> =>
    this.store.counts().topics;
  readonly topicCountsOf = async (topic: string): Promise<TopicCounts> => {
    const of = this.store.counts().topics.get(topic);
    return { pending: of?.pending ?? 0, dead: of?.dead ?? 0 };
  };

  readonly putSchedule = (name: string, spec: ScheduleSpec) => this.recurring.put(name, spec);
  readonly updateSchedule: QueueBackend['updateSchedule'] = (name, change) =>
    this.recurring.update(name, change);
  readonly getSchedule = (name: string) => this.recurring.get(name);
  readonly listSchedules = () => this.recurring.list();
  readonly deleteSchedule = (name: string) => this.recurring.delete(name);

  async stats(): Promise<BackendStats> {
    return {
      ...embeddedStats({
        held: this.near,
        store: this.store,
        loadedUntil: this.horizon.loadedUntil,
        timers: this.wheel.stats(),
      }),
      loadFailing: this.horizon.problem() === undefined ? 0 : 1,
    };
  }

  stopped(): boolean {
    return this.store.stats().stopped === 1;
  }

  async problem(): Promise<string | undefined> {
    const problems = [this.horizon.problem(), this.store.problem?.()].filter(
      (problem) => problem !== undefined,
    );
    return problems.length === 0 ? undefined : problems.join('; ');
  }

  async dueTimeline(edgesMs: readonly number[]): Promise<DueTimeline> {
    const minutes = this.store.dueMinutes?.() ?? new Map<number, number>();
    return dueTimeline(edgesMs, this.now(), this.near, minutes, this.horizon.loadedUntil);
  }

  readonly wheelSnapshot = (maxRows?: number): WheelSnapshot => this.wheel.wheelSnapshot(maxRows);

  /**
   * With a ManualClock: advance, await settled(), advance(0). Waits for loads and the work under
   * id locks, so it never resolves when awaited from inside that work (a custom store's method).
   */
  async settled(): Promise<void> {
    await this.locks.settled();
    await this.horizon.settled();
    await this.topics.settled();
    await this.recurring.settled();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    // Receives waiting in the gate (paused, out of tokens) end empty now.
    this.topics.close();
    await this.recurring.close();
    this.closed = true;
    this.deliveries.stop();
    this.horizon.stop();
    await this.horizon.settled();
    this.waiters.wakeAll();
    await this.locks.settled();
    this.wheel.close();
    this.near.ahead.stop();
    await this.topics.settled();
    await this.store.close();
  }
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
