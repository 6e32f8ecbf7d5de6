/**
 * The near horizon's held messages by id. A Map delete costs ~190 ns (the largest cost of an
 * ack), so a release leaves a stale entry; once stale entries outnumber the held (twice that
 * while a burst is delivered), a sweep moves the held into a new map, a step a turn, and drops
 * the old one whole. When nothing is held both maps are dropped at once.
 *
 * Invariants: a held message is the entry of its id in `byId`, or, while a sweep moves them,
 * `byId` has no entry for the id and `moving.from` has it; `stale` >= the stale entries of `byId`.
 */

import type { NearMessage } from './near-message.js';

/** Entries of the old id map a sweep moves a turn, at least (well under a millisecond's work). */
const SWEEP_STEP = 4096;
/** Stale id entries tolerated besides those the held count allows. */
const SWEEP_MIN = 4096;

export class HeldIds {
  /** Held messages by id, and stale entries of released ones. */
  private byId = new Map<string, NearMessage>();
  count = 0;
  /** Releases since `byId` was started: at least its stale entries. */
  private stale = 0;
  /** While a sweep runs: the previous id map, whose held messages move into `byId`. */
  private moving: { from: Map<string, NearMessage>; next: Iterator<NearMessage> } | undefined;
  private sweepQueued = false;

  /** `readyWaiting`: whether ready messages wait (a burst is being delivered). */
  constructor(private readonly readyWaiting: () => boolean) {}

  /**
   * The latest entry of an id, stale or not. While a sweep moves entries, one in `byId` is the
   * later: a message held again, or another of the same id, is always put there.
   */
  entry(id: string): NearMessage | undefined {
    const message = this.byId.get(id);
    return message !== undefined || this.moving === undefined ? message : this.moving.from.get(id);
  }

  /** Every held message, once each (stale entries skipped), in no particular order. */
  *held(): IterableIterator<NearMessage> {
    for (const message of this.byId.values()) {
      if (message.held && this.byId.get(message.id) === message) yield message;
    }
    const moving = this.moving;
    if (moving === undefined) return;
    for (const message of moving.from.values()) {
      if (message.held && !this.byId.has(message.id)) yield message;
    }
  }

  /** A message is held (its `held` is set by the caller). */
  add(message: NearMessage): void {
    this.byId.set(message.id, message);
    this.count++;
  }

  /** A held message was released: its entry is stale from now on. */
  released(): void {
    this.count--;
    this.stale++;
    if (this.count === 0 || this.sweepDue()) this.queueSweep();
  }

  /** No ready message waits any more: a sweep put off meanwhile may start. */
  readyDrained(): void {
    if (this.stale > this.count + SWEEP_MIN) this.queueSweep();
  }

  /** Whether enough entries of `byId` are stale for a sweep to start. */
  private sweepDue(): boolean {
    if (this.moving !== undefined) return false;
    const over = this.stale - SWEEP_MIN;
    return over > this.count && (!this.readyWaiting() || over > 2 * this.count);
  }

  private queueSweep(): void {
    if (this.sweepQueued) return;
    this.sweepQueued = true;
    setImmediate(this.sweep);
  }

  /** Drops the id maps when nothing is held; else moves a step of the held into a new map. */
  private readonly sweep = (): void => {
    this.sweepQueued = false;
    if (this.count === 0) {
      this.byId = new Map();
      this.moving = undefined;
      this.stale = 0;
      return;
    }
    let moving = this.moving;
    if (moving === undefined) {
      if (!this.sweepDue()) return; // held again meanwhile
      moving = this.moving = { from: this.byId, next: this.byId.values() };
      this.byId = new Map();
      this.stale = 0;
    }
    const { from, next } = moving;
    const step = Math.max(SWEEP_STEP, Math.ceil(from.size / 64));
    for (let i = 0; i < step; i++) {
      const entry = next.next();
      if (entry.done === true) {
        this.moving = undefined;
        return;
      }
      const message = entry.value;
      // A held message in the old map is its id's latest (entry()): byId has none of the id,
      // or has this message, held again since the sweep began.
      if (message.held) this.byId.set(message.id, message);
    }
    this.queueSweep();
  };
}
