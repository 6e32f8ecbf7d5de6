/**
 * The queue's backend over partitions in a shared store: one process's node of the queue
 * (docs/cluster.md), talking to the store only through its PartitionDriver. Its LeaseLoop runs a
 * PartitionOwner per partition it wins; its Producer, Consumer, topics and schedules serve any
 * partition. The wheel and the loop are unref'd: a node keeps its process alive only while a
 * caller waits on it.
 */

import { SystemClock } from '../clock/index.js';
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
import type {
  DueTimeline,
  MessageInfo,
  ReceivedMessage,
  TransactionClient,
} from '../queue/types.js';
import type { ClusterStats } from '../protocol/model.js';
import type { TopicGate } from '../queue/topics.js';
import type { WorkerSource } from '../queue/worker.js';
import type { EventSource } from '../queue/events.js';
import type { QueueReport } from '../queue/report.js';
import type { FaultReporter } from '../queue/faults.js';
import { TimerWheel } from '../timer/index.js';
import type { WheelSnapshot } from '../wheel/index.js';
import { Consumer, type NackOutcome } from './consumer.js';
import type { PartitionDriver } from './driver.js';
import { PartitionInspector } from './inspect.js';
import { LeaseLoop } from './lease-loop.js';
import type { NodeSettings } from './node-options.js';
import type { Due } from './owner.js';
import { Producer } from './producer.js';
import { PartitionSchedules, ONCE_MARK_MS } from './schedules.js';
import { PartitionTopics } from './topic-store.js';

const LEASE_LOSS = {
  expired: 'not renewed in time',
  refused: 'its renewal was refused or failed',
  fenced: 'another node holds a newer one',
} as const;

/** Each receive of consume() waits up to this long (woken when a message is ready). */
const CONSUME_WAIT_MS = 1_000;

/** Bounds `outstanding`. */
const MAX_OUTSTANDING = 100_000;

export class PartitionedBackend implements QueueBackend {
  readonly recovery = undefined;
  readonly consumeWaitMs = CONSUME_WAIT_MS;
  readonly nodeId: string;
  readonly producer: Producer;
  readonly consumer: Consumer;
  readonly inspector: PartitionInspector;
  readonly schedules: PartitionSchedules;
  /** Every receive of this node goes through it (topic-store.ts). */
  readonly topics: TopicGate;
  private readonly sharedTopics: PartitionTopics;
  private readonly leases: LeaseLoop;
  private readonly wheel: TimerWheel<Due>;
  private readonly unsubscribes: Array<() => Promise<void>> = [];
  private closed = false;
  /** Deliveries made here while someone listens, by receipt: for their ack's or nack's event. */
  private readonly outstanding = new Map<string, EventSource>();
  /** What consume()'s workers and the pushes receive from: counted as receive() counts. */
  readonly source: WorkerSource;
  /**
   * Schedules in the caller's open transaction, where the store can join one. Neither counted
   * nor told as events here: this node never sees whether the transaction commits.
   */
  readonly scheduleIn?: (
    requests: readonly CheckedRequest[],
    client: TransactionClient,
  ) => Promise<Scheduled[]>;

  /** The settings are checked (node-options.ts), `partitions` and `windowMs` the stored ones. */
  constructor(
    readonly driver: PartitionDriver,
    readonly settings: NodeSettings,
    private readonly report: QueueReport,
    onFault: FaultReporter,
  ) {
    const { nodeId } = settings;
    this.nodeId = nodeId;
    this.producer = new Producer(driver, settings);
    if (driver.scheduleIn !== undefined) {
      this.scheduleIn = async (requests, client) => {
        const results = await this.producer.scheduleIn(client, requests);
        return results.map(({ id, deliverAt }) => ({ id, deliverAt }));
      };
    }
    this.schedules = new PartitionSchedules(driver, settings.maxSchedules, {
      node: nodeId,
      onError: (err) => settings.onError(err),
      schedule: async (request) => {
        if (!(await this.producer.scheduleOnce(request, ONCE_MARK_MS))) return;
        const { id, topic, deliverAt } = request;
        report.scheduled({ id: id as string, topic, deliverAt: deliverAt as number, attempts: 0 });
      },
      cancel: async (id) => {
        const cancelled = await this.producer.cancelGiving(id);
        if (cancelled !== undefined) report.cancelled(cancelled);
        return cancelled !== undefined;
      },
      sched: (change, what) => this.producer.sched(change, what),
      leads: (epoch) => this.leases.leads(epoch),
      isLive: async (id) => {
        const status = (await this.producer.get(id))?.status;
        return status === 'scheduled' || status === 'ready' || status === 'inflight';
      },
    });
    this.consumer = new Consumer(driver, settings);
    this.inspector = new PartitionInspector(driver, settings.partitions, settings.windowMs);
    this.sharedTopics = new PartitionTopics(
      driver,
      (topic) => this.consumer.wakeTopic(topic),
      (err) => settings.onError(err),
    );
    this.topics = this.sharedTopics.gate;
    this.consumer.generation = (topic) => this.topics.generation(topic);
    this.wheel = new TimerWheel<Due>({
      clock: new SystemClock({ epoch: true }),
      unref: true,
      onExpire: (due) => due.owner.fire(due),
    });
    this.leases = new LeaseLoop(driver, settings, this.wheel, {
      isClosed: () => this.closed,
      onMembers: () => {
        if (!this.closed) this.sharedTopics.refresh();
      },
      schedules: this.schedules,
      onExpired: (message, settled) => {
        report.expired();
        this.settle(message, settled, VISIBILITY_REASON);
      },
      onFired: (count) => report.firedMany(count),
      onLeaseLost: (partition, reason) =>
        onFault({
          code: 'ERR_TICKWHEEL_LEASE_LOST',
          level: 'warn',
          message: `node ${nodeId} lost the lease of partition ${partition} (${LEASE_LOSS[reason]}); its messages wait for the next owner`,
          name: 'TickwheelWarning',
          fields: { node: nodeId, partition, reason },
        }),
    });
    this.source = {
      receive: (topic, options, signal) => this.receive(topic, options, signal),
      ack: (receipt) => this.ack(receipt, false, true),
      nack: (receipt, reason) => this.nack(receipt, reason, undefined, false),
    };
  }

  /** Joins the queue: its topics' settings read, its partitions' events heard, leases sought. */
  async start(): Promise<void> {
    // Before this node takes anything: a paused topic stays paused on a node that joins.
    await this.topics.load();
    for (let p = 0; p < this.settings.partitions; p++) {
      const stop = await this.driver.subscribe(p, (message) => {
        if (message.startsWith('r ')) this.consumer.onReady(p, message.slice(2));
        else if (message.startsWith('a ')) this.consumer.onReadyAt(p, message.slice(2));
        else this.leases.onOwnerEvent(p, message);
      });
      this.unsubscribes.push(stop);
    }
    await this.leases.start();
  }

  now(): number {
    return Date.now();
  }

  get members(): string[] {
    return this.leases.members;
  }

  ownedPartitions(): number[] {
    return this.leases.owned();
  }

  async schedule(request: CheckedRequest): Promise<Scheduled> {
    return this.made(request, await this.producer.schedule(request));
  }

  async scheduleMany(requests: readonly CheckedRequest[]): Promise<Scheduled[]> {
    const results = await this.producer.scheduleMany(requests);
    for (let i = 0; i < results.length; i++) results[i] = this.made(requests[i], results[i]);
    return results;
  }

  /** A schedule's answer; its event unless its id was pending (deduplicated). */
  private made(request: CheckedRequest, result: Scheduled & { deduplicated?: true }): Scheduled {
    if (result.deduplicated) {
      this.report.deduplicated();
      return { id: result.id, deliverAt: result.deliverAt };
    }
    this.report.scheduledAs(() => ({ ...result, topic: request.topic, attempts: 0 }));
    return result;
  }

  async cancel(id: string): Promise<boolean> {
    const cancelled = await this.producer.cancelGiving(id).catch(failed(id));
    if (cancelled !== undefined) this.report.cancelled(cancelled);
    return cancelled !== undefined;
  }

  async moveTo(id: string, deliverAt: number): Promise<number | undefined> {
    const due = await this.producer.rescheduleTo(id, deliverAt).catch(failed(id));
    if (due !== undefined) this.report.rescheduled();
    return due;
  }

  requeue(id: string, deliverAt: number): Promise<boolean> {
    return this.producer.move('requeue', id, deliverAt).catch(failed(id));
  }

  get(id: string): Promise<MessageInfo | undefined> {
    return this.inspector.info(id);
  }

  payload(id: string): Promise<{ value: unknown } | undefined> {
    return this.inspector.payload(id);
  }

  /** Receives through the topic's gate from every partition of the topic. */
  async receive(
    topic: string,
    { max, waitMs, ...limits }: Pick<ReceiveLimits, 'max' | 'waitMs'> & Partial<ReceiveLimits>,
    signal?: AbortSignal,
  ): Promise<ReceivedMessage[]> {
    const { topics, consumer } = this;
    const messages = await topics.receive(topic, max, waitMs, signal, {
      receive: (granted, left) =>
        consumer.receive(topic, { ...limits, max: granted, waitMs: left }, signal),
      waitReady: (ms, aborts) => consumer.waitReady(topic, ms, aborts),
    });
    this.delivered(messages);
    return messages;
  }

  /** `durable`: waited for as a schedule is; `quiet`: consume()'s, which nobody waits for. */
  async ack(receipt: string, durable: boolean, quiet = false): Promise<boolean> {
    const done = await this.consumer.ack(receipt, durable, quiet);
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
    const nacked = await this.consumer.nack(
      receipt,
      { ...(delayMs === undefined ? {} : { delayMs }), reason: kept },
      durable,
    );
    this.settledDelivery(receipt, nacked?.outcome, kept, nacked?.dead);
    return nacked !== undefined;
  }

  list(query: ListQuery): Promise<BackendListPage> {
    return this.inspector.list(query);
  }

  deadLetters(topic: string, limit: number): Promise<MessageInfo[]> {
    return this.inspector.deadLetters(topic, limit);
  }

  async topicCounts(): Promise<ReadonlyMap<string, TopicCounts>> {
    const { topics } = await this.inspector.counts();
    const counts = new Map<string, TopicCounts>();
    for (const [topic, of] of topics) {
      counts.set(topic, { pending: of.scheduled + of.ready + of.inflight, dead: of.dead });
    }
    return counts;
  }

  async topicCountsOf(topic: string): Promise<TopicCounts> {
    const of = await this.inspector.topicCounts(topic);
    return { pending: of.scheduled + of.ready + of.inflight, dead: of.dead };
  }

  putSchedule(name: string, spec: ScheduleSpec): Promise<ScheduleInfo> {
    return this.schedules.put(name, spec).catch(failed(name));
  }

  updateSchedule(
    name: string,
    change: (spec: ScheduleSpec) => ScheduleSpec,
  ): Promise<ScheduleInfo | undefined> {
    return this.schedules.update(name, change).catch(failed(name));
  }

  getSchedule(name: string): Promise<ScheduleInfo | undefined> {
    return this.schedules.get(name);
  }

  listSchedules(): Promise<ScheduleInfo[]> {
    return this.schedules.list();
  }

  deleteSchedule(name: string): Promise<boolean> {
    return this.schedules.delete(name).catch(failed(name));
  }

  async stats(): Promise<BackendStats> {
    const [{ totals, topics }, owners] = await Promise.all([
      this.inspector.counts(),
      this.inspector.owners(),
    ]);
    const byNode: Record<string, number[]> = Object.create(null);
    owners.forEach((owner, partition) => {
      (byNode[owner === '' ? '(none)' : owner] ??= []).push(partition);
    });
    const timers = this.wheel.stats();
    const { settings, leases } = this;
    const { setting, option, reason } = this.driver.durability;
    return {
      inMemory: timers.pending,
      // A copy: the read is shared with other callers (counts-reads.ts).
      totals: { ...totals },
      topics,
      timers,
      cluster: {
        node: this.nodeId,
        queue: this.settings.queue,
        partitions: settings.partitions,
        durability: setting as ClusterStats['durability'],
        durabilityOption: option as ClusterStats['durabilityOption'],
        durabilityReason: reason,
        members: [...this.members],
        owned: this.ownedPartitions(),
        owners: byNode,
        leaseChanges: leases.leaseChanges,
        dataLosses: leases.dataLosses,
      },
    };
  }

  async dueTimeline(edgesMs: readonly number[]): Promise<DueTimeline> {
    const counts = await this.inspector.dueHistogram(edgesMs);
    return { edgesMs: [...edgesMs], counts };
  }

  wheelSnapshot(maxRows?: number): WheelSnapshot {
    return this.wheel.wheelSnapshot(maxRows);
  }

  /** Undefined if the store answers within a second. */
  problem(): Promise<string | undefined> {
    return this.driver.problem();
  }

  stopped(): boolean {
    return false;
  }

  /** Nothing runs in the background that a caller could wait for. */
  async settled(): Promise<void> {}

  /** Gives its partitions up (so others take them at once), leaves, and disconnects. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // Receives waiting in the gate (paused, out of tokens) end empty now.
    this.topics.close();
    await this.schedules.close();
    this.consumer.close();
    await this.leases.release();
    this.consumer.wakeAll();
    await this.leases.leave();
    for (const stop of this.unsubscribes) await stop().catch(() => {});
    this.wheel.close();
    await this.driver.close();
  }

  /** Stops the timers of a node that failed to start; its driver is its opener's to close. */
  abandon(): void {
    this.wheel.close();
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
   * Reports an ack or nack made here (undefined: no delivery still out). A dead letter read back
   * from the store (`dead`) is reported whoever listened: its span continues its trace.
   */
  private settledDelivery(
    receipt: string,
    settled: 'acked' | NackOutcome | undefined,
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
    this.settle(message, settled === 'retry' ? 'failed' : 'dead', reason ?? NACK_REASON);
  }

  /** Reports a delivery failed, by a nack or (as its partition's owner) by its visibility. */
  private settle(message: EventSource | undefined, settled: 'failed' | 'dead', reason: string) {
    if (settled === 'dead') this.report.dead(message, reason);
    else this.report.failed(message, reason);
  }
}

/** Marks a failed write about `subject` that may have reached the store (mayHaveWritten). */
function failed(subject: string): (err: unknown) => never {
  return (err) => {
    throw mayHaveWritten(err, subject);
  };
}
