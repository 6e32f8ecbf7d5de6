/**
 * Hashed timing wheel: Varghese & Lauck's scheme 6, Netty's HashedWheelTimer. A row due at tick
 * t lives in slot `t mod W` (W a power of two) and keeps its absolute tick, where Netty counts
 * rounds down; occupancy bits skip empty slots and whole revolutions.
 *
 * A visit of slot s at tick v moves the rows with t <= v to a due list (a slot like any other, so
 * a callback may cancel a row in it), moves `current` to v + 1, then fires them. A visit costs
 * the slot's length, n / W on average: why scheme 7 (HierarchicalWheel) is the default.
 */

import { checkOption } from '../validate.js';
import { EntryStore } from './entries.js';
import { TimingWheel, type ExpireCallback } from './wheel.js';

export interface HashedWheelOptions {
  /** Slots, rounded up to a power of two. Default 512 (Netty's ticksPerWheel). */
  ticksPerWheel?: number;
  /** The tick the wheel starts at. Default 0. */
  startTick?: number;
  initialCapacity?: number;
}

export class HashedWheel extends TimingWheel {
  readonly ticksPerWheel: number;
  private readonly mask: number;
  /** The due list: the slot after the last. */
  private readonly dueCode: number;

  constructor(options: HashedWheelOptions = {}) {
    const requested = checkOption(options.ticksPerWheel ?? 512, 'ticksPerWheel', 1, 2 ** 30, true);
    const ticksPerWheel = 2 ** Math.ceil(Math.log2(requested));
    super(new EntryStore(options.initialCapacity), ticksPerWheel + 1, 1, options.startTick ?? 0);
    this.ticksPerWheel = ticksPerWheel;
    this.mask = ticksPerWheel - 1;
    this.dueCode = ticksPerWheel;
  }

  insert(index: number, tick: number): void {
    this.entries.tick[index] = tick;
    const at = tick > this.currentTick ? tick : this.currentTick;
    this.slots.append(at & this.mask, index);
    this.linked++;
  }

  nextDeadline(): number {
    if (this.linked === 0) return Infinity;
    // Rows on the due list were collected by a visit that is already behind `current`.
    if (this.slots.head(this.dueCode) >= 0) return this.currentTick - 1;
    return this.nextVisit();
  }

  advance(now: number, onExpire: ExpireCallback, limit = Infinity): number {
    let fired = 0;
    while (this.linked > 0) {
      if (this.slots.head(this.dueCode) < 0) {
        const visit = this.nextVisit();
        if (visit > now) break;
        this.collectDue(visit);
        // The visited slot is done: rows inserted from now on go to later ticks.
        this.currentTick = visit + 1;
      }
      // Re-read the head each time: onExpire may cancel rows of the due list.
      for (let index = this.slots.head(this.dueCode); index >= 0;) {
        if (fired >= limit) return fired;
        this.checkNotEarly(index, now);
        this.remove(index);
        fired++;
        if (onExpire(index) === true) return fired;
        index = this.slots.head(this.dueCode);
      }
    }
    if (now + 1 > this.currentTick) this.currentTick = Math.floor(now) + 1;
    return fired;
  }

  /** The tick of the next visit to an occupied slot, at or after `current`. */
  private nextVisit(): number {
    const from = this.currentTick & this.mask;
    let slot = this.slots.nextOccupied(0, from);
    if (slot < 0 || slot >= this.ticksPerWheel) slot = this.slots.nextOccupied(0, 0);
    return this.currentTick + ((slot - from) & this.mask);
  }

  /** Moves the rows of the visited slot whose tick has come to the due list, in slot order. */
  private collectDue(visit: number): void {
    const { next, tick } = this.entries;
    const code = visit & this.mask;
    for (let index = this.slots.head(code); index >= 0;) {
      const following = next[index];
      if (tick[index] <= visit) {
        this.slots.unlink(index);
        this.slots.append(this.dueCode, index);
      }
      index = following;
    }
  }
}
