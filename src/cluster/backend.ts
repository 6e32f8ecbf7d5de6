/**
 * ClusterBackend: the queue's backend (src/queue/backend.ts) over a ClusterNode. It hands each
 * call to the node's parts and tells the facade's report (src/queue/report.ts) what happened
 * through this node. docs/cluster.md, "Differences from the embedded queue", says why: the
 * system clock only (nodes and Valkey must agree on time), finished messages remembered for
 * get() per partition (lua/messages.lua, `remember`), counters of what went through this node.
 */

import { mayHaveWritten } from '../errors.js';
import type { BackendListPage, ListQuery } from '../queue/list.js';
import type {
  BackendStats,
  QueueBackend,
  ReceiveLimits,
  Scheduled,
  TopicCounts,
} from '../queue/backend.js';
import type { ScheduleInfo } from '../queue/recurring.js';
import type { ScheduleSpec } from '../queue/recurring-spec.js';
import { NACK_REASON, VISIBILITY_REASON, type CheckedRequest } from '../queue/message.js';
import type { QueueLimits } from '../queue/options.js';
import type { DueTimeline, MessageInfo, ReceivedMessage } from '../queue/types.js';
import type { TopicGate } from '../queue/topics.js';
import type { WorkerSource } from '../queue/worker.js';
import type { WheelSnapshot } from '../wheel/index.js';
import type { EventSource } from '../queue/events.js';
import type { QueueReport } from '../queue/report.js';
import type { FaultHandler } from '../queue/faults.js';
import { ClusterNode } from './node.js';
import { faultsOncePer } from './node-options.js';
import type { ClusterNodeOptions } from './node-options.js';
import { settledBy, type DurableWrite, type Settled } from './consumer.js';
import type { ExpiredDelivery } from './owner.js';

/** The options of a queue on Valkey/Redis: the node's, and the ones every backend takes. */
export interface ClusterQueueOptions extends ClusterNodeOptions {
  /** Longest long-poll wait accepted by receive(). Default 60,000 ms. */
  maxWaitMs?: number;
  /** Internal addresses this node's pushes may reach (docs/push.md); default none. */
  push?: QueueLimits['push'];
  /** Takes the node's background faults with their codes (src/queue/faults.ts). */
  onFault?: FaultHandler;
  /** Whether acks and nacks wait for `durability` unless a call says otherwise. Default false. */
  durableAcks?: boolean;
}

const LEASE_LOSS = {
  expired: 'not renewed in time',
  refused: 'its renewal was refused or failed',
  fenced: 'another node holds a newer one',
} as const;

/** Each receive of consume() waits up to this long (woken when a message is ready). */
const CONSUME_WAIT_MS = 1_000;

/** Deliveries remembered for their ack's or nack's event (see `outstanding`). */
const MAX_OUTSTANDING = 100_000;

export class ClusterBackend implements QueueBackend {
  readonly recovery = undefined;
  readonly consumeWaitMs = CONSUME_WAIT_MS;
  /** Deliveries made here while someone listens, by receipt: what an ack's or nack's event says. */
  private readonly outstanding = new Map<string, EventSource>();
  /** What consume()'s workers and the pushes receive from: counted as receive() counts. */
  readonly source: WorkerSource;
  private constructor(
    readonly node: ClusterNode,
    private readonly report: QueueReport,
  ) {
    this.source = {
      receive: (topic, { max, waitMs, visibilityMs }, signal) =>
        this.take(topic, max, waitMs, signal, visibilityMs === undefined ? {} : { visibilityMs }),
      ack: (receipt) => this.ack(receipt, false),
      nack: (receipt, reason) => this.nack(receipt, reason, undefined, false),
    };
  }

  get topics(): TopicGate {
    return this.node.topics;
  }

  /** Opens this process's node; `limits` checked by the queue (checkQueueOptions). */
  static async open(
    options: ClusterNodeOptions,
    limits: QueueLimits,
    report: QueueReport,
  ): Promise<ClusterBackend> {
    const node = await ClusterNode.open({
      ...options,
      onError: options.onError ?? faultsOncePer(10_000, limits.onFault),
      horizonMs: limits.horizonMs,
      visibilityMs: limits.visibilityMs,
      maxPayloadBytes: limits.maxPayloadBytes,
    });
    const queue = new ClusterBackend(node, report);
    node.onScheduled = (request) =>
      report.scheduled({
        id: request.id as string,
        topic: request.topic,
        deliverAt: request.deliverAt as number,
        attempts: 0,
      });
    node.onExpired = (message, settled) => queue.expiredDelivery(message, settled);
    node.onFired = (count) => report.firedMany(count);
    node.onLeaseLost = (partition, reason) =>
      limits.onFault({
        code: 'ERR_TICKWHEEL_LEASE_LOST',
        level: 'warn',
        message: `node ${node.nodeId} lost the lease of partition ${partition} (${LEASE_LOSS[reason]}); its messages wait for the next owner`,
        name: 'TickwheelWarning',
        fields: { node: node.nodeId, partition, reason },
      });
    node.onCancelled = (message) => report.cancelled(message);
    return queue;
  }

  now(): number {
    return Date.now();
  }

  // ---- producer ---------------------------------------------------------------------------

  async schedule(request: CheckedRequest): Promise<Scheduled> {
    return this.made(request, await this.node.producer.schedule(request));
  }

  async scheduleMany(requests: readonly CheckedRequest[]): Promise<Scheduled[]> {
    const results = await this.node.producer.scheduleMany(requests);
    for (let i = 0; i < results.length; i++) results[i] = this.made(requests[i], results[i]);
    return results;
  }

  /** A schedule's answer; its event unless its id was pending (deduplicated). */
  private made(request: CheckedRequest, result: Scheduled & { deduplicated?: true }): Scheduled {
    if (result.deduplicated) {
      this.report.deduplicated();
      return { id: result.id, deliverAt: result.deliverAt };
    }
    this.report.scheduled({ ...result, topic: request.topic, attempts: 0 });
    return result;
  }

  async cancel(id: string): Promise<boolean> {
    const cancelled = await this.node.producer.cancelGiving(id).catch(failed(id));
    if (cancelled !== undefined) this.report.cancelled(cancelled);
    return cancelled !== undefined;
  }

  async moveTo(id: string, deliverAt: number): Promise<number | undefined> {
    const due = await this.node.producer.rescheduleTo(id, deliverAt).catch(failed(id));
    if (due !== undefined) this.report.rescheduled();
    return due;
  }

  requeue(id: string, deliverAt: number): Promise<boolean> {
    return this.node.producer.requeue(id, deliverAt).catch(failed(id));
  }

  get(id: string): Promise<MessageInfo | undefined> {
    return this.node.inspector.info(id);
  }

  payload(id: string): Promise<{ value: unknown } | undefined> {
    return this.node.inspector.payload(id);
  }

  // ---- consumer ---------------------------------------------------------------------------

  receive(topic: string, limits: ReceiveLimits): Promise<ReceivedMessage[]> {
    const { max, waitMs, visibilityMs, maxBytes } = limits;
    return this.take(topic, max, waitMs, undefined, { visibilityMs, maxBytes });
  }

  /** Receives through the topic's gate from every partition of the topic. */
  private async take(
    topic: string,
    max: number,
    waitMs: number,
    signal: AbortSignal | undefined,
    limits: { visibilityMs?: number; maxBytes?: number },
  ): Promise<ReceivedMessage[]> {
    const { topics, consumer } = this.node;
    const messages = await topics.receive(topic, max, waitMs, signal, {
      receive: (granted, left) =>
        consumer.receive(topic, { ...limits, max: granted, waitMs: left }),
      waitReady: (ms, aborts) => consumer.waitReady(topic, ms, aborts),
    });
    this.delivered(messages);
    return messages;
  }

  /** `durable`: written on the producer's connections and waited for as a schedule is. */
  async ack(receipt: string, durable: boolean): Promise<boolean> {
    const done = await this.node.consumer.ack(receipt, this.durably(durable));
    this.settledDelivery(receipt, done ? 'acked' : undefined);
    return done;
  }

  async nack(
    receipt: string,
    reason: string | undefined,
    delayMs: number | undefined,
    durable: boolean,
  ): Promise<boolean> {
    const kept = reason ?? NACK_REASON;
    const nacked = await this.node.consumer.nack(
      receipt,
      { ...(delayMs === undefined ? {} : { delayMs }), reason: kept },
      this.durably(durable),
    );
    this.settledDelivery(receipt, settledBy(nacked?.outcome), kept, nacked?.dead);
    return nacked !== undefined;
  }

  private durably(durable: boolean): DurableWrite | undefined {
    if (!durable) return undefined;
    const { producer } = this.node;
    return (meta, what, write) => producer.durably(meta, what, write);
  }

  list(query: ListQuery): Promise<BackendListPage> {
    return this.node.inspector.list(query, this.node.settings.windowMs);
  }

  deadLetters(topic: string, limit: number): Promise<MessageInfo[]> {
    return this.node.inspector.deadLetters(topic, limit);
  }

  // ---- topics ----------------------------------------------------------------------------

  async topicCounts(): Promise<Map<string, TopicCounts>> {
    const { topics } = await this.node.inspector.counts();
    const counts = new Map<string, TopicCounts>();
    for (const [topic, of] of Object.entries(topics)) {
      counts.set(topic, { pending: of.scheduled + of.ready + of.inflight, dead: of.dead });
    }
    return counts;
  }

  // ---- recurring schedules (schedules.ts) --------------------------------------------------

  putSchedule(name: string, spec: ScheduleSpec): Promise<ScheduleInfo> {
    return this.node.schedules.put(name, spec).catch(failed(name));
  }

  updateSchedule(
    name: string,
    change: (spec: ScheduleSpec) => ScheduleSpec,
  ): Promise<ScheduleInfo | undefined> {
    return this.node.schedules.update(name, change).catch(failed(name));
  }

  getSchedule(name: string): Promise<ScheduleInfo | undefined> {
    return this.node.schedules.get(name);
  }

  listSchedules(): Promise<ScheduleInfo[]> {
    return this.node.schedules.list();
  }

  deleteSchedule(name: string): Promise<boolean> {
    return this.node.schedules.delete(name).catch(failed(name));
  }

  // ---- insights ---------------------------------------------------------------------------

  async stats(): Promise<BackendStats> {
    const [{ totals, topics }, owners] = await Promise.all([
      this.node.inspector.counts(),
      this.node.inspector.owners(),
    ]);
    const byNode: Record<string, number[]> = {};
    owners.forEach((owner, partition) => {
      (byNode[owner === '' ? '(none)' : owner] ??= []).push(partition);
    });
    const timers = this.node.wheelStats();
    const { settings } = this.node;
    return {
      inMemory: timers.pending,
      totals,
      topics,
      timers,
      cluster: {
        node: this.node.nodeId,
        queue: this.node.queue,
        partitions: settings.partitions,
        durability: settings.durability,
        durabilityOption: settings.durabilityOption,
        durabilityReason: settings.durabilityReason,
        members: [...this.node.members],
        owned: this.node.ownedPartitions(),
        owners: byNode,
        leaseChanges: this.node.leaseChanges,
        dataLosses: this.node.dataLosses,
      },
    };
  }

  async dueTimeline(edgesMs: readonly number[]): Promise<DueTimeline> {
    const counts = await this.node.inspector.dueHistogram(edgesMs, this.node.settings.windowMs);
    return { edgesMs: [...edgesMs], counts };
  }

  wheelSnapshot(maxRows?: number): WheelSnapshot {
    return this.node.wheelSnapshot(maxRows);
  }

  problem(): Promise<string | undefined> {
    return this.node.ping(1_000);
  }

  // ---- life cycle -------------------------------------------------------------------------

  /** Nothing runs in the background that a caller could wait for. */
  async settled(): Promise<void> {}

  close(): Promise<void> {
    return this.node.close();
  }

  private delivered(messages: readonly ReceivedMessage[]): void {
    this.report.delivered(messages, Date.now());
    if (!this.report.events.active) {
      this.outstanding.clear();
      return;
    }
    for (const message of messages) {
      // Bounded: deliveries never acked nor nacked here (their visibility ran out) age out.
      if (this.outstanding.size >= MAX_OUTSTANDING) {
        this.outstanding.delete(this.outstanding.keys().next().value as string);
      }
      const { id, topic, deliverAt, attempts } = message;
      this.outstanding.set(message.receipt, { id, topic, deliverAt, attempts });
    }
  }

  /**
   * An ack or nack made here (undefined: no delivery still out), with the event of a delivery
   * made while anyone listened. A dead letter read back from Valkey (`dead`) is reported
   * whoever listened: its span continues the trace it was scheduled in.
   */
  private settledDelivery(
    receipt: string,
    settled: Settled | undefined,
    reason?: string,
    dead?: EventSource,
  ): void {
    const message = dead ?? this.outstanding.get(receipt);
    this.outstanding.delete(receipt);
    if (settled === undefined) return;
    if (settled === 'acked') {
      this.report.acked(message);
      return;
    }
    this.report.nacked();
    this.settle(message, settled, reason ?? NACK_REASON);
  }

  /** A delivery this node failed as a partition's owner because its visibility ran out. */
  private expiredDelivery(message: ExpiredDelivery, settled: 'failed' | 'dead'): void {
    this.report.expired();
    this.settle(message, settled, VISIBILITY_REASON);
  }

  private settle(
    message: EventSource | undefined,
    settled: 'failed' | 'dead',
    reason: string,
  ): void {
    if (settled === 'dead') this.report.dead(message, reason);
    else this.report.failed(message, reason);
  }
}

/** Marks a failed write about `subject` that may have reached Valkey (mayHaveWritten). */
function failed(subject: string): (err: unknown) => never {
  return (err) => {
    throw mayHaveWritten(err, subject);
  };
}
