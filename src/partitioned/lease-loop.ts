/**
 * A node's share of the partitions: keeps the node in the member list, takes the partitions it
 * wins through leases (Ownership, the pure state machine), and runs a PartitionOwner for each.
 * One unref'd loop every TICK_MS: a heartbeat when due, then what the state machine asks.
 */

import { performance } from 'node:perf_hooks';
import { TickwheelUnavailableError } from '../errors.js';
import type { EventSource } from '../queue/events.js';
import type { TimerWheel } from '../timer/index.js';
import type { PartitionDriver } from './driver.js';
import type { NodeSettings } from './node-options.js';
import { Ownership, type DropReason, type Effect } from './ownership.js';
import { NodeFires } from './node-fires.js';
import { PartitionOwner, type Due } from './owner.js';
import type { PartitionSchedules } from './schedules.js';

const TICK_MS = 100;

/** An owner's safety net for lost notifications (at 100 ms, ~3,200 commands/s for an idle node). */
const OWNER_POLL_MS = 1_000;

export interface LeaseLoopHooks {
  /** Whether the node is closing: no heartbeat starts, no partition is loaded again. */
  isClosed(): boolean;
  /** After each heartbeat that answered (another node may have changed topics' settings). */
  onMembers(): void;
  /** Partition 0's owner leads the recurring schedules. */
  schedules: Pick<PartitionSchedules, 'lead' | 'unlead'>;
  onExpired(message: EventSource, settled: 'failed' | 'dead'): void;
  onFired(count: number): void;
  /** A partition this node owned is no longer its own, not by its choice. */
  onLeaseLost(partition: number, reason: Exclude<DropReason, 'released'>): void;
}

export class LeaseLoop {
  private readonly ownership: Ownership;
  private readonly owners = new Map<number, PartitionOwner>();
  private loop: NodeJS.Timeout | undefined;
  private advancing: NodeJS.Timeout | undefined;
  private advancingAll = false;
  private nextHeartbeat = 0;
  private heartbeating: Promise<void> | undefined;
  members: string[] = [];
  leaseChanges = 0;
  /** Partitions whose data this node saw vanish (noteBorn). */
  dataLosses = 0;
  /** Each partition's 'born' as its lease answers last gave it. */
  private readonly born = new Map<number, string>();
  /** Every partition's fires in one call, where the store can take them so. */
  private readonly fires: NodeFires | undefined;

  constructor(
    private readonly driver: PartitionDriver,
    private readonly settings: NodeSettings,
    private readonly wheel: TimerWheel<Due>,
    private readonly hooks: LeaseLoopHooks,
  ) {
    const fireMany = driver.fireMany?.bind(driver);
    if (fireMany !== undefined) this.fires = new NodeFires(fireMany, settings);
    this.ownership = new Ownership({
      node: settings.nodeId,
      partitions: settings.partitions,
      leaseMs: settings.leaseMs,
    });
  }

  /** Runs a first round (which waits for the members), then one every TICK_MS. */
  async start(): Promise<void> {
    await this.tick();
    this.loop = setInterval(() => void this.tick(), TICK_MS);
    this.loop.unref();
    this.advancing = setInterval(
      () => void this.advanceAll(),
      Math.max(100, this.settings.windowMs / 4),
    );
    this.advancing.unref();
  }

  /**
   * Each owner's horizon moved up in turn, not all at once: a node's loads together would hold
   * every pooled connection (PostgreSQL), and its fires, takes and acks would wait behind them.
   * A pass still under way when the next is due lets that one go.
   */
  private async advanceAll(): Promise<void> {
    if (this.advancingAll) return;
    this.advancingAll = true;
    try {
      for (const owner of [...this.owners.values()]) {
        await owner.advance().catch((err) => this.settings.onError(err));
      }
    } finally {
      this.advancingAll = false;
    }
  }

  /** Gives the partitions up (so others take them at once) within a lease time, then stops. */
  async release(): Promise<void> {
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
  }

  /** Leaves the member list (a heartbeat with ttl 0); on failure, the entry lapses by itself. */
  async leave(): Promise<void> {
    await this.driver.heartbeat(this.settings.nodeId, 0).catch(() => {});
  }

  owned(): number[] {
    return this.ownership.owned();
  }

  /** Whether this node owns partition 0 under `epoch` and may act on it now. */
  leads(epoch: number): boolean {
    return this.owners.get(0)?.epoch === epoch && this.ownership.canFire(0, performance.now());
  }

  onOwnerEvent(partition: number, message: string): void {
    this.owners.get(partition)?.onEvent(message);
  }

  /**
   * One round of the lease machine. Requests go out without waiting for earlier ones (at most
   * one per partition is in flight, a late answer is ignored), so a partition whose primary is
   * failing over holds up no other's renewals. Resolves once this round's are answered.
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
    if (now < this.nextHeartbeat || this.hooks.isClosed()) return Promise.resolve();
    this.nextHeartbeat = now + this.settings.leaseMs / 4;
    this.heartbeating = (async () => {
      try {
        const { nodeId, leaseMs } = this.settings;
        this.members = await this.driver.heartbeat(nodeId, leaseMs);
        this.ownership.setMembers(this.members);
        this.hooks.onMembers();
      } catch (err) {
        this.settings.onError(err);
      } finally {
        this.heartbeating = undefined;
      }
    })();
    return this.heartbeating;
  }

  /** Whether a lease grant just made on `partition` will outlive a failover of the store. */
  private async grantKept(partition: number): Promise<boolean> {
    try {
      return await this.driver.grantKept(partition, this.settings.leaseMs / 4);
    } catch (err) {
      this.settings.onError(err);
      return false;
    }
  }

  /** A lease call on `partition` for this node, its 'born' noted; undefined when it failed. */
  private async lease(partition: number, op: 'acquire' | 'renew' | 'release', epoch: number) {
    const { nodeId: node, leaseMs } = this.settings;
    try {
      const answer = await this.driver.lease(partition, op, { node, epoch }, leaseMs);
      this.noteBorn(partition, answer.born);
      return answer;
    } catch (err) {
      this.settings.onError(err);
      return undefined;
    }
  }

  private async run(effects: Effect[]): Promise<void> {
    const renewals = effects.filter((effect) => effect.kind === 'renew');
    if (renewals.length < 2 || this.driver.renewMany === undefined) {
      await Promise.all(effects.map((effect) => this.carryOut(effect)));
      return;
    }
    await Promise.all([
      this.renewMany(renewals),
      ...effects.filter((effect) => effect.kind !== 'renew').map((e) => this.carryOut(e)),
    ]);
  }

  /** Renewals due in one round, in one call to the store. */
  private async renewMany(renewals: Array<Extract<Effect, { kind: 'renew' }>>): Promise<void> {
    const { nodeId, leaseMs } = this.settings;
    // A failed call renews none, and refuses none: each lease is asked again while it holds.
    let renewed: Set<number> | undefined;
    try {
      renewed = new Set(await this.driver.renewMany!(nodeId, renewals, leaseMs));
    } catch (err) {
      this.settings.onError(err);
    }
    const now = performance.now();
    await this.run(
      renewals.flatMap((r) =>
        this.ownership.renewed(r.partition, r.request, renewed?.has(r.partition), now),
      ),
    );
  }

  /**
   * A lease answer's 'born' (the store's time the partition's data was made; '' before any
   * grant). A change means its messages were lost (a store without persistence restarted).
   */
  private noteBorn(partition: number, born: string): void {
    if (born === '') return;
    const before = this.born.get(partition);
    this.born.set(partition, born);
    if (before === undefined || before === born) return;
    this.dataLosses++;
    this.settings.onError(
      new TickwheelUnavailableError(
        'ERR_TICKWHEEL_DATA_LOST',
        `partition ${partition} of queue ${this.settings.queue} was made anew on the server ` +
          `(its data dates from ${new Date(Number(born)).toISOString()}, not ` +
          `${new Date(Number(before)).toISOString()}): its messages were lost, as when a store ` +
          'without persistence restarts (on Valkey/Redis: enable AOF, and replicas) or a ' +
          "database fails over to a standby that was behind (on PostgreSQL: use synchronous_commit 'remote_apply')",
      ),
    );
  }

  private async carryOut(effect: Effect): Promise<void> {
    const { partition } = effect;
    switch (effect.kind) {
      case 'acquire': {
        const answer = await this.lease(partition, 'acquire', 0);
        // A grant lost in a failover could be handed out twice: act only once replicated.
        const epoch =
          answer?.granted && (await this.grantKept(partition)) ? answer.epoch : undefined;
        if (epoch !== undefined) this.leaseChanges++;
        await this.run(
          this.ownership.acquired(partition, effect.request, epoch, performance.now()),
        );
        return;
      }
      case 'renew': {
        // undefined when the call failed: asked again while the lease holds.
        const ok = (await this.lease(partition, 'renew', effect.epoch))?.granted;
        await this.run(this.ownership.renewed(partition, effect.request, ok, performance.now()));
        return;
      }
      case 'release':
        await this.lease(partition, 'release', effect.epoch);
        this.ownership.released(partition, effect.request);
        return;
      case 'load': {
        const owner = new PartitionOwner(this.driver, {
          ...this.settings,
          partition,
          node: this.settings.nodeId,
          epoch: effect.epoch,
          pollMs: this.driver.ownerPollMs ?? OWNER_POLL_MS,
          wheel: this.wheel,
          onFenced: (o) => void this.run(this.ownership.fenced(o.partition, o.epoch)),
          // Writes it saw were lost in a failover: said, then the same lease, a fresh load.
          onStale: (o) => {
            if (this.owners.get(o.partition) !== o || this.hooks.isClosed()) return;
            this.dataLosses++;
            this.settings.onError(
              new TickwheelUnavailableError(
                'ERR_TICKWHEEL_DATA_LOST',
                `partition ${o.partition} of queue ${this.settings.queue}: its owner-write count ` +
                  'went back, so writes this node saw were lost (a failover to a replica that ' +
                  'was behind); the partition is loaded again from what the store has',
              ),
            );
            void this.carryOut({ kind: 'load', partition: o.partition, epoch: o.epoch });
          },
          onExpired: (message, settled) => this.hooks.onExpired(message, settled),
          onFired: (count) => this.hooks.onFired(count),
          fires: this.fires,
        });
        this.owners.get(partition)?.stop();
        this.owners.set(partition, owner);
        try {
          await owner.start();
          if (owner.active) {
            this.ownership.loaded(partition, effect.epoch);
            if (partition === 0) this.hooks.schedules.lead(effect.epoch);
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
          if (partition === 0) this.hooks.schedules.unlead();
          if (effect.reason !== 'released') this.hooks.onLeaseLost(partition, effect.reason);
        }
        return;
      }
    }
  }
}
