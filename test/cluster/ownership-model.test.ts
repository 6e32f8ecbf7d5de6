/**
 * The partition state machine (src/partitioned/ownership.ts) against a model of Valkey's lease
 * table, in simulated time: several nodes, random network delays and losses, crashes, restarts,
 * long pauses (a GC, a stopped container) and late membership news.
 *
 * Checked at every step:
 *   - no two nodes ever hold a partition at the same instant (hold: may load or fire);
 *   - Valkey accepts an owner-only call only from the current epoch, within its lease.
 * Checked after the storm, once the network heals and nothing fails for a while:
 *   - every partition is owned by the node that wins it among the live nodes, and by no other,
 *     and Valkey's lease table says the same.
 */

import { describe, expect, it } from 'vitest';
import { Ownership, type Effect } from '../../src/partitioned/ownership.js';
import { ownerOf } from '../../src/partitioned/rendezvous.js';
import { seededRandom as random } from '../support/random.mjs';

const PARTITIONS = 12;
const LEASE_MS = 2_000;

interface Lease {
  epoch: number;
  owner: string | undefined;
  expiresAt: number;
}

/** Valkey's side: the lease of each partition, by Valkey's clock (the simulation's time). */
class LeaseTable {
  readonly leases: Lease[] = Array.from({ length: PARTITIONS }, () => ({
    epoch: 0,
    owner: undefined,
    expiresAt: 0,
  }));
  accepted = 0;
  refused = 0;

  acquire(node: string, p: number, at: number): number | undefined {
    const lease = this.leases[p];
    if (lease.owner !== undefined && lease.expiresAt > at) return undefined;
    lease.epoch++;
    lease.owner = node;
    lease.expiresAt = at + LEASE_MS;
    return lease.epoch;
  }

  renew(node: string, p: number, epoch: number, at: number): boolean {
    const lease = this.leases[p];
    if (lease.owner !== node || lease.epoch !== epoch || lease.expiresAt <= at) return false;
    lease.expiresAt = at + LEASE_MS;
    return true;
  }

  release(node: string, p: number, epoch: number): void {
    const lease = this.leases[p];
    if (lease.owner === node && lease.epoch === epoch) lease.expiresAt = 0;
  }

  /** An owner-only call (tw_fire, tw_load, tw_expire): the fencing check. */
  fenced(node: string, p: number, epoch: number, at: number): boolean {
    const lease = this.leases[p];
    const ok = lease.owner === node && lease.epoch === epoch && lease.expiresAt > at;
    if (ok) this.accepted++;
    else this.refused++;
    return !ok;
  }
}

interface SimNode {
  id: string;
  own: Ownership;
  alive: boolean;
  pausedUntil: number;
  membersVersion: number;
}

type Message =
  | { to: 'valkey'; node: string; effect: Effect; epoch?: number; fire?: boolean }
  | { to: 'node'; node: string; call: (node: SimNode, now: number) => void }
  | { to: 'sim'; call: () => void };

interface Scheduled {
  at: number;
  seq: number;
  message: Message;
}

class Simulation {
  readonly next: () => number;
  readonly valkey = new LeaseTable();
  readonly nodes = new Map<string, SimNode>();
  private queue: Scheduled[] = [];
  private seq = 0;
  now = 0;
  /** Chance that a message is lost, each way. */
  loss = 0.03;
  maxDelay = 400;
  faults = true;
  private members: string[] = [];
  private membersVersion = 0;
  private restarts = 0;
  /** Bumped by heal(): membership changes planned before it are void. */
  private era = 0;
  overlaps = 0;
  drops = 0;

  constructor(seed: number) {
    this.next = random(seed);
  }

  private send(message: Message, at = this.now + this.delay()): void {
    if (this.faults && this.next() < this.loss) return;
    this.queue.push({ at, seq: this.seq++, message });
  }

  /** Mostly short; with faults on, one message in 20 is held up for up to 1.5 leases. */
  private delay(): number {
    if (this.faults && this.next() < 0.05) return Math.floor(this.next() * 1.5 * LEASE_MS);
    return Math.floor(this.next() * this.maxDelay);
  }

  addNode(): void {
    const id = `n${this.restarts++}`;
    this.nodes.set(id, {
      id,
      own: new Ownership({ node: id, partitions: PARTITIONS, leaseMs: LEASE_MS }),
      alive: true,
      pausedUntil: 0,
      membersVersion: 0,
    });
    this.setMembers([...this.members, id]);
  }

  /** Runs `call` at `at`, unless heal() came first. */
  private later(at: number, call: () => void): void {
    const era = this.era;
    this.queue.push({
      at,
      seq: this.seq++,
      message: { to: 'sim', call: () => era === this.era && call() },
    });
  }

  crash(id: string): void {
    (this.nodes.get(id) as SimNode).alive = false;
    // Its heartbeat entry expires a little later.
    this.later(this.now + 1_000, () => this.setMembers(this.members.filter((m) => m !== id)));
  }

  /** The node stops for `ms`: its heartbeat lapses too, and it rejoins when it runs again. */
  pause(id: string, ms: number): void {
    const node = this.nodes.get(id) as SimNode;
    node.pausedUntil = this.now + ms;
    if (ms <= 1_000) return;
    this.later(this.now + 1_000, () => this.setMembers(this.members.filter((m) => m !== id)));
    this.later(node.pausedUntil, () => {
      if (node.alive && !this.members.includes(id)) this.setMembers([...this.members, id]);
    });
  }

  /** The node closes: it gives its partitions up and leaves the member list. */
  leave(id: string): void {
    (this.nodes.get(id) as SimNode).own.close();
    this.setMembers(this.members.filter((m) => m !== id));
  }

  /** Tells every live node the new member list, each after its own delay (never lost). */
  private setMembers(members: string[]): void {
    const version = ++this.membersVersion;
    this.members = members;
    const list = [...members];
    for (const node of this.nodes.values()) {
      this.queue.push({
        at: this.now + this.delay(),
        seq: this.seq++,
        message: {
          to: 'node',
          node: node.id,
          call: (n) => {
            if (version <= n.membersVersion) return;
            n.membersVersion = version;
            n.own.setMembers(list);
          },
        },
      });
    }
  }

  liveMembers(): string[] {
    return this.members.filter((m) => this.nodes.get(m)?.alive === true);
  }

  step(maxStep: number): void {
    this.now += 1 + Math.floor(this.next() * maxStep);
    this.queue.sort((a, b) => a.at - b.at || a.seq - b.seq);
    while (this.queue.length > 0 && this.queue[0].at <= this.now) {
      const { at, message } = this.queue.shift() as Scheduled;
      if (message.to === 'valkey') this.atValkey(message, at);
      else if (message.to === 'sim') message.call();
      else {
        const node = this.nodes.get(message.node);
        if (node === undefined || !node.alive) continue;
        if (node.pausedUntil > at) {
          this.queue.push({ at: node.pausedUntil, seq: this.seq++, message });
          continue;
        }
        message.call(node, at);
      }
    }
    for (const node of this.nodes.values()) {
      if (!node.alive || node.pausedUntil > this.now) continue;
      this.run(node, node.own.tick(this.now));
      // After a tick, a node is in a holding phase only while its lease is valid by its clock:
      // an expired lease was dropped (and the drop effect cleared its timers).
      for (let p = 0; p < PARTITIONS; p++) {
        const phase = node.own.phaseOf(p);
        if ((phase === 'loading' || phase === 'owned') && !node.own.holds(p, this.now)) {
          throw new Error(`at ${this.now} ${node.id} is ${phase} for ${p} past its lease`);
        }
      }
      // Owners fire now and then; a paused or dead node cannot.
      for (const p of node.own.owned()) {
        if (node.own.canFire(p, this.now) && this.next() < 0.3) {
          const epoch = node.own.epochOf(p);
          this.send({
            to: 'valkey',
            node: node.id,
            fire: true,
            epoch,
            effect: { kind: 'load', partition: p, epoch },
          });
        }
      }
    }
    if (this.faults) this.maybeFault();
    this.checkExclusive();
  }

  private run(node: SimNode, effects: Effect[]): void {
    for (const effect of effects) {
      if (effect.kind === 'drop') this.drops++;
      else if (effect.kind === 'load') {
        // Loading takes a while, then the node may fire: an owner-only call, so fenced.
        const { partition, epoch } = effect;
        this.send({ to: 'valkey', node: node.id, effect, epoch, fire: true });
        this.queue.push({
          at: this.now + Math.floor(this.next() * 300),
          seq: this.seq++,
          message: { to: 'node', node: node.id, call: (n) => n.own.loaded(partition, epoch) },
        });
      } else this.send({ to: 'valkey', node: node.id, effect });
    }
  }

  private atValkey(message: Message & { to: 'valkey' }, at: number): void {
    const { node: id, effect } = message;
    const reply = (call: (n: SimNode, now: number) => void) =>
      this.send({ to: 'node', node: id, call }, at + this.delay());
    const p = effect.partition;
    if (message.fire === true) {
      const epoch = message.epoch as number;
      if (this.valkey.fenced(id, p, epoch, at)) {
        reply((n) => this.run(n, n.own.fenced(p, epoch)));
      }
      return;
    }
    switch (effect.kind) {
      case 'acquire': {
        const epoch = this.valkey.acquire(id, p, at);
        reply((n, now) => this.run(n, n.own.acquired(p, effect.request, epoch, now)));
        break;
      }
      case 'renew': {
        const renewed = this.valkey.renew(id, p, effect.epoch, at);
        // With faults, one answer in 20 is a failure: the renewal may or may not have happened.
        const ok = this.faults && this.next() < 0.05 ? undefined : renewed;
        reply((n, now) => this.run(n, n.own.renewed(p, effect.request, ok, now)));
        break;
      }
      case 'release':
        this.valkey.release(id, p, effect.epoch);
        reply((n) => n.own.released(p, effect.request));
        break;
      default:
        break;
    }
  }

  private maybeFault(): void {
    const roll = this.next();
    const alive = [...this.nodes.values()].filter((n) => n.alive);
    if (roll < 0.004 && alive.length > 1) {
      this.crash(alive[Math.floor(this.next() * alive.length)].id);
    } else if (roll < 0.008 && alive.length < 5) {
      this.addNode();
    } else if (roll < 0.012 && alive.length > 0) {
      // A pause longer than a lease, at times.
      const node = alive[Math.floor(this.next() * alive.length)];
      this.pause(node.id, Math.floor(this.next() * 2.5 * LEASE_MS));
    }
  }

  private checkExclusive(): void {
    for (let p = 0; p < PARTITIONS; p++) {
      const holders = [...this.nodes.values()].filter((n) => n.alive && n.own.holds(p, this.now));
      if (holders.length > 1) {
        this.overlaps++;
        throw new Error(
          `at ${this.now} partition ${p} is held by ${holders.map((n) => `${n.id}@${n.own.epochOf(p)}`).join(' and ')}`,
        );
      }
    }
  }

  heal(): void {
    this.era++;
    this.faults = false;
    this.maxDelay = 50;
    for (const node of this.nodes.values()) node.pausedUntil = 0;
    this.setMembers([...this.nodes.values()].filter((n) => n.alive).map((n) => n.id));
  }
}

describe('partition ownership against a model of the lease table', () => {
  it.each(Array.from({ length: 24 }, (_, i) => i + 1))(
    'seed %i: never two holders at once; after healing, each partition with its winner',
    (seed) => {
      const sim = new Simulation(seed * 104_729);
      for (let i = 0; i < 3; i++) sim.addNode();
      while (sim.now < 90_000) sim.step(40);
      sim.heal();
      const healedAt = sim.now;
      while (sim.now < healedAt + 4 * LEASE_MS) sim.step(20);

      const live = sim.liveMembers();
      expect(live.length).toBeGreaterThan(0);
      const owners: Array<string | undefined> = [];
      const wanted: Array<string | undefined> = [];
      const leased: Array<string | undefined> = [];
      for (let p = 0; p < PARTITIONS; p++) {
        wanted.push(ownerOf(p, live));
        const holders = live.filter((id) => sim.nodes.get(id)?.own.canFire(p, sim.now));
        owners.push(holders.join('+') || undefined);
        const lease = sim.valkey.leases[p];
        leased.push(lease.expiresAt > sim.now ? lease.owner : undefined);
      }
      expect(owners).toEqual(wanted);
      expect(leased).toEqual(wanted);
      // The storm did exercise the machine: leases moved and stale owners were fenced.
      expect(sim.valkey.accepted).toBeGreaterThan(100);
      expect(sim.drops).toBeGreaterThan(0);
    },
  );

  it('fences a node that paused past its lease: its late calls are refused', () => {
    const sim = new Simulation(7);
    sim.faults = false;
    sim.maxDelay = 20;
    sim.addNode();
    sim.addNode();
    while (sim.now < 10_000) sim.step(20);
    const [a] = [...sim.nodes.values()];
    const mine = a.own.owned();
    expect(mine.length).toBeGreaterThan(0);
    const p = mine[0];
    const oldEpoch = a.own.epochOf(p);
    sim.pause(a.id, 3 * LEASE_MS);
    while (sim.now < a.pausedUntil - 1) sim.step(20);
    // While a sleeps, the other node has taken its partitions over with a newer epoch...
    const lease = sim.valkey.leases[p];
    expect(lease.owner).not.toBe(a.id);
    expect(lease.epoch).toBeGreaterThan(oldEpoch);
    // ...and a call a makes with its old epoch is refused.
    expect(sim.valkey.fenced(a.id, p, oldEpoch, sim.now)).toBe(true);
    // On waking, a no longer holds it (its clock says the lease is over), and after a while it
    // takes its partitions back, from the other node, with a newer epoch still.
    sim.step(1);
    expect(a.own.epochOf(p) === oldEpoch && a.own.holds(p, sim.now)).toBe(false);
    const wokeAt = sim.now;
    while (sim.now < wokeAt + 3 * LEASE_MS) sim.step(20);
    expect(a.own.canFire(p, sim.now)).toBe(true);
    expect(a.own.epochOf(p)).toBeGreaterThan(lease.epoch - 1);
  });

  it('hands every partition over when a node closes, and ends with nothing in flight', () => {
    const sim = new Simulation(11);
    sim.faults = false;
    sim.maxDelay = 20;
    sim.addNode();
    sim.addNode();
    while (sim.now < 8_000) sim.step(20);
    const [a, b] = [...sim.nodes.values()];
    expect(a.own.owned().length + b.own.owned().length).toBe(PARTITIONS);
    sim.leave(a.id);
    const closedAt = sim.now;
    while (sim.now < closedAt + 2 * LEASE_MS) sim.step(20);
    expect(a.own.closed).toBe(true);
    expect(a.own.owned()).toEqual([]);
    // Released leases are taken at once, not after an expiry.
    expect(b.own.owned().length).toBe(PARTITIONS);
  });

  it('drops a partition at once when a renewal is refused, and says so', () => {
    const own = new Ownership({ node: 'a', partitions: 1, leaseMs: 1_000 });
    own.setMembers(['a']);
    const [acquire] = own.tick(0);
    expect(acquire).toMatchObject({ kind: 'acquire', partition: 0 });
    const request = (acquire as { request: number }).request;
    expect(own.acquired(0, request, 7, 10)).toEqual([{ kind: 'load', partition: 0, epoch: 7 }]);
    own.loaded(0, 7);
    expect(own.canFire(0, 10)).toBe(true);
    const [renew] = own.tick(250);
    expect(renew).toMatchObject({ kind: 'renew', epoch: 7 });
    expect(own.renewed(0, (renew as { request: number }).request, false, 260)).toEqual([
      { kind: 'drop', partition: 0, epoch: 7, reason: 'refused' },
    ]);
    expect(own.canFire(0, 260)).toBe(false);
    expect(own.phaseOf(0)).toBe('unowned');
  });

  it('keeps a partition through a failed renewal, asks again, and drops it only once the lease runs out', () => {
    const own = new Ownership({ node: 'a', partitions: 1, leaseMs: 1_000 });
    own.setMembers(['a']);
    const [acquire] = own.tick(0);
    own.acquired(0, (acquire as { request: number }).request, 3, 10);
    own.loaded(0, 3);
    const [renew] = own.tick(250);
    expect(renew).toMatchObject({ kind: 'renew', epoch: 3 });
    // The call failed (no answer from the store): neither granted nor refused.
    expect(own.renewed(0, (renew as { request: number }).request, undefined, 260)).toEqual([]);
    expect(own.canFire(0, 260)).toBe(true);
    const [again] = own.tick(270);
    expect(again).toMatchObject({ kind: 'renew', epoch: 3 });
    expect(own.renewed(0, (again as { request: number }).request, true, 280)).toEqual([]);
    expect(own.canFire(0, 1_200)).toBe(true);
    // Failures until the lease (from the last renewal sent, at 270) runs out: then dropped.
    const [third] = own.tick(520);
    expect(own.renewed(0, (third as { request: number }).request, undefined, 1_300)).toEqual([
      { kind: 'drop', partition: 0, epoch: 3, reason: 'expired' },
    ]);
    expect(own.phaseOf(0)).toBe('unowned');
  });

  it('counts a lease from when the request was sent, and drops it when that runs out', () => {
    const own = new Ownership({ node: 'a', partitions: 1, leaseMs: 1_000, requestTimeoutMs: 900 });
    own.setMembers(['a']);
    const [acquire] = own.tick(0);
    // The grant arrives 600 ms later: the lease is still only good until 1,000.
    own.acquired(0, (acquire as { request: number }).request, 1, 600);
    own.loaded(0, 1);
    expect(own.canFire(0, 999)).toBe(true);
    expect(own.canFire(0, 1_000)).toBe(false);
    // The renewal sent at 600 is never answered; at 1,000 the tick drops the partition.
    const effects = own.tick(1_000);
    expect(effects[0]).toEqual({ kind: 'drop', partition: 0, epoch: 1, reason: 'expired' });
    expect(own.phaseOf(0)).not.toBe('owned');
  });

  it('takes a grant that comes after its request was abandoned, while it is still good', () => {
    const own = new Ownership({ node: 'a', partitions: 1, leaseMs: 1_000 });
    own.setMembers(['a']);
    const [first] = own.tick(0);
    // Unanswered after 250 ms: abandoned, and another acquire goes out.
    const [second] = own.tick(300);
    expect(second).toMatchObject({ kind: 'acquire', partition: 0 });
    // The first is granted, late: the partition is this node's (from 0), and loads.
    expect(own.acquired(0, (first as { request: number }).request, 4, 400)).toEqual([
      { kind: 'load', partition: 0, epoch: 4 },
    ]);
    // The second is refused (the lease is held: by this node): nothing changes.
    expect(own.acquired(0, (second as { request: number }).request, undefined, 450)).toEqual([]);
    own.loaded(0, 4);
    expect(own.canFire(0, 999)).toBe(true);
    expect(own.canFire(0, 1_000)).toBe(false);
    // A grant that comes after its lease ran out is not taken.
    const late = new Ownership({ node: 'a', partitions: 1, leaseMs: 1_000 });
    late.setMembers(['a']);
    const [gone] = late.tick(0);
    late.tick(300);
    expect(late.acquired(0, (gone as { request: number }).request, 4, 1_000)).toEqual([]);
  });

  it('keeps a partition whose renewals all answer after the request timeout but within the lease', () => {
    const own = new Ownership({ node: 'a', partitions: 1, leaseMs: 1_000 });
    own.setMembers(['a']);
    const [acquire] = own.tick(0);
    own.acquired(0, (acquire as { request: number }).request, 2, 10);
    own.loaded(0, 2);
    // Every renewal is answered (granted) 400 ms after it went out; ticks every 50 ms.
    const answers: Array<{ at: number; request: number }> = [];
    for (let now = 50; now <= 10_000; now += 50) {
      for (const a of answers.filter((x) => x.at <= now)) {
        expect(own.renewed(0, a.request, true, now)).toEqual([]);
      }
      answers.splice(0, answers.filter((x) => x.at <= now).length);
      for (const effect of own.tick(now)) {
        expect(effect.kind).toBe('renew');
        answers.push({ at: now + 400, request: (effect as { request: number }).request });
      }
      expect(own.canFire(0, now), `at ${now}`).toBe(true);
    }
  });

  it('ignores a stale answer, and a fenced call of an older epoch', () => {
    const own = new Ownership({ node: 'a', partitions: 2, leaseMs: 1_000 });
    own.setMembers(['a']);
    const effects = own.tick(0);
    const first = effects.find((e) => e.partition === 0) as { request: number };
    own.acquired(0, first.request + 100, 3, 5);
    expect(own.phaseOf(0)).toBe('acquiring');
    own.acquired(0, first.request, 3, 5);
    own.loaded(0, 3);
    expect(own.fenced(0, 2)).toEqual([]);
    expect(own.canFire(0, 10)).toBe(true);
    expect(own.fenced(0, 3)).toEqual([{ kind: 'drop', partition: 0, epoch: 3, reason: 'fenced' }]);
  });

  it('refuses bad options with a named error', () => {
    expect(() => new Ownership({ node: 'a', partitions: 0 })).toThrow(/partitions/);
    expect(() => new Ownership({ node: 'a', partitions: 1.5 })).toThrow(/integer/);
  });
});
