/**
 * ClusterQueue: the delay queue's public API (the `Queue` interface, as QueueEngine serves it
 * embedded) over a ClusterNode, so that `DelayQueue.open({ redis })`, the server, the CLI and
 * the dashboard treat a queue on Valkey/Redis as they treat one on a data directory. This file
 * checks arguments exactly as the embedded queue does (same error codes and messages), keeps
 * this node's counters and delivery lateness, and hands each call to the node.
 *
 * What differs from the embedded queue, and why:
 *   - Time is the system clock (a `clock` option is refused): nodes and Valkey must agree on it.
 *   - Finished messages (acknowledged, cancelled) are remembered for get() per partition, the
 *     latest 128 to 256 of each (lua/messages.ts, `remember`); rememberFinished does not apply.
 *   - The counters of stats() count what went through this node (schedules, deliveries, acks,
 *     nacks, cancels, reschedules) and what it fired as an owner; counts per topic are the
 *     whole queue's.
 *   - An open ClusterQueue holds its process open (its Valkey connections do) until close().
 */

import { mayHaveWritten, TickwheelStateError } from '../errors.js';
import { checkCallback, checkOption } from '../validate.js';
import type { Queue } from '../queue/api.js';
import type { ScheduleInfo } from '../queue/recurring.js';
import type { RecurringSpec } from '../queue/recurring-spec.js';
import { checkConsumeOptions } from '../queue/worker.js';
import { QueueInsights, type DueTimeline } from '../queue/insights.js';
import {
  checkId,
  checkTopic,
  payloadPreview,
  VISIBILITY_REASON,
  type ScheduleRequest,
} from '../queue/message.js';
import {
  checkNack,
  checkReceipts,
  checkReceiveOptions,
  checkVisibility,
} from '../queue/options.js';
import type {
  ConsumeOptions,
  MessageHandler,
  MessageInfo,
  NackOptions,
  ReceivedMessage,
  ReceiveOptions,
} from '../queue/types.js';
import {
  settingsView,
  type TopicInfo,
  type TopicSettings,
  type TopicUpdate,
} from '../queue/topics.js';
import { Pushers } from '../queue/push.js';
import { checkPushOptions, type PushOptions } from '../queue/push-guard.js';
import type { WheelSnapshot } from '../wheel/index.js';
import { QueueEvents, type EventSource } from '../queue/events.js';
import { ClusterNode } from './node.js';
import type { ClusterNodeOptions } from './node-options.js';
import { settledBy, type Settled } from './consumer.js';
import type { ExpiredDelivery } from './owner.js';
import type { CancelledMessage } from './producer.js';

export interface ClusterQueueOptions extends ClusterNodeOptions {
  /** Longest long-poll wait accepted by receive(). Default 60,000 ms. */
  maxWaitMs?: number;
  /** Internal addresses this node's pushes may reach (docs/push.md); default none. */
  push?: PushOptions;
}

const DEFAULT_MAX_WAIT_MS = 60_000;

/** Deliveries remembered for their ack's or nack's event (see `outstanding`). */
const MAX_OUTSTANDING = 100_000;

export class ClusterQueue implements Queue {
  /** Nothing is recovered from disk: the state is in Valkey. */
  readonly recovery = undefined;
  private readonly insights = new QueueInsights();
  private readonly consumers = new Set<{ close(): Promise<void> }>();
  private closed = false;
  /** Occurrences of recurring schedules this node made (scheduled besides the producer's). */
  private occurrences = 0;
  /**
   * Events of what goes through this node (see docs/cluster.md, "Topic settings and events"):
   * schedules, deliveries to its consumers, their acks and nacks (dead when the last attempt),
   * its cancels, and the visibility timeouts of the partitions it owns.
   */
  readonly events = new QueueEvents(Date.now);
  /** Deliveries made here while someone listens, by receipt: what an ack's or nack's event says. */
  private readonly outstanding = new Map<string, EventSource>();

  /** Topics with a push target (push.ts): this node pushes their messages too. */
  private readonly pushers: Pushers;

  private constructor(
    /** The node under this queue: partitions, members, leases. */
    readonly node: ClusterNode,
    private readonly maxWaitMs: number,
    private readonly visibilityMs: number,
    push: PushOptions,
  ) {
    this.pushers = new Pushers(
      (topic, handler, settings) => this.consume(topic, handler, settings),
      push,
    );
    this.pushers.follow(node.topics);
    for (const [topic, settings] of node.topics.all()) this.pushers.apply(topic, settings.push);
    this.pushers.start();
  }

  static async open(options: ClusterQueueOptions): Promise<ClusterQueue> {
    const maxWaitMs = checkOption(
      options.maxWaitMs ?? DEFAULT_MAX_WAIT_MS,
      'maxWaitMs',
      0,
      3_600_000,
    );
    const visibilityMs = checkVisibility(options.visibilityMs ?? 30_000);
    const push = checkPushOptions(options.push);
    const node = await ClusterNode.open({ ...options, visibilityMs });
    const queue = new ClusterQueue(node, maxWaitMs, visibilityMs, push);
    node.onScheduled = (request) => {
      queue.occurrences++;
      if (queue.events.active) {
        queue.events.record('scheduled', {
          id: request.id as string,
          topic: request.topic,
          deliverAt: request.deliverAt as number,
          attempts: 0,
        });
      }
    };
    // consume()'s acks and nacks: counted here, as ack() and nack() count their own.
    node.onSettled = (receipt, settled, reason) => {
      if (settled === 'acked') queue.insights.counters.acked++;
      else if (settled !== undefined) queue.insights.counters.nacked++;
      queue.settledDelivery(receipt, settled, reason);
    };
    node.onExpired = (message, settled) => queue.expiredDelivery(message, settled);
    node.onFired = (count) => (queue.insights.counters.fired += count);
    node.onCancelled = (message) => queue.cancelled(message);
    return queue;
  }

  // ---- producer ---------------------------------------------------------------------------

  async schedule(request: ScheduleRequest): Promise<{ id: string; deliverAt: number }> {
    this.checkOpen();
    const result = await this.node.schedule(request);
    this.events.record('scheduled', { ...result, topic: request.topic, attempts: 0 });
    return result;
  }

  async scheduleMany(
    requests: readonly ScheduleRequest[],
  ): Promise<Array<{ id: string; deliverAt: number }>> {
    this.checkOpen();
    const results = await this.node.scheduleMany(requests);
    if (this.events.active) {
      for (let i = 0; i < results.length; i++) {
        this.events.record('scheduled', { ...results[i], topic: requests[i].topic, attempts: 0 });
      }
    }
    return results;
  }

  async cancel(id: string): Promise<boolean> {
    this.checkOpen();
    const cancelled = await this.node.cancelGiving(id).catch(failed(id));
    if (cancelled !== undefined) this.cancelled(cancelled);
    return cancelled !== undefined;
  }

  async reschedule(id: string, when: { delayMs?: number; deliverAt?: number }): Promise<boolean> {
    return (await this.rescheduleTo(id, when)) !== undefined;
  }

  async rescheduleTo(
    id: string,
    when: { delayMs?: number; deliverAt?: number },
  ): Promise<number | undefined> {
    this.checkOpen();
    const due = await this.node.rescheduleTo(id, when).catch(failed(id));
    if (due !== undefined) this.insights.counters.rescheduled++;
    return due;
  }

  async requeue(id: string, options: { delayMs?: number } = {}): Promise<boolean> {
    this.checkOpen();
    return this.node.requeue(id, options).catch(failed(id));
  }

  async get(id: string): Promise<MessageInfo | undefined> {
    this.checkOpen();
    return this.node.inspector.info(checkId(id));
  }

  // ---- consumer ---------------------------------------------------------------------------

  async receive(topic: string, options: ReceiveOptions = {}): Promise<ReceivedMessage[]> {
    this.checkOpen();
    checkTopic(topic);
    const messages = await this.node.receive(
      topic,
      checkReceiveOptions(options, { maxWaitMs: this.maxWaitMs, visibilityMs: this.visibilityMs }),
    );
    this.delivered(messages);
    return messages;
  }

  async ack(receipt: string): Promise<boolean> {
    this.checkOpen();
    const done = await this.node.ack(receipt);
    if (done) this.insights.counters.acked++;
    this.settledDelivery(receipt, done ? 'acked' : undefined);
    return done;
  }

  async nack(receipt: string, options: NackOptions = {}): Promise<boolean> {
    this.checkOpen();
    const reason = checkNack(options);
    const outcome = await this.node.nackOutcome(receipt, {
      ...(options.delayMs === undefined ? {} : { delayMs: options.delayMs }),
      ...(reason === undefined ? {} : { reason }),
    });
    if (outcome !== undefined) this.insights.counters.nacked++;
    this.settledDelivery(receipt, settledBy(outcome), reason);
    return outcome !== undefined;
  }

  async ackMany(receipts: readonly string[]): Promise<boolean[]> {
    this.checkOpen();
    checkReceipts(receipts, 'ackMany');
    return Promise.all(receipts.map((receipt) => this.ack(receipt)));
  }

  async nackMany(receipts: readonly string[], options: NackOptions = {}): Promise<boolean[]> {
    this.checkOpen();
    checkReceipts(receipts, 'nackMany');
    checkNack(options, 'nackMany');
    return Promise.all(receipts.map((receipt) => this.nack(receipt, options)));
  }

  consume(
    topic: string,
    handler: MessageHandler,
    options: ConsumeOptions = {},
  ): { close(): Promise<void> } {
    this.checkOpen();
    checkTopic(topic);
    checkCallback(handler, 'handler');
    // As the embedded queue checks them: its wait is the node's own, not an option.
    checkConsumeOptions(options, 1_000);
    const counted: MessageHandler = (message) => {
      this.delivered([message]);
      return handler(message);
    };
    const worker = this.node.consume(topic, counted, options);
    let closing: Promise<void> | undefined;
    const consumer = {
      close: () => {
        if (closing === undefined) {
          this.consumers.delete(consumer);
          closing = worker.close();
        }
        return closing;
      },
    };
    this.consumers.add(consumer);
    return consumer;
  }

  async deadLetters(topic: string, limit = 100): Promise<MessageInfo[]> {
    this.checkOpen();
    checkTopic(topic);
    checkOption(limit, 'limit', 1, 10_000, true);
    return this.node.inspector.deadLetters(topic, limit);
  }

  // ---- topics -----------------------------------------------------------------------------

  pause(topic: string): Promise<TopicInfo> {
    return this.configureTopic(topic, { paused: true });
  }

  resume(topic: string): Promise<TopicInfo> {
    return this.configureTopic(topic, { paused: false });
  }

  async configureTopic(topic: string, update: TopicUpdate): Promise<TopicInfo> {
    this.checkOpen();
    const settings = await this.node.topics.update(topic, update);
    return this.topicOf(topic, settings, (await this.node.inspector.counts()).topics);
  }

  async topicInfo(topic: string): Promise<TopicInfo> {
    this.checkOpen();
    checkTopic(topic);
    const counts = (await this.node.inspector.counts()).topics;
    return this.topicOf(topic, this.node.topics.get(topic), counts);
  }

  async topicList(): Promise<TopicInfo[]> {
    this.checkOpen();
    const counts = (await this.node.inspector.counts()).topics;
    const names = new Set([...Object.keys(counts), ...this.node.topics.all().keys()]);
    return [...names]
      .sort()
      .map((topic) => this.topicOf(topic, this.node.topics.get(topic), counts));
  }

  private topicOf(
    topic: string,
    settings: TopicSettings,
    counts: Record<string, { scheduled: number; ready: number; inflight: number; dead: number }>,
  ): TopicInfo {
    const of = counts[topic];
    const pending = of === undefined ? 0 : of.scheduled + of.ready + of.inflight;
    return { topic, ...settingsView(settings), pending, dead: of?.dead ?? 0 };
  }

  // ---- recurring schedules (schedules.ts) --------------------------------------------------

  async putSchedule(name: string, spec: RecurringSpec): Promise<ScheduleInfo> {
    this.checkOpen();
    return this.node.schedules.put(name, spec).catch(failed(name));
  }

  async updateSchedule(
    name: string,
    patch: Partial<RecurringSpec>,
  ): Promise<ScheduleInfo | undefined> {
    this.checkOpen();
    return this.node.schedules.update(name, patch).catch(failed(name));
  }

  async getSchedule(name: string): Promise<ScheduleInfo | undefined> {
    this.checkOpen();
    return this.node.schedules.get(name);
  }

  async listSchedules(): Promise<ScheduleInfo[]> {
    this.checkOpen();
    return this.node.schedules.list();
  }

  async deleteSchedule(name: string): Promise<boolean> {
    this.checkOpen();
    return this.node.schedules.delete(name).catch(failed(name));
  }

  // ---- insights ---------------------------------------------------------------------------

  async stats(): Promise<Record<string, unknown>> {
    this.checkOpen();
    const [{ totals, topics }, owners] = await Promise.all([
      this.node.inspector.counts(),
      this.node.inspector.owners(),
    ]);
    const byNode: Record<string, number[]> = {};
    owners.forEach((owner, partition) => {
      (byNode[owner === '' ? '(none)' : owner] ??= []).push(partition);
    });
    const timers = this.node.wheelStats();
    const { created, deduplicated } = this.node.scheduleCounts;
    this.insights.counters.scheduled = this.occurrences + created;
    this.insights.counters.deduplicated = deduplicated;
    return {
      ...this.insights.figures(),
      inMemory: timers.pending,
      push: this.pushers.stats(),
      totals,
      topics,
      timers,
      cluster: {
        node: this.node.nodeId,
        queue: this.node.queue,
        partitions: this.node.partitions,
        durability: this.node.durability,
        durabilityOption: this.node.durabilityOption,
        durabilityReason: this.node.durabilityReason,
        members: [...this.node.members],
        owned: this.node.ownedPartitions(),
        owners: byNode,
        leaseChanges: this.node.leaseChanges,
        dataLosses: this.node.dataLosses,
      },
    };
  }

  dueHistogram(edgesMs: readonly number[]): Promise<number[]> {
    this.checkOpen();
    return this.node.inspector.dueHistogram(edgesMs, this.node.windowMs);
  }

  /** dueHistogram with the edges as asked (see ClusterInspector.dueHistogram for its grain). */
  async dueTimeline(edgesMs: readonly number[]): Promise<DueTimeline> {
    return { edgesMs: [...edgesMs], counts: await this.dueHistogram(edgesMs) };
  }

  async payloadPreview(
    id: string,
    maxChars = 200,
  ): Promise<{ preview: string; truncated: boolean } | undefined> {
    this.checkOpen();
    const found = await this.node.inspector.payload(checkId(id));
    if (found === undefined) return undefined;
    return payloadPreview(found.value, maxChars);
  }

  wheelSnapshot(maxRows?: number): WheelSnapshot {
    return this.node.wheelSnapshot(maxRows);
  }

  /** Undefined while Valkey/Redis answers a PING within a second; else what went wrong. */
  async problem(): Promise<string | undefined> {
    if (this.closed) return 'the queue is closed';
    return this.node.ping(1_000);
  }

  // ---- life cycle -------------------------------------------------------------------------

  /** Nothing runs in the background that a caller could wait for: resolves at once. */
  async settled(): Promise<void> {}

  /** Stops this node's consumers, hands its partitions to the other nodes, disconnects. */
  async close(): Promise<void> {
    if (this.closed) return;
    await this.pushers.close();
    this.closed = true;
    await Promise.all([...this.consumers].map((consumer) => consumer.close()));
    await this.node.close();
  }

  private delivered(messages: readonly ReceivedMessage[]): void {
    const now = Date.now();
    this.insights.counters.delivered += messages.length;
    for (const message of messages) {
      if (message.attempts === 1) this.insights.deliveredFirst(message, now);
    }
    if (!this.events.active) {
      this.outstanding.clear();
      return;
    }
    for (const message of messages) {
      this.events.record('delivered', message);
      // Bounded: deliveries never acked nor nacked here (their visibility ran out) age out.
      if (this.outstanding.size >= MAX_OUTSTANDING) {
        this.outstanding.delete(this.outstanding.keys().next().value as string);
      }
      const { id, topic, deliverAt, attempts } = message;
      this.outstanding.set(message.receipt, { id, topic, deliverAt, attempts });
    }
  }

  /**
   * An ack or nack made here: a dead letter counted, and the event of a delivery made here
   * ('acked', 'failed', or 'dead' when that was its last attempt), if anyone listened when it
   * was made.
   */
  private settledDelivery(receipt: string, settled: Settled | undefined, reason?: string): void {
    if (settled === 'dead') this.insights.counters.dead++;
    const message = this.outstanding.get(receipt);
    if (message === undefined) return;
    this.outstanding.delete(receipt);
    if (settled === undefined) return;
    if (settled === 'acked') this.events.record('acked', message);
    else this.events.record(settled, message, reason ?? 'nacked');
  }

  /**
   * A message cancelled through this node (by a caller, or by a recurring schedule changed or
   * deleted): counted, and its event, with the topic and times tw_cancel gave in the same call.
   */
  private cancelled(message: CancelledMessage): void {
    this.insights.counters.cancelled++;
    if (!this.events.active) return;
    if (message.known) {
      this.events.record('cancelled', message);
      return;
    }
    // An older library said nothing of what it cancelled: read back, as before version 13.
    void this.node.inspector
      .info(message.id)
      .then((info) => info !== undefined && this.events.record('cancelled', info))
      .catch(() => {});
  }

  /**
   * A delivery this node failed as a partition's owner because its visibility ran out (whoever
   * received it): counted, and reported as 'failed' (due again) or 'dead', as the embedded
   * queue reports it.
   */
  private expiredDelivery(message: ExpiredDelivery, settled: 'failed' | 'dead'): void {
    this.insights.counters.expired++;
    if (settled === 'dead') this.insights.counters.dead++;
    this.events.record(settled, message, VISIBILITY_REASON);
  }

  private checkOpen(): void {
    if (this.closed) {
      throw new TickwheelStateError('ERR_TICKWHEEL_CLOSED', 'this DelayQueue is closed');
    }
  }
}

/**
 * The rejection handler of a write about `subject` (a message id, a schedule's name): marks a
 * failure that may have come after the write reached Valkey (errors.ts, mayHaveWritten).
 */
function failed(subject: string): (err: unknown) => never {
  return (err) => {
    throw mayHaveWritten(err, subject);
  };
}
