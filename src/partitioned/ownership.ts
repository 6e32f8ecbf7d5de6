/**
 * Which partitions this node owns: the partition state machine of docs/cluster.md ("Ownership
 * of partitions"). No I/O and no clock: the caller feeds in the time, the members and the
 * answers, and carries out the effects returned (ownership-model.test.ts tests it on a model).
 *
 * No overlap: the store grants a lease for `leaseMs` by its own clock, no earlier than it receives
 * the request; this node counts it from when it *sent* it (`validUntil = sentAt + leaseMs`), so
 * its validUntil never passes the store's expiry, after which alone another node gets it (clocks
 * run at the same rate; each side measures only durations). A node paused past validUntil may
 * not fire (`canFire`), and what it sent before the pause is fenced by the epoch.
 *
 * At most one request per partition is in flight. One unanswered after `requestTimeoutMs` is
 * abandoned, so that another can go out (the first may be stuck on a connection that died),
 * but its answer still counts if it comes while it is of use, from its own sentAt: a grant
 * while the partition is still sought and not yet run out, a renewal of the epoch still held.
 * A store slower than `requestTimeoutMs` but within the lease then keeps its owners, rather than
 * having every answer thrown away (the lease lost, or granted to this node and never used). An
 * answer to a request never sent, or no longer remembered, is ignored.
 */

import { assert } from '../assert.js';
import { checkOption } from '../validate.js';
import { partitionsOf } from './rendezvous.js';

export type Phase = 'unowned' | 'acquiring' | 'loading' | 'owned' | 'releasing';

export type DropReason =
  | 'expired' // validUntil passed without a renewal
  | 'refused' // a renewal was refused
  | 'fenced' // an owner-only call was refused: someone else has a newer epoch
  | 'released'; // this node gives the partition up (it no longer wins it, or it is closing)

export type Effect =
  /** Ask the store for the lease; answer with acquired(). */
  | { kind: 'acquire'; partition: number; request: number }
  /** Extend the lease of `epoch`; answer with renewed(). */
  | { kind: 'renew'; partition: number; epoch: number; request: number }
  /** Free the lease of `epoch`; answer with released(). Only after the `drop` for it. */
  | { kind: 'release'; partition: number; epoch: number; request: number }
  /** Fill the wheel with the partition's near horizon; answer with loaded(). */
  | { kind: 'load'; partition: number; epoch: number }
  /** Stop acting for the partition at once: forget its timers, fire nothing more of it. */
  | { kind: 'drop'; partition: number; epoch: number; reason: DropReason };

export interface OwnershipOptions {
  node: string;
  partitions: number;
  /** How long the store keeps a lease without a renewal. Default 2,000 ms. */
  leaseMs?: number;
  /** Time a request may take before it is abandoned. Default leaseMs / 4. */
  requestTimeoutMs?: number;
}

const NONE = 0;
/** Abandoned requests per partition whose answers are still taken. */
const ABANDONED_KEPT = 8;

interface Slot {
  phase: Phase;
  /** The epoch of the lease held (loading, owned, releasing), else 0. */
  epoch: number;
  /** Our clock's time until which the lease is surely ours (see the top of the file). */
  validUntil: number;
  renewAt: number;
  /** The request in flight, or NONE. */
  request: number;
  /** Requests abandoned unanswered, oldest first: when each was sent, and the epoch it was for. */
  abandoned: Map<number, { sentAt: number; epoch: number }>;
  sentAt: number;
  /** No acquire before this time (after a refusal). */
  retryAt: number;
  /** Whether this node wins the partition among the members it knows. */
  wanted: boolean;
}

export class Ownership {
  readonly node: string;
  readonly partitions: number;
  readonly leaseMs: number;
  readonly renewEveryMs: number;
  readonly requestTimeoutMs: number;
  readonly retryMs: number;
  private readonly slots: Slot[];
  private nextRequest = 1;
  private closing = false;

  constructor(options: OwnershipOptions) {
    this.node = options.node;
    this.partitions = checkOption(options.partitions, 'partitions', 1, 65_536, true);
    this.leaseMs = checkOption(options.leaseMs ?? 2_000, 'leaseMs', 10, 3_600_000);
    // Renewals start every quarter lease; a refused acquire is asked again after an eighth.
    this.renewEveryMs = this.leaseMs / 4;
    this.requestTimeoutMs = checkOption(
      options.requestTimeoutMs ?? this.leaseMs / 4,
      'requestTimeoutMs',
      1,
      this.leaseMs,
    );
    this.retryMs = this.leaseMs / 8;
    this.slots = Array.from({ length: this.partitions }, () => ({
      phase: 'unowned' as Phase,
      epoch: 0,
      validUntil: 0,
      renewAt: 0,
      request: NONE,
      abandoned: new Map(),
      sentAt: 0,
      retryAt: 0,
      wanted: false,
    }));
  }

  /** The live members as this node last saw them (itself included, once it has registered). */
  setMembers(nodes: readonly string[]): void {
    const mine = new Set(this.closing ? [] : partitionsOf(this.node, this.partitions, nodes));
    for (let p = 0; p < this.partitions; p++) this.slots[p].wanted = mine.has(p);
  }

  /** Gives every partition up: they are released on the next ticks, and none is taken again. */
  close(): void {
    this.closing = true;
    for (const slot of this.slots) slot.wanted = false;
  }

  /** What is due at `now`: lease expiries, timeouts, acquisitions, renewals, releases. */
  tick(now: number): Effect[] {
    const effects: Effect[] = [];
    for (let p = 0; p < this.partitions; p++) {
      const slot = this.slots[p];
      if (slot.request !== NONE && now - slot.sentAt >= this.requestTimeoutMs) {
        slot.abandoned.set(slot.request, { sentAt: slot.sentAt, epoch: slot.epoch });
        if (slot.abandoned.size > ABANDONED_KEPT) {
          slot.abandoned.delete(slot.abandoned.keys().next().value as number);
        }
        this.endRequest(slot);
      }
      if (holds(slot.phase) && now >= slot.validUntil) {
        effects.push(this.drop(p, 'expired'));
      }
      if (slot.request !== NONE) continue;
      if (slot.phase === 'unowned' && slot.wanted && now >= slot.retryAt) {
        slot.phase = 'acquiring';
        effects.push({ kind: 'acquire', partition: p, request: this.send(slot, now) });
      } else if (holds(slot.phase) && !slot.wanted) {
        const epoch = slot.epoch;
        effects.push(this.drop(p, 'released'));
        slot.phase = 'releasing';
        slot.epoch = epoch;
        effects.push({ kind: 'release', partition: p, epoch, request: this.send(slot, now) });
      } else if (holds(slot.phase) && now >= slot.renewAt) {
        const { epoch } = slot;
        effects.push({ kind: 'renew', partition: p, epoch, request: this.send(slot, now) });
      }
    }
    return effects;
  }

  /** The answer to an acquire: the epoch granted, or undefined when refused or failed. */
  acquired(partition: number, request: number, epoch: number | undefined, now: number): Effect[] {
    const slot = this.slotOf(partition);
    const answered = this.answered(slot, request);
    if (answered === undefined) return [];
    const sought = slot.phase === 'acquiring' || slot.phase === 'unowned';
    if (!sought) return [];
    const validUntil = answered.sentAt + this.leaseMs;
    if (epoch === undefined || now >= validUntil || !slot.wanted) {
      // A late answer that grants nothing changes nothing: another acquire may be on its way.
      if (!answered.current) return [];
      // Granted but no longer wanted (or already too late): left to expire unused, which
      // delays the partition's next owner by at most one lease, and is rare.
      slot.phase = 'unowned';
      slot.retryAt = epoch === undefined ? now + this.retryMs : now;
      return [];
    }
    // A late grant while another acquire is in flight: that one is refused (the lease is this
    // node's now), and its answer finds the partition held.
    slot.phase = 'loading';
    slot.epoch = epoch;
    slot.validUntil = validUntil;
    slot.renewAt = answered.sentAt + this.renewEveryMs;
    return [{ kind: 'load', partition, epoch }];
  }

  /**
   * The answer to a renewal: true when the store extended the lease, false when it refused,
   * undefined when the call failed (no answer): the lease holds until validUntil, and the next
   * tick asks again, as after a timeout.
   */
  renewed(partition: number, request: number, ok: boolean | undefined, now: number): Effect[] {
    const slot = this.slotOf(partition);
    const answered = this.answered(slot, request);
    if (answered === undefined || !holds(slot.phase) || answered.epoch !== slot.epoch) return [];
    if (ok === undefined) return now >= slot.validUntil ? [this.drop(partition, 'expired')] : [];
    if (!ok) return [this.drop(partition, 'refused')];
    slot.validUntil = Math.max(slot.validUntil, answered.sentAt + this.leaseMs);
    slot.renewAt = Math.max(slot.renewAt, answered.sentAt + this.renewEveryMs);
    if (now >= slot.validUntil) return [this.drop(partition, 'expired')];
    return [];
  }

  /**
   * The request an answer is for, taken off the slot: the one in flight (current) or one
   * abandoned; undefined for any other.
   */
  private answered(
    slot: Slot,
    request: number,
  ): { sentAt: number; epoch: number; current: boolean } | undefined {
    if (request !== NONE && slot.request === request) {
      slot.request = NONE;
      return { sentAt: slot.sentAt, epoch: slot.epoch, current: true };
    }
    const abandoned = slot.abandoned.get(request);
    if (abandoned === undefined) return undefined;
    slot.abandoned.delete(request);
    return { ...abandoned, current: false };
  }

  /** The near horizon of `epoch`'s partition is in the wheel: it may fire. */
  loaded(partition: number, epoch: number): void {
    const slot = this.slotOf(partition);
    if (slot.phase === 'loading' && slot.epoch === epoch) slot.phase = 'owned';
  }

  /** An owner-only call for `epoch` was refused: someone holds a newer epoch. */
  fenced(partition: number, epoch: number): Effect[] {
    const slot = this.slotOf(partition);
    if (!holds(slot.phase) || slot.epoch !== epoch) return [];
    return [this.drop(partition, 'fenced')];
  }

  /** The answer to a release (or its failure: the lease then expires by itself). */
  released(partition: number, request: number): void {
    const slot = this.slotOf(partition);
    if (slot.request === request && slot.phase === 'releasing') this.endRequest(slot);
  }

  /** Whether this node may fire the partition's messages now. */
  canFire(partition: number, now: number): boolean {
    const slot = this.slotOf(partition);
    return slot.phase === 'owned' && now < slot.validUntil;
  }

  /** Whether this node may act as the partition's owner (load or fire) now. */
  holds(partition: number, now: number): boolean {
    const slot = this.slotOf(partition);
    return holds(slot.phase) && now < slot.validUntil;
  }

  phaseOf(partition: number): Phase {
    return this.slotOf(partition).phase;
  }

  epochOf(partition: number): number {
    return this.slotOf(partition).epoch;
  }

  /** Partitions in the owned phase. */
  owned(): number[] {
    return this.slots.flatMap((slot, p) => (slot.phase === 'owned' ? [p] : []));
  }

  /** True once close() was called and every partition is unowned with nothing in flight. */
  get closed(): boolean {
    return this.closing && this.slots.every((s) => s.phase === 'unowned' && s.request === NONE);
  }

  private send(slot: Slot, now: number): number {
    slot.request = this.nextRequest++;
    slot.sentAt = now;
    return slot.request;
  }

  /** The request in flight is over (abandoned, or a release answered): no acquire or release. */
  private endRequest(slot: Slot): void {
    slot.request = NONE;
    if (slot.phase === 'acquiring') slot.phase = 'unowned';
    else if (slot.phase === 'releasing') {
      // An abandoned release: the lease expires by itself if the release was lost.
      slot.phase = 'unowned';
      slot.epoch = 0;
    }
  }

  private drop(partition: number, reason: DropReason): Effect {
    const slot = this.slots[partition];
    const effect: Effect = { kind: 'drop', partition, epoch: slot.epoch, reason };
    slot.phase = 'unowned';
    slot.epoch = 0;
    slot.request = NONE;
    slot.validUntil = 0;
    return effect;
  }

  private slotOf(partition: number): Slot {
    assert(
      Number.isInteger(partition) && partition >= 0 && partition < this.partitions,
      () => `no partition ${partition} (0 .. ${this.partitions - 1})`,
    );
    return this.slots[partition];
  }
}

function holds(phase: Phase): boolean {
  return phase === 'loading' || phase === 'owned';
}
