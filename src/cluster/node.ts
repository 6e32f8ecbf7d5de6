/**
 * A tickwheel cluster node: one process's share of a queue that lives in Valkey/Redis
 * (docs/cluster.md). It joins the member list, takes the partitions it wins by rendezvous
 * hashing through leases (Ownership, the pure state machine), runs a PartitionOwner for each
 * partition it owns, and serves the queue's API from any partition through the Producer and
 * the Consumer.
 *
 * One loop, every `tickMs`: heartbeat when due (the answer is the member list), then whatever the
 * state machine asks (acquire, renew, release, load, drop). The loop and the wheel are unref'd:
 * a node keeps its process alive only while a caller waits on it (a long receive), as the
 * embedded queue does.
 */

import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { TickwheelStateError, checkCallback, checkOption } from '../errors.js';
import { checkRequest, checkTopic, type ScheduleRequest } from '../queue/message.js';
import type { ConsumeOptions, MessageHandler } from '../queue/types.js';
import { TopicGate } from '../queue/topics.js';
import { Worker, checkConsumeOptions, type WorkerSource } from '../queue/worker.js';
import { SystemClock } from '../clock/index.js';
import { TimerWheel, type TimerWheelStats } from '../timer/index.js';
import type { WheelSnapshot } from '../wheel/index.js';
import { Valkey } from './connection.js';
import {
  Consumer,
  settledBy,
  type ClusterReceived,
  type NackOutcome,
  type Settled,
} from './consumer.js';
import { ClusterInspector } from './inspect.js';
import { checkQueueName, configKey, eventsChannel, metaKey, nodesKey } from './keys.js';
import { Ownership, type Effect } from './ownership.js';
import { PartitionOwner, type Due, type ExpiredDelivery } from './owner.js';
import {
  Producer,
  type CancelledMessage,
  type ClusterMessageInfo,
  type Durability,
} from './producer.js';
import { ClusterSchedules, ONCE_MARK_MS } from './schedules.js';
import { ClusterTopicStore } from './topic-store.js';
import { checkDurability, chooseDurability, type DurabilityOption } from './durability.js';
import { untilReachable } from './reach.js';

export interface ClusterNodeOptions {
  /** Valkey/Redis URL(s): one standalone primary, or any nodes of a Cluster. */
  redis: string | readonly string[];
  /** The queue's name; several queues can share one Valkey. Default 'default'. */
  queue?: string;
  /** Partitions of a new queue (an existing queue keeps its own). Default 64. */
  partitions?: number;
  /** Window of a new queue's far-future segments. Default 30,000 ms. */
  windowMs?: number;
  /** How far ahead owners keep messages in their wheel. Default 60,000 ms. */
  horizonMs?: number;
  /**
   * When a write is acknowledged (durability.ts). Default 'auto': 'replicated' where the
   * primaries have replicas, 'async' where none has, decided when the node opens.
   */
  durability?: DurabilityOption;
  /** Partition leases. Default 2,000 ms. */
  leaseMs?: number;
  visibilityMs?: number;
  maxPayloadBytes?: number;
  /** This node's id in the member list. Default: random. */
  nodeId?: string;
  maxClockSkewMs?: number;
  /**
   * How long open() keeps trying to reach Valkey/Redis (down, restarting, loading its data)
   * before ERR_TICKWHEEL_UNAVAILABLE. Default 10 s.
   */
  connectTimeoutMs?: number;
  /** Errors of background work; default: a process warning. */
  onError?: (err: unknown) => void;
}

const TICK_MS = 100;

/** Waits `ms`, or less if `signal` aborts (the gate's waits: paused, out of tokens). */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}
/**
 * An owner's safety net for lost notifications (a subscription being re-established): it
 * re-reads its near segments and looks for overdue deliveries this often. Notifications and
 * the visibility timer do the work; at 100 ms the poll alone was ~3,200 commands a second for
 * an idle node with 64 partitions.
 */
const OWNER_POLL_MS = 1_000;

/**
 * The default onError: a process warning, each distinct message at most once per `ms` (an
 * outage of Valkey fails every background call, ten times a second).
 */
function warnOncePer(ms: number): (err: unknown) => void {
  const last = new Map<string, number>();
  return (err) => {
    const text = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
    const now = Date.now();
    if (now - (last.get(text) ?? -Infinity) < ms) return;
    if (last.size > 100) last.clear();
    last.set(text, now);
    process.emitWarning(err instanceof Error ? err : new Error(text));
  };
}

export class ClusterNode {
  readonly nodeId: string;
  readonly queue: string;
  private readonly producer: Producer;
  private readonly consumer: Consumer;
  private readonly ownership: Ownership;
  private readonly owners = new Map<number, PartitionOwner>();
  private readonly wheel: TimerWheel<Due>;
  private readonly unsubscribes: Array<() => Promise<void>> = [];
  private readonly workers = new Set<Worker>();
  private loop: NodeJS.Timeout | undefined;
  private advancing: NodeJS.Timeout | undefined;
  private nextHeartbeat = 0;
  private heartbeating: Promise<void> | undefined;
  private closed = false;
  /** Read-only views of the whole queue (counts, dead letters, owners, ...). */
  readonly inspector: ClusterInspector;
  /**
   * Topics' settings (pause, rate limit), kept in Valkey for every node: a change made here
   * applies here at once, on other nodes at their next heartbeat (leaseMs / 4). Every receive
   * of this node goes through it; the token buckets are in Valkey (tw_tokens), one per topic.
   */
  readonly topics: TopicGate;
  private refreshingTopics: Promise<void> | undefined;
  /** Where the topics' settings are kept in Valkey/Redis. */
  private readonly topicStore: ClusterTopicStore;
  /** Changes of topics' settings made by this node (see refreshTopics). */
  private topicWrites = 0;
  /** Recurring schedules (schedules.ts): any node changes them, partition 0's owner runs them. */
  readonly schedules: ClusterSchedules;
  /** Told of each occurrence made ahead that a recurring schedule cancelled here (events). */
  onCancelled: ((message: CancelledMessage) => void) | undefined;
  /** Told of each occurrence of a recurring schedule this node made (the queue's events). */
  onScheduled: ((request: ScheduleRequest) => void) | undefined;
  /**
   * Told of each ack and nack consume() makes (the queue's events: ClusterQueue). `settled` is
   * undefined when the receipt named no delivery still out.
   */
  onSettled: ((receipt: string, settled: Settled | undefined, reason?: string) => void) | undefined;
  /** Told of each delivery this node failed as owner because its visibility ran out. */
  onExpired: ((message: ExpiredDelivery, settled: 'failed' | 'dead') => void) | undefined;
  members: string[] = [];
  leaseChanges = 0;
  /** Partitions loaded again because a failover lost writes their owner had seen. */
  reloads = 0;
  /** Partitions whose data this node saw vanish (their 'born' changed): see noteBorn(). */
  dataLosses = 0;
  /** Each partition's 'born' as its lease answers last gave it. */
  private readonly born = new Map<number, string>();

  private constructor(
    private readonly valkey: Valkey,
    /**
     * The producer's own connections, where its writes and their durability waits go. A WAIT
     * or WAITAOF holds its connection until replicas answer (a WAITAOF up to the next fsync, a
     * second with appendfsync everysec): on the connections that renew leases and fire
     * messages it would hold those up as long. The same as `valkey` with durability 'async'.
     */
    private readonly writes: Valkey,
    private readonly settings: Required<
      Omit<ClusterNodeOptions, 'redis' | 'onError' | 'connectTimeoutMs' | 'durability'>
    > & {
      onError: (err: unknown) => void;
      /** The durability kept, as chosen at open (durability.ts). */
      durability: Durability;
      durabilityOption: DurabilityOption;
      /** Why that one, in words for a log. */
      durabilityReason: string;
    },
  ) {
    this.nodeId = settings.nodeId;
    this.queue = settings.queue;
    const common = {
      queue: settings.queue,
      partitions: settings.partitions,
      windowMs: settings.windowMs,
    };
    this.producer = new Producer(writes, {
      ...common,
      durability: settings.durability,
      maxPayloadBytes: settings.maxPayloadBytes,
    });
    this.schedules = new ClusterSchedules(valkey, settings.queue, {
      node: settings.nodeId,
      onError: (err) => settings.onError(err),
      schedule: async (request) => {
        if (await this.producer.scheduleOnce(request, ONCE_MARK_MS)) this.onScheduled?.(request);
      },
      check: (request) => {
        checkRequest(request, Date.now(), settings.maxPayloadBytes, '', false);
      },
      cancel: async (id) => {
        const cancelled = await this.producer.cancelGiving(id);
        if (cancelled !== undefined) this.onCancelled?.(cancelled);
        return cancelled !== undefined;
      },
      sched: (args, what) =>
        this.producer.writeCall('tw_sched', metaKey(settings.queue, 0), args, what),
      leads: (epoch) =>
        this.owners.get(0)?.epoch === epoch && this.ownership.canFire(0, performance.now()),
      isLive: async (id) => {
        const status = (await this.producer.get(id))?.status;
        return status === 'scheduled' || status === 'ready' || status === 'inflight';
      },
    });
    this.consumer = new Consumer(valkey, {
      ...common,
      visibilityMs: settings.visibilityMs,
      maxPayloadBytes: settings.maxPayloadBytes,
    });
    this.inspector = new ClusterInspector(valkey, settings.queue, settings.partitions);
    const stored = (this.topicStore = new ClusterTopicStore(valkey, this.producer, settings.queue));
    this.topics = new TopicGate(
      {
        load: () => stored.read(),
        save: (topic, value, update) => {
          this.topicWrites++;
          return stored.write(topic, value, update);
        },
      },
      {
        take: (topic, limit, want) => stored.takeTokens(topic, limit, want),
        refund: async (topic, limit, count) => {
          await stored.takeTokens(topic, limit, -count);
        },
      },
      Date.now,
      sleep,
      (topic) => this.consumer.wakeTopic(topic),
    );
    this.consumer.generation = (topic) => this.topics.generation(topic);
    this.ownership = new Ownership({
      node: settings.nodeId,
      partitions: settings.partitions,
      leaseMs: settings.leaseMs,
    });
    this.wheel = new TimerWheel<Due>({
      clock: new SystemClock({ epoch: true }),
      unref: true,
      onExpire: (due) => due.owner.fire(due),
    });
  }

  /**
   * Opens a node. A server that is not there (down, restarting, loading, failing over) is
   * tried again and again (reach.ts) until `connectTimeoutMs`, then ERR_TICKWHEEL_UNAVAILABLE;
   * the durability is decided once reached (durability.ts).
   */
  static async open(options: ClusterNodeOptions): Promise<ClusterNode> {
    const queue = checkQueueName(options.queue ?? 'default');
    const asked = checkDurability(options.durability ?? 'auto');
    if (options.nodeId !== undefined) checkQueueName(options.nodeId, 'nodeId');
    const connectTimeoutMs = checkOption(
      options.connectTimeoutMs ?? 10_000,
      'connectTimeoutMs',
      1,
      600_000,
    );
    const settings = {
      queue,
      partitions: checkOption(options.partitions ?? 64, 'partitions', 1, 16_384, true),
      windowMs: checkOption(options.windowMs ?? 30_000, 'windowMs', 100, 86_400_000),
      horizonMs: checkOption(options.horizonMs ?? 60_000, 'horizonMs', 0, 86_400_000),
      leaseMs: checkOption(options.leaseMs ?? 2_000, 'leaseMs', 100, 60_000),
      visibilityMs: checkOption(options.visibilityMs ?? 30_000, 'visibilityMs', 1, 86_400_000),
      maxPayloadBytes: checkOption(options.maxPayloadBytes ?? 1 << 20, 'maxPayloadBytes', 1),
      nodeId: options.nodeId ?? `node-${randomBytes(6).toString('hex')}`,
      maxClockSkewMs: checkOption(options.maxClockSkewMs ?? 250, 'maxClockSkewMs', 0, 60_000),
      onError: options.onError ?? warnOncePer(10_000),
    };
    const urls = Array.isArray(options.redis) ? [...options.redis] : [String(options.redis)];
    return untilReachable(urls, connectTimeoutMs, async (leftMs) => {
      const valkey = await Valkey.connect(options.redis, leftMs);
      // Calls made while opening are bounded by the time left, so that the whole open is.
      valkey.limitCalls(leftMs);
      let writes = valkey;
      let node: ClusterNode | undefined;
      try {
        const { durability, reason } = chooseDurability(asked, await valkey.replicasPerPrimary());
        if (durability !== 'async') {
          writes = (await Valkey.connect(options.redis, leftMs)).pin();
        }
        await valkey.loadLibrary();
        const [partitions, windowMs] = (await valkey.fcall('tw_config', configKey(queue), [
          settings.partitions,
          settings.windowMs,
        ])) as string[];
        node = new ClusterNode(valkey, writes, {
          ...settings,
          partitions: Number(partitions),
          windowMs: Number(windowMs),
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

  schedule(request: ScheduleRequest): Promise<{ id: string; deliverAt: number }> {
    this.checkOpen();
    return this.producer.schedule(request);
  }

  scheduleMany(
    requests: readonly ScheduleRequest[],
  ): Promise<Array<{ id: string; deliverAt: number }>> {
    this.checkOpen();
    return this.producer.scheduleMany(requests);
  }

  rescheduleTo(
    id: string,
    when: { delayMs?: number; deliverAt?: number },
  ): Promise<number | undefined> {
    this.checkOpen();
    return this.producer.rescheduleTo(id, when);
  }

  cancel(id: string): Promise<boolean> {
    this.checkOpen();
    return this.producer.cancel(id);
  }

  /** cancel(), resolving with what was cancelled (undefined: nothing was). */
  cancelGiving(id: string): Promise<CancelledMessage | undefined> {
    this.checkOpen();
    return this.producer.cancelGiving(id);
  }

  /** A message made at most once while its mark lives (Producer.scheduleOnce). */
  scheduleOnce(request: ScheduleRequest, markMs: number): Promise<boolean> {
    this.checkOpen();
    return this.producer.scheduleOnce(request, markMs);
  }

  reschedule(id: string, when: { delayMs?: number; deliverAt?: number }): Promise<boolean> {
    this.checkOpen();
    return this.producer.reschedule(id, when);
  }

  get(id: string): Promise<ClusterMessageInfo | undefined> {
    this.checkOpen();
    return this.producer.get(id);
  }

  requeue(id: string, options?: { delayMs?: number }): Promise<boolean> {
    this.checkOpen();
    return this.producer.requeue(id, options);
  }

  receive(
    topic: string,
    options?: { max?: number; waitMs?: number; visibilityMs?: number; maxBytes?: number },
  ): Promise<ClusterReceived[]> {
    this.checkOpen();
    const { max = 1, waitMs = 0 } = options ?? {};
    return this.topics.receive(topic, max, waitMs, undefined, {
      receive: (granted, left) =>
        this.consumer.receive(topic, { ...options, max: granted, waitMs: left }),
      waitReady: (ms, aborts) => this.consumer.waitReady(topic, ms, aborts),
    });
  }

  ack(receipt: string): Promise<boolean> {
    this.checkOpen();
    return this.consumer.ack(receipt);
  }

  async nack(receipt: string, options?: { delayMs?: number; reason?: string }): Promise<boolean> {
    return (await this.nackOutcome(receipt, options)) !== undefined;
  }

  /** nack() saying what became of the delivery: 'retry', 'dead', or undefined (none out). */
  nackOutcome(
    receipt: string,
    options?: { delayMs?: number; reason?: string },
  ): Promise<NackOutcome | undefined> {
    this.checkOpen();
    return this.consumer.nack(receipt, options);
  }

  /**
   * Runs `handler` for each message of `topic`, from every partition, with the same Worker
   * (and so the same rules: concurrency, onError, back-off after failed receives) as the
   * embedded queue's and the client's consume(). Each receive long-polls up to `waitMs`
   * (default 1 s). Ends with close() of the consumer or of the node.
   */
  consume(
    topic: string,
    handler: MessageHandler,
    options: ConsumeOptions & { waitMs?: number } = {},
  ): { close(): Promise<void> } {
    this.checkOpen();
    checkTopic(topic);
    checkCallback(handler, 'handler');
    const settings = checkConsumeOptions({ waitMs: 1_000, ...options });
    const source: WorkerSource = {
      receive: (t, { max, waitMs, visibilityMs }, signal) =>
        this.topics.receive(t, max, waitMs, signal, {
          receive: (granted, left) =>
            this.consumer.receive(
              t,
              visibilityMs === undefined
                ? { max: granted, waitMs: left }
                : { max: granted, waitMs: left, visibilityMs },
            ),
          waitReady: (ms, aborts) => this.consumer.waitReady(t, ms, aborts),
        }),
      ack: async (receipt) => {
        const done = await this.consumer.ack(receipt);
        this.onSettled?.(receipt, done ? 'acked' : undefined);
        return done;
      },
      nack: async (receipt, reason) => {
        const outcome = await this.consumer.nack(receipt, { reason });
        this.onSettled?.(receipt, settledBy(outcome), reason);
        return outcome !== undefined;
      },
    };
    const worker = new Worker(source, topic, handler as MessageHandler, settings);
    this.workers.add(worker);
    return {
      close: () => {
        this.workers.delete(worker);
        return worker.close();
      },
    };
  }

  /** Undefined if Valkey answers a PING (on the queue's config slot) within `ms`; else why not. */
  async ping(ms: number): Promise<string | undefined> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<string>((resolve) => {
      timer = setTimeout(() => resolve(`Valkey/Redis did not answer within ${ms} ms`), ms);
    });
    try {
      return await Promise.race([
        this.valkey.command(configKey(this.queue), ['PING']).then(() => undefined),
        late,
      ]);
    } catch (err) {
      return err instanceof Error ? err.message : String(err);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Partitions this node owns now. */
  ownedPartitions(): number[] {
    return this.ownership.owned();
  }

  /** Counts of the whole queue, summed over its partitions, and this node's view of the cluster. */
  async stats(): Promise<Record<string, unknown>> {
    this.checkOpen();
    const { totals, topics } = await this.inspector.counts();
    return {
      ...totals,
      topics,
      cluster: {
        node: this.nodeId,
        queue: this.queue,
        partitions: this.settings.partitions,
        durability: this.settings.durability,
        durabilityOption: this.settings.durabilityOption,
        members: [...this.members],
        owned: this.ownership.owned(),
        leaseChanges: this.leaseChanges,
      },
    };
  }

  /** This node's timer wheel (the near horizon of the partitions it owns), level by level. */
  wheelSnapshot(maxRows?: number): WheelSnapshot {
    return this.wheel.wheelSnapshot(maxRows);
  }

  /** Timers in this node's wheel. */
  wheelStats(): TimerWheelStats {
    return this.wheel.stats();
  }

  get windowMs(): number {
    return this.settings.windowMs;
  }

  get partitions(): number {
    return this.settings.partitions;
  }

  /** The durability this node keeps: its option, or what 'auto' chose at open. */
  get durability(): Durability {
    return this.settings.durability;
  }

  /** The durability option it was opened with ('auto' unless one was given). */
  get durabilityOption(): DurabilityOption {
    return this.settings.durabilityOption;
  }

  /** Why it keeps that durability: 'as set', or what 'auto' found. */
  get durabilityReason(): string {
    return this.settings.durabilityReason;
  }

  /** Gives its partitions up (so others take them at once), leaves, and disconnects. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // Receives waiting in the gate (paused, out of tokens) end empty now.
    this.topics.close();
    await this.schedules.close();
    this.consumer.close();
    await Promise.all([...this.workers].map((worker) => worker.close()));
    this.workers.clear();
    this.ownership.close();
    const until = performance.now() + this.settings.leaseMs;
    while (!this.ownership.closed && performance.now() < until) {
      await this.tick();
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    if (this.loop !== undefined) clearInterval(this.loop);
    if (this.advancing !== undefined) clearInterval(this.advancing);
    for (const owner of this.owners.values()) owner.stop();
    this.owners.clear();
    this.consumer.wakeAll();
    await this.valkey.fcall('tw_heartbeat', nodesKey(this.queue), [this.nodeId, 0]).catch(() => {});
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
    await this.tick();
    this.loop = setInterval(() => void this.tick(), TICK_MS);
    this.loop.unref();
    this.advancing = setInterval(
      () => {
        for (const owner of this.owners.values()) {
          owner.advance().catch((err) => this.settings.onError(err));
        }
      },
      Math.max(100, this.settings.windowMs / 4),
    );
    this.advancing.unref();
  }

  /** Reads the settings again (another node may have changed them), one read at a time. */
  private refreshTopics(): void {
    if (this.refreshingTopics !== undefined || this.closed) return;
    // A read that a change made here overtook would undo it until the next one: dropped.
    const writes = this.topicWrites;
    this.refreshingTopics = this.topicStore
      .read()
      .then((settings) => {
        if (this.topicWrites === writes) this.topics.replace(settings);
      })
      .catch((err) => this.settings.onError(err))
      .finally(() => (this.refreshingTopics = undefined));
  }

  private onEvent(partition: number, message: string): void {
    if (message.startsWith('r ')) this.consumer.onReady(partition, message.slice(2));
    else this.owners.get(partition)?.onEvent(message);
  }

  /**
   * One round of the lease machine. Requests go out without waiting for earlier ones: at most
   * one per partition is in flight, and an answer that comes after its timeout is ignored
   * (ownership.ts), so a partition whose primary is failing over, or a heartbeat stuck there,
   * holds up no other partition's renewals. Resolves once this round's requests are answered.
   */
  private async tick(): Promise<void> {
    try {
      const beat = this.heartbeat(performance.now());
      // The first round needs the members: the assignment is computed from them.
      if (this.members.length === 0) await beat;
      await this.run(this.ownership.tick(performance.now()));
    } catch (err) {
      this.settings.onError(err);
    }
  }

  /** Heartbeats every leaseMs / 4, one at a time; the answer is the live members. */
  private heartbeat(now: number): Promise<void> {
    if (this.heartbeating !== undefined) return this.heartbeating;
    if (now < this.nextHeartbeat || this.closed) return Promise.resolve();
    this.nextHeartbeat = now + this.settings.leaseMs / 4;
    this.heartbeating = (async () => {
      try {
        this.members = (
          (await this.valkey.fcall('tw_heartbeat', nodesKey(this.queue), [
            this.nodeId,
            this.settings.leaseMs,
          ])) as string[]
        ).sort();
        this.ownership.setMembers(this.members);
        this.refreshTopics();
      } catch (err) {
        this.settings.onError(err);
      } finally {
        this.heartbeating = undefined;
      }
    })();
    return this.heartbeating;
  }

  /**
   * Whether a lease grant just written on `meta`'s primary will outlive a failure of it: it
   * reached a replica (WAIT), the copy a failover promotes. A primary with no replica at all
   * (its replica was promoted and no new one has joined yet) has no failover to fear: the grant
   * stands at once. (Only a crash and restart of that primary within its fsync interval could
   * lose it; the lease it names has then run out by the time the primary answers again unless
   * the restart is quicker than the lease.) Without this, a shard that lost its replica would
   * leave its partitions unowned, and their messages undelivered, until one came back.
   */
  private async grantKept(meta: string, timeoutMs: number): Promise<boolean> {
    if ((await this.valkey.replicasOf(meta)) === 0) return true;
    return Number(await this.valkey.command(meta, ['WAIT', '1', String(timeoutMs)])) >= 1;
  }

  /** Carries out what the state machine asks; answers feed back into it. */
  private async run(effects: Effect[]): Promise<void> {
    await Promise.all(effects.map((effect) => this.carryOut(effect)));
  }

  /**
   * A lease answer's 'born' for `partition` (the server time its data was first made; '' before
   * any grant). It never changes while the data lives: a change means the partition's keys
   * were lost, as when a Valkey/Redis without persistence restarts (or a failover goes to a
   * replica that had nothing), and every message scheduled there went with them. That cannot
   * be undone here; it is reported (onError, ERR_TICKWHEEL_DATA_LOST, and the dataLosses count
   * in stats() and /metrics) rather than carried on from silently.
   */
  private noteBorn(partition: number, born: unknown): void {
    if (typeof born !== 'string' || born === '') return;
    const before = this.born.get(partition);
    this.born.set(partition, born);
    if (before === undefined || before === born) return;
    this.dataLosses++;
    this.settings.onError(
      new TickwheelStateError(
        'ERR_TICKWHEEL_DATA_LOST',
        `partition ${partition} of queue ${this.queue} was made anew on the server (its data ` +
          `dates from ${new Date(Number(born)).toISOString()}, not ` +
          `${new Date(Number(before)).toISOString()}): its messages were lost, as when a ` +
          'Valkey/Redis without persistence restarts. Enable AOF, and replicas',
      ),
    );
  }

  private async carryOut(effect: Effect): Promise<void> {
    const { partition } = effect;
    const meta = metaKey(this.queue, partition);
    const { leaseMs } = this.settings;
    switch (effect.kind) {
      case 'acquire': {
        let epoch: number | undefined;
        try {
          const reply = (await this.valkey.fcall('tw_lease', meta, [
            'acquire',
            this.nodeId,
            0,
            leaseMs,
          ])) as Array<number | string>;
          this.noteBorn(partition, Number(reply[0]) === 1 ? reply[2] : reply[4]);
          if (Number(reply[0]) === 1) {
            // A grant lost in a failover could be handed out twice: act only once replicated.
            if (this.settings.durability !== 'async') {
              epoch = (await this.grantKept(meta, leaseMs / 4)) ? Number(reply[1]) : undefined;
            } else {
              epoch = Number(reply[1]);
            }
          }
        } catch (err) {
          this.settings.onError(err);
        }
        if (epoch !== undefined) this.leaseChanges++;
        await this.run(
          this.ownership.acquired(partition, effect.request, epoch, performance.now()),
        );
        return;
      }
      case 'renew': {
        let ok = false;
        try {
          const reply = (await this.valkey.fcall('tw_lease', meta, [
            'renew',
            this.nodeId,
            effect.epoch,
            leaseMs,
          ])) as Array<number | string>;
          this.noteBorn(partition, reply[2]);
          ok = Number(reply[0]) === 1;
        } catch (err) {
          this.settings.onError(err);
        }
        await this.run(this.ownership.renewed(partition, effect.request, ok, performance.now()));
        return;
      }
      case 'release':
        try {
          const reply = (await this.valkey.fcall('tw_lease', meta, [
            'release',
            this.nodeId,
            effect.epoch,
          ])) as Array<number | string>;
          this.noteBorn(partition, reply[2]);
        } catch (err) {
          this.settings.onError(err);
        }
        this.ownership.released(partition, effect.request);
        return;
      case 'load': {
        const owner = new PartitionOwner(this.valkey, {
          queue: this.queue,
          partition,
          partitions: this.settings.partitions,
          node: this.nodeId,
          epoch: effect.epoch,
          windowMs: this.settings.windowMs,
          horizonMs: this.settings.horizonMs,
          maxClockSkewMs: this.settings.maxClockSkewMs,
          pollMs: OWNER_POLL_MS,
          wheel: this.wheel,
          onFenced: (o) => void this.run(this.ownership.fenced(o.partition, o.epoch)),
          // Writes it saw were lost in a failover: the same lease, a fresh load.
          onStale: (o) => {
            if (this.owners.get(o.partition) !== o || this.closed) return;
            this.reloads++;
            void this.carryOut({ kind: 'load', partition: o.partition, epoch: o.epoch });
          },
          onError: this.settings.onError,
          onExpired: (message, settled) => this.onExpired?.(message, settled),
        });
        this.owners.get(partition)?.stop();
        this.owners.set(partition, owner);
        try {
          await owner.start();
          if (owner.active) {
            this.ownership.loaded(partition, effect.epoch);
            // Partition 0's owner leads the recurring schedules (schedules.ts).
            if (partition === 0) this.schedules.lead(effect.epoch);
          }
        } catch (err) {
          this.settings.onError(err);
          owner.stop();
          await this.run(this.ownership.fenced(partition, effect.epoch));
        }
        return;
      }
      case 'drop': {
        const owner = this.owners.get(partition);
        if (owner !== undefined && owner.epoch === effect.epoch) {
          owner.stop();
          this.owners.delete(partition);
          this.leaseChanges++;
          if (partition === 0) this.schedules.unlead();
        }
        return;
      }
    }
  }

  private checkOpen(): void {
    if (this.closed) {
      throw new TickwheelStateError('ERR_TICKWHEEL_CLOSED', 'this cluster node is closed');
    }
  }
}
