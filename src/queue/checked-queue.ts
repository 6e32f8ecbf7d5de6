/**
 * CheckedQueue: the `Queue` (api.ts, where its operations are described) over any backend
 * (backend.ts). Every argument is checked here, once, with the same rules and error codes
 * whatever holds the messages; the closed state, consume()'s workers, pushes and the views built
 * from a backend's parts are here too. `DelayQueue` (src/delay-queue.ts) adds `open()`.
 */

import { AbortError, checkOpen, TickwheelTypeError } from '../errors.js';
import {
  checkCallback,
  checkKnownOptions,
  checkOption,
  checkOptionsObject,
  describe,
  invalidOption,
} from '../validate.js';
import type {
  ListOptions,
  ListPage,
  QueueStats,
  StatsOptions,
  TopicListOptions,
  TopicPage,
} from '../protocol/model.js';
import { checkListOptions, encodeCursor } from './list.js';
import {
  checkStatsOptions,
  checkTopicListOptions,
  largestTopics,
  namesPage,
} from './topic-pages.js';
import type { WheelSnapshot } from '../wheel/index.js';
import type { NewDueTime, Queue } from './api.js';
import type { QueueBackend, Scheduled, TopicCounts } from './backend.js';
import type { QueueEvents } from './events.js';
import type { QueueReport } from './report.js';
import {
  checkId,
  checkRequest,
  checkTopic,
  dueTime,
  invalidMessage,
  payloadPreview,
  rescheduleTime,
  type CheckedRequest,
  type ScheduleRequest,
} from './message.js';
import {
  checkAck,
  checkNack,
  checkReceipt,
  checkReceipts,
  checkReceiveCall,
  checkReceiveOptions,
  type QueueLimits,
} from './options.js';
import { checkedSpec, mergedSpec, type ScheduleInfo } from './recurring-records.js';
import {
  checkScheduleName,
  checkSpec,
  type RecurringSpec,
  type ScheduleSpec,
} from './recurring-spec.js';
import type { RecoveryReport } from './store.js';
import {
  checkTopicUpdate,
  settingsView,
  type TopicInfo,
  type TopicSettings,
  type TopicUpdate,
} from './topics.js';
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
  TransactionClient,
} from './types.js';
import { Pushers } from './push.js';
import { checkConsumeOptions, Worker } from './worker.js';
import { endProducers, producerSpan } from './tracing.js';

const MAX_EDGES = 1_000;

/** `Payload`: the caller's type of the payloads (as in BullMQ), not checked at run time. */
export class CheckedQueue<Payload = unknown> implements Queue<Payload> {
  private readonly consumers = new Set<{ close(): Promise<void> }>();
  private readonly pushers: Pushers;
  private closed = false;
  private closing: Promise<void> | undefined;

  /** `push: false` starts no pushes (a queue opened only to repair its directory). */
  protected constructor(
    protected readonly backend: QueueBackend,
    private readonly limits: QueueLimits,
    /** The report the backend tells what happens: counters, lateness, events. */
    private readonly report: QueueReport,
    push = true,
  ) {
    const { source, topics, consumeWaitMs } = backend;
    this.pushers = new Pushers(
      (topic, handler, settings) =>
        new Worker(source, topic, handler, {
          ...settings,
          prefetch: 0,
          waitMs: consumeWaitMs,
          onFault: limits.onFault,
        }),
      limits.push,
      limits.onFault,
    );
    this.pushers.follow(topics);
    if (push) this.pushers.start();
  }

  get events(): QueueEvents {
    return this.report.events;
  }

  get visibilityMs(): number {
    return this.limits.visibilityMs;
  }

  get recovery(): RecoveryReport | undefined {
    return this.backend.recovery;
  }

  // `options` has a default so that schedule.length is the client's (test/client/mirror.test.ts).
  schedule(
    request: ScheduleRequest<Payload>,
    options: ScheduleOptions | undefined = undefined,
  ): Promise<Scheduled> {
    try {
      this.checkOpen();
      const client = this.transactionOf(options, 'schedule');
      const checked = this.checked(request, this.backend.now(), '');
      const span = producerSpan(checked, 1);
      const done =
        client === undefined
          ? this.backend.schedule(checked)
          : this.scheduleIn([checked], client).then(([one]) => one);
      if (span === undefined) return done;
      return endProducers(
        [span],
        done.then((one) => [one]),
      ).then(([one]) => one);
    } catch (err) {
      return Promise.reject(err as Error);
    }
  }

  scheduleMany(
    requests: readonly ScheduleRequest<Payload>[],
    options: ScheduleOptions | undefined = undefined,
  ): Promise<Scheduled[]> {
    try {
      this.checkOpen();
      const client = this.transactionOf(options, 'scheduleMany');
      if (!Array.isArray(requests)) {
        throw invalidMessage(`scheduleMany takes an array of messages, got ${describe(requests)}`);
      }
      const now = this.backend.now();
      const checked = new Array<CheckedRequest>(requests.length);
      for (let i = 0; i < requests.length; i++) {
        checked[i] = this.checked(requests[i], now, `messages[${i}]: `);
      }
      if (checked.length === 0) return Promise.resolve([]);
      let spans: ReturnType<typeof producerSpan>[] | undefined;
      for (let i = 0; i < checked.length; i++) {
        const span = producerSpan(checked[i], checked.length);
        if (span !== undefined) (spans ??= new Array(checked.length))[i] = span;
      }
      const done =
        client === undefined
          ? this.backend.scheduleMany(checked)
          : this.scheduleIn(checked, client);
      return spans === undefined ? done : endProducers(spans, done);
    } catch (err) {
      return Promise.reject(err as Error);
    }
  }

  /** The open transaction a schedule joins (`options.client`), checked; undefined for none. */
  private transactionOf(
    options: ScheduleOptions | undefined,
    call: string,
  ): TransactionClient | undefined {
    if (options === undefined) return undefined;
    checkOptionsObject(options, `${call} options`, '{ client }');
    checkKnownOptions(options, ['client'], `${call}()`);
    const client = options.client;
    if (client === undefined) return undefined;
    if (typeof (client as Partial<TransactionClient> | null)?.query !== 'function') {
      throw invalidOption(
        `client must be a client of your PostgreSQL inside its open transaction (pg's Client or PoolClient), got ${describe(client)}`,
      );
    }
    if (this.backend.scheduleIn === undefined) {
      throw invalidOption(
        'client: a schedule joins a transaction only on a queue on PostgreSQL (DelayQueue.open({ postgres }))',
      );
    }
    return client;
  }

  private scheduleIn(checked: CheckedRequest[], client: TransactionClient): Promise<Scheduled[]> {
    return (this.backend.scheduleIn as NonNullable<QueueBackend['scheduleIn']>)(checked, client);
  }

  async cancel(id: string): Promise<boolean> {
    this.checkOpen();
    return this.backend.cancel(checkId(id));
  }

  async reschedule(id: string, when: NewDueTime): Promise<boolean> {
    return (await this.rescheduleTo(id, when)) !== undefined;
  }

  async rescheduleTo(id: string, when: NewDueTime): Promise<number | undefined> {
    this.checkOpen();
    checkId(id);
    return this.backend.moveTo(id, rescheduleTime(when, this.backend.now()));
  }

  async requeue(id: string, options: { delayMs?: number } = {}): Promise<boolean> {
    this.checkOpen();
    checkId(id);
    checkOptionsObject(options, 'requeue options', '{ delayMs: 1000 }');
    checkKnownOptions(options, ['delayMs'], 'requeue()');
    const deliverAt = dueTime({ delayMs: options.delayMs ?? 0 }, this.backend.now());
    return this.backend.requeue(id, deliverAt);
  }

  async get(id: string): Promise<MessageInfo | undefined> {
    this.checkOpen();
    return this.backend.get(checkId(id));
  }

  async receive(
    topic: string,
    options: ReceiveOptions = {},
    call: { signal?: AbortSignal } = {},
  ): Promise<ReceivedMessage<Payload>[]> {
    this.checkOpen();
    checkTopic(topic);
    const limits = checkReceiveOptions(options, this.limits);
    const signal = checkReceiveCall(call);
    if (signal?.aborted) throw new AbortError(signal.reason);
    const received = await this.backend.receive(topic, limits, signal);
    // Taken before the abort was seen: answered, never left in flight with no one holding them.
    if (received.length === 0 && signal?.aborted) throw new AbortError(signal.reason);
    return received as ReceivedMessage<Payload>[];
  }

  /** Not async: the backend's promise as it is (an async wrapper cost a promise and two turns). */
  ack(receipt: string, options: AckOptions = {}): Promise<boolean> {
    try {
      this.checkOpen();
      checkReceipt(receipt);
      return this.backend.ack(receipt, checkAck(options, this.limits.durableAcks));
    } catch (err) {
      return Promise.reject(err as Error);
    }
  }

  async nack(receipt: string, options: NackOptions = {}): Promise<boolean> {
    this.checkOpen();
    checkReceipt(receipt);
    const reason = checkNack(options);
    const durable = options.durable ?? this.limits.durableAcks;
    return this.backend.nack(receipt, reason, options.delayMs, durable);
  }

  async ackMany(receipts: readonly string[], options: AckOptions = {}): Promise<boolean[]> {
    this.checkOpen();
    checkReceipts(receipts, 'ackMany');
    const durable = checkAck(options, this.limits.durableAcks, 'ackMany');
    return Promise.all(receipts.map((receipt) => this.backend.ack(receipt, durable)));
  }

  async nackMany(receipts: readonly string[], options: NackOptions = {}): Promise<boolean[]> {
    this.checkOpen();
    checkReceipts(receipts, 'nackMany');
    const reason = checkNack(options, 'nackMany');
    const durable = options.durable ?? this.limits.durableAcks;
    return Promise.all(
      receipts.map((receipt) => this.backend.nack(receipt, reason, options.delayMs, durable)),
    );
  }

  consume(
    topic: string,
    handler: MessageHandler<Payload>,
    options: ConsumeOptions = {},
  ): { close(): Promise<void> } {
    this.checkOpen();
    checkTopic(topic);
    checkCallback(handler, 'handler');
    const settings = checkConsumeOptions(options, this.backend.consumeWaitMs, this.limits.onFault);
    const worker = new Worker(this.backend.source, topic, handler as MessageHandler, settings);
    const release = this.backend.holdConsumer?.();
    const consumer = {
      // Worker.close() answers the same promise every time: only the first close releases.
      close: () => {
        if (this.consumers.delete(consumer)) release?.();
        return worker.close();
      },
    };
    this.consumers.add(consumer);
    return consumer;
  }

  async deadLetters(topic: string, limit = 100): Promise<MessageInfo[]> {
    this.checkOpen();
    checkTopic(topic);
    checkOption(limit, 'limit', 1, 10_000, true);
    return this.backend.deadLetters(topic, limit);
  }

  async list(options: ListOptions): Promise<ListPage> {
    this.checkOpen();
    const query = checkListOptions(options);
    const { messages, next } = await this.backend.list(query);
    return next === undefined
      ? { messages }
      : { messages, cursor: encodeCursor(query.topic, next) };
  }

  pause(topic: string): Promise<TopicInfo> {
    return this.configureTopic(topic, { paused: true });
  }

  resume(topic: string): Promise<TopicInfo> {
    return this.configureTopic(topic, { paused: false });
  }

  async configureTopic(topic: string, update: TopicUpdate): Promise<TopicInfo> {
    this.checkOpen();
    checkTopic(topic);
    const settings = await this.backend.topics.update(topic, checkTopicUpdate(update));
    return topicOf(topic, settings, await this.backend.topicCountsOf(topic));
  }

  async topicInfo(topic: string): Promise<TopicInfo> {
    this.checkOpen();
    checkTopic(topic);
    const counts = await this.backend.topicCountsOf(topic);
    return topicOf(topic, this.backend.topics.get(topic), counts);
  }

  async topicList(options: TopicListOptions = {}): Promise<TopicPage> {
    this.checkOpen();
    const { limit, cursor } = checkTopicListOptions(options);
    const counts = await this.backend.topicCounts();
    const { topics } = this.backend;
    const settings = topics.all();
    function* names() {
      yield* counts.keys();
      for (const name of settings.keys()) if (!counts.has(name)) yield name;
    }
    const page = namesPage(names(), limit, cursor);
    return {
      topics: page.names.map((topic) => topicOf(topic, topics.get(topic), counts.get(topic))),
      ...(page.more ? { cursor: page.names[page.names.length - 1] } : {}),
    };
  }

  async putSchedule(name: string, spec: RecurringSpec): Promise<ScheduleInfo> {
    this.checkOpen();
    checkScheduleName(name);
    return this.backend.putSchedule(name, this.checkedSpec(spec));
  }

  async updateSchedule(
    name: string,
    patch: Partial<RecurringSpec>,
  ): Promise<ScheduleInfo | undefined> {
    this.checkOpen();
    checkScheduleName(name);
    if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) {
      checkSpec(patch); // words the error
    }
    return this.backend.updateSchedule(name, (spec) => this.checkedSpec(mergedSpec(spec, patch)));
  }

  async getSchedule(name: string): Promise<ScheduleInfo | undefined> {
    this.checkOpen();
    return this.backend.getSchedule(checkScheduleName(name));
  }

  async listSchedules(): Promise<ScheduleInfo[]> {
    this.checkOpen();
    return this.backend.listSchedules();
  }

  async deleteSchedule(name: string): Promise<boolean> {
    this.checkOpen();
    return this.backend.deleteSchedule(checkScheduleName(name));
  }

  async stats(options: StatsOptions = {}): Promise<QueueStats> {
    this.checkOpen();
    const named = checkStatsOptions(options);
    const { topics, ...backend } = await this.backend.stats();
    return {
      ...this.report.figures(),
      ...backend,
      ...largestTopics(topics, named),
      push: this.pushers.stats(),
    };
  }

  async problem(): Promise<string | undefined> {
    return this.closed ? 'the queue is closed' : this.backend.problem();
  }

  stopped(): boolean {
    return this.backend.stopped();
  }

  async dueTimeline(edgesMs: readonly number[]): Promise<DueTimeline> {
    this.checkOpen();
    return this.backend.dueTimeline(checkEdges(edgesMs));
  }

  async dueHistogram(edgesMs: readonly number[]): Promise<number[]> {
    return (await this.dueTimeline(edgesMs)).counts;
  }

  async payloadPreview(
    id: string,
    maxChars = 200,
  ): Promise<{ preview: string; truncated: boolean } | undefined> {
    this.checkOpen();
    checkId(id);
    checkOption(maxChars, 'maxChars', 1, 1_000_000, true);
    const found = await this.backend.payload(id);
    return found === undefined ? undefined : payloadPreview(found.value, maxChars);
  }

  wheelSnapshot(maxRows?: number): WheelSnapshot {
    return this.backend.wheelSnapshot(maxRows);
  }

  settled(): Promise<void> {
    return this.backend.settled();
  }

  /** Stops the pushes and the consumers (their handlers finish), then the backend. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.pushers.close();
      await Promise.all([...this.consumers].map((consumer) => consumer.close()));
      this.closed = true;
      await this.backend.close();
    })();
    return this.closing;
  }

  private checkOpen(): void {
    checkOpen(this.closed, 'this DelayQueue is closed');
  }

  /** A schedule request checked; ids starting with '@' are the queue's own (one rule for all). */
  private checked(request: ScheduleRequest, now: number, where: string): CheckedRequest {
    const checked = checkRequest(request, now, this.limits.maxPayloadBytes, where);
    if (checked.id.charCodeAt(0) === 64 /* @ */) {
      throw new TickwheelTypeError(
        'ERR_TICKWHEEL_INVALID_ID',
        `${where}ids starting with '@' are made by the queue for messages scheduled without an id; got ${describe(checked.id)}`,
      );
    }
    return checked;
  }

  /** A recurring schedule's spec checked, its occurrences' messages as schedule() checks them. */
  private checkedSpec(spec: unknown): ScheduleSpec {
    const now = this.backend.now();
    return checkedSpec(
      spec,
      (request) => checkRequest(request, now, this.limits.maxPayloadBytes),
      now,
    );
  }
}

function topicOf(topic: string, settings: TopicSettings, of: TopicCounts | undefined): TopicInfo {
  return { topic, ...settingsView(settings), pending: of?.pending ?? 0, dead: of?.dead ?? 0 };
}

/** dueTimeline()'s edges: an array of up to MAX_EDGES finite numbers of milliseconds. */
function checkEdges(edgesMs: readonly number[]): readonly number[] {
  if (!Array.isArray(edgesMs) || edgesMs.length > MAX_EDGES) {
    throw invalidOption(
      `edgesMs must be an array of at most ${MAX_EDGES} numbers of milliseconds, got ${describe(edgesMs)}`,
    );
  }
  for (const edge of edgesMs) checkOption(edge, 'edgesMs[]', 0, Number.MAX_SAFE_INTEGER);
  return edgesMs;
}
