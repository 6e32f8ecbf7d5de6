/**
 * What the two wheels share: rows in an EntryStore, slots in a SlotTable, and the `current`
 * tick. Time is a tick count, never a clock reading: drivers in src/timer turn ms into ticks.
 *
 * Invariant: every tick before `current` has been processed; a row inserted with an earlier
 * tick fires on the next `advance`. `advance` hands a due row to `onExpire` DETACHED, and the
 * callee must `release` or re-`insert` it: a driver can free the row before user code runs
 * that may schedule into the same slab.
 */

import { DEBUG, debugAssert } from '../assert.js';
import { DETACHED, type EntryStore } from './entries.js';
import { SlotTable } from './slots.js';

/** Takes a due row; returning true ends the advance right after it, as if `limit` were reached. */
export type ExpireCallback = (index: number) => boolean | void;

export abstract class TimingWheel {
  readonly entries: EntryStore;
  protected slots: SlotTable;
  protected currentTick = 0;
  protected linked = 0;

  protected constructor(entries: EntryStore, groupSize: number, groups: number, startTick: number) {
    this.entries = entries;
    this.slots = new SlotTable(entries, groupSize, groups);
    this.currentTick = startTick;
  }

  /** Every earlier tick has been processed. */
  get current(): number {
    return this.currentTick;
  }

  /** Rows linked (pending timers). */
  get size(): number {
    return this.linked;
  }

  /**
   * Moves an empty wheel's current tick forward to `tick` (never back); nothing when rows are
   * linked. A wheel whose slots depend on more than the current tick keeps it (this default).
   */
  idleTo(_tick: number): void {}

  /** "Never early", with TICKWHEEL_DEBUG=1 only: reading the tick is a cache miss per expiry. */
  protected checkNotEarly(index: number, now: number): void {
    if (DEBUG) {
      const due = this.entries.tick[index];
      debugAssert(due <= now, () => `row ${index} (tick ${due}) expired early, at tick ${now}`);
    }
  }

  /** Links a detached row to fire at `tick`. */
  abstract insert(index: number, tick: number): void;

  /** The earliest tick at which `advance` has work (at or before the first row), or Infinity. */
  abstract nextDeadline(): number;

  /**
   * Processes every tick up to `now`: due rows are unlinked and passed to `onExpire` in due order
   * (equal ticks in insertion order), stopping after `limit` rows or a row `onExpire` answers true
   * for. Returns how many rows expired.
   */
  abstract advance(now: number, onExpire: ExpireCallback, limit?: number): number;

  /** A new row due at `tick`: its index. */
  add(tick: number): number {
    const index = this.entries.allocate();
    this.insert(index, tick);
    return index;
  }

  /** Unlinks a linked row; it becomes detached and stays allocated. */
  remove(index: number): void {
    this.slots.unlink(index);
    this.linked--;
  }

  /** Frees a detached row; every handle to it becomes inert. */
  release(index: number): void {
    this.entries.release(index);
  }

  /** Moves a linked row to a new tick; it counts as inserted now for the order of equal ticks. */
  reschedule(index: number, tick: number): void {
    this.remove(index);
    this.insert(index, tick);
  }

  /** False if the handle is stale or its row not linked. */
  cancel(handle: number): boolean {
    const index = this.entries.indexOf(handle);
    if (index < 0 || !this.entries.isLinked(index)) return false;
    this.remove(index);
    this.release(index);
    return true;
  }

  /** Unlinks every row and passes it to `onEntry` detached (it must release it). */
  drain(onEntry: ExpireCallback): void {
    const { next } = this.entries;
    const slots = this.slots;
    const codes = slots.groups * slots.stride;
    for (let code = 0; code < codes; code++) {
      let index = slots.takeAll(code);
      while (index >= 0) {
        const following = next[index];
        this.entries.prev[index] = DETACHED;
        this.linked--;
        onEntry(index);
        index = following;
      }
    }
  }
}
