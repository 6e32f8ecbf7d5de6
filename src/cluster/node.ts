/**
 * A cluster node: one process's share of a queue that lives in Valkey/Redis (docs/cluster.md).
 * Its LeaseLoop keeps it in the member list and runs a PartitionOwner for each partition it
 * wins; its Producer, Consumer, topics and schedules serve any partition. The wheel and the
 * loop are unref'd: a node keeps its process alive only while a caller waits on it.
 */

import type { ScheduleRequest } from '../queue/message.js';
import type { TopicGate } from '../queue/topics.js';
import { SystemClock } from '../clock/index.js';
import { TimerWheel, type TimerWheelStats } from '../timer/index.js';
import type { WheelSnapshot } from '../wheel/index.js';
import { ClusterValkey } from './connection.js';
import { Consumer } from './consumer.js';
import { ClusterInspector } from './inspect.js';
import * as tw from './functions.js';
import { configKey, eventsChannel } from './keys.js';
import { LeaseLoop } from './lease-loop.js';
import { checkNodeOptions, type ClusterNodeOptions, type NodeSettings } from './node-options.js';
import type { Due, ExpiredDelivery } from './owner.js';
import { Producer, type CancelledMessage } from './producer.js';
import { ClusterSchedules, ONCE_MARK_MS } from './schedules.js';
import { ClusterTopics } from './topic-store.js';
import { chooseDurability } from './durability.js';
import { untilReachable, withinMs } from '../valkey/reach.js';

export class ClusterNode {
  readonly nodeId: string;
  readonly queue: string;
  readonly producer: Producer;
  readonly consumer: Consumer;
  private readonly leases: LeaseLoop;
  private readonly wheel: TimerWheel<Due>;
  private readonly unsubscribes: Array<() => Promise<void>> = [];
  private closed = false;
  readonly inspector: ClusterInspector;
  /** Every receive of this node goes through it (topic-store.ts). */
  readonly topics: TopicGate;
  private readonly sharedTopics: ClusterTopics;
  readonly schedules: ClusterSchedules;
  // What the node tells its queue (backend.ts) for the queue's events and counters.
  onCancelled: ((message: CancelledMessage) => void) | undefined;
  onScheduled: ((request: ScheduleRequest) => void) | undefined;
  onExpired: ((message: ExpiredDelivery, settled: 'failed' | 'dead') => void) | undefined;
  onFired: ((count: number) => void) | undefined;
  onLeaseLost: ((partition: number, reason: 'expired' | 'refused' | 'fenced') => void) | undefined;

  private constructor(
    private readonly valkey: ClusterValkey,
    /**
     * The producer's own connections (`valkey` with durability 'async'): a WAIT or WAITAOF
     * holds its connection until replicas answer, which on the connections that renew leases
     * and fire messages would hold those up as long.
     */
    private readonly writes: ClusterValkey,
    readonly settings: NodeSettings,
  ) {
    this.nodeId = settings.nodeId;
    this.queue = settings.queue;
    this.producer = new Producer(writes, settings);
    this.schedules = new ClusterSchedules(valkey, settings.queue, {
      node: settings.nodeId,
      onError: (err) => settings.onError(err),
      schedule: async (request) => {
        if (await this.producer.scheduleOnce(request, ONCE_MARK_MS)) this.onScheduled?.(request);
      },
      cancel: async (id) => {
        const cancelled = await this.producer.cancelGiving(id);
        if (cancelled !== undefined) this.onCancelled?.(cancelled);
        return cancelled !== undefined;
      },
      sched: (change, what) => this.producer.sched(change, what),
      leads: (epoch) => this.leases.leads(epoch),
      isLive: async (id) => {
        const status = (await this.producer.get(id))?.status;
        return status === 'scheduled' || status === 'ready' || status === 'inflight';
      },
    });
    this.consumer = new Consumer(valkey, settings);
    this.inspector = new ClusterInspector(valkey, settings.queue, settings.partitions);
    this.sharedTopics = new ClusterTopics(
      valkey,
      this.producer,
      settings.queue,
      (topic) => this.consumer.wakeTopic(topic),
      (err) => this.settings.onError(err),
    );
    this.topics = this.sharedTopics.gate;
    this.consumer.generation = (topic) => this.topics.generation(topic);
    this.wheel = new TimerWheel<Due>({
      clock: new SystemClock({ epoch: true }),
      unref: true,
      onExpire: (due) => due.owner.fire(due),
    });
    this.leases = new LeaseLoop(valkey, settings, this.wheel, {
      isClosed: () => this.closed,
      onMembers: () => {
        if (!this.closed) this.sharedTopics.refresh();
      },
      schedules: this.schedules,
      onExpired: (message, settled) => this.onExpired?.(message, settled),
      onFired: (count) => this.onFired?.(count),
      onLeaseLost: (partition, reason) => this.onLeaseLost?.(partition, reason),
    });
  }

  get members(): string[] {
    return this.leases.members;
  }

  get leaseChanges(): number {
    return this.leases.leaseChanges;
  }

  get dataLosses(): number {
    return this.leases.dataLosses;
  }

  /**
   * Opens a node, trying a server that is not there again and again until `connectTimeoutMs`
   * (reach.ts); the durability is decided once reached (durability.ts).
   */
  static async open(options: ClusterNodeOptions): Promise<ClusterNode> {
    const { settings, asked, connectTimeoutMs } = checkNodeOptions(options);
    const { queue } = settings;
    const urls = Array.isArray(options.redis) ? [...options.redis] : [String(options.redis)];
    return untilReachable(urls, connectTimeoutMs, async (leftMs) => {
      const valkey = await ClusterValkey.connect(options.redis, leftMs);
      // Calls made while opening are bounded by the time left, so that the whole open is.
      valkey.limitCalls(leftMs);
      let writes = valkey;
      let node: ClusterNode | undefined;
      try {
        const { durability, reason } = chooseDurability(asked, await valkey.replicasPerPrimary());
        if (durability !== 'async') {
          writes = (await ClusterValkey.connect(options.redis, leftMs)).pin();
        }
        await valkey.loadLibrary();
        const { partitions, windowMs } = settings;
        const stored = await tw.config(valkey, configKey(queue), partitions, windowMs);
        node = new ClusterNode(valkey, writes, {
          ...settings,
          ...stored,
          durability,
          durabilityOption: asked,
          durabilityReason: reason,
        });
        await node.start();
        valkey.limitCalls(undefined);
        return node;
      } catch (err) {
        node?.wheel.close();
        valkey.destroy();
        if (writes !== valkey) writes.destroy();
        throw err;
      }
    });
  }

  /** Undefined if Valkey answers a PING (on the queue's config slot) within `ms`; else why not. */
  async ping(ms: number): Promise<string | undefined> {
    const late = () => new Error(`Valkey/Redis did not answer within ${ms} ms`);
    try {
      await withinMs(this.valkey.command(configKey(this.queue), ['PING']), ms, late);
      return undefined;
    } catch (err) {
      return err instanceof Error ? err.message : String(err);
    }
  }

  ownedPartitions(): number[] {
    return this.leases.owned();
  }

  /** This node's wheel: the near horizon of the partitions it owns. */
  wheelSnapshot(maxRows?: number): WheelSnapshot {
    return this.wheel.wheelSnapshot(maxRows);
  }

  wheelStats(): TimerWheelStats {
    return this.wheel.stats();
  }

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
    await this.valkey.close();
    if (this.writes !== this.valkey) await this.writes.close();
  }

  private async start(): Promise<void> {
    // Before this node takes anything: a paused topic stays paused on a node that joins.
    await this.topics.load();
    for (let p = 0; p < this.settings.partitions; p++) {
      this.unsubscribes.push(
        await this.valkey.subscribe(eventsChannel(this.queue, p), (message) =>
          this.onEvent(p, message),
        ),
      );
    }
    await this.leases.start();
  }

  private onEvent(partition: number, message: string): void {
    if (message.startsWith('r ')) this.consumer.onReady(partition, message.slice(2));
    else this.leases.onOwnerEvent(partition, message);
  }
}
