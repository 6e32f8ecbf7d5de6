/**
 * What the two wheels share: rows in an EntryStore, slots in a SlotTable, and one notion of
 * time, the wheel's `current` tick.
 *
 * Time here is a tick count (an integer), never a clock reading: the wheels have no I/O and no
 * notion of milliseconds. Drivers in src/timer turn clock time into ticks.
 *
 * Invariant: every tick before `current` has been processed. A row whose tick is before
 * `current` when it is inserted is due at once and fires on the next `advance`.
 *
 * Ownership of rows during expiry: `advance` unlinks a due row and hands its index to
 * `onExpire` DETACHED. The callee owns it and must either `release(index)` it or `insert` it
 * again (an interval re-arming itself). This is what lets a driver read per-row data and free
 * the row before it runs user code that may schedule new timers into the same slab.
 */

import { DEBUG, debugAssert } from '../assert.js';
import { DETACHED, type EntryStore } from './entries.js';
import { SlotTable } from './slots.js';

/** The message of the "never early" invariant's debugAssert in both wheels' advance(). */
function neverEarly(entries: EntryStore, index: number, now: number): string {
  return `row ${index} due at tick ${entries.tick[index]} expired early, at tick ${now}`;
}

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

  /** The tick the wheel stands at: every earlier tick has been processed. */
  get current(): number {
    return this.currentTick;
  }

  /** Rows linked into the wheel (pending timers). */
  get size(): number {
    return this.linked;
  }

  /**
   * Moves an empty wheel's current tick forward to `tick` (never back), as if every tick up to
   * it had been processed, which is trivially so when nothing is linked. Does nothing when rows
   * are linked. Wheels whose slots depend on more than the current tick keep theirs (default).
   */
  idleTo(tick: number): void {
    void tick;
  }

  /**
   * The "never early" invariant for a row about to fire at tick `now`, checked only with
   * TICKWHEEL_DEBUG=1. The row's tick is read only then: read for a check that is off, it was a
   * cache miss per expiration in a storm.
   */
  protected checkNotEarly(index: number, now: number): void {
    if (DEBUG) {
      debugAssert(this.entries.tick[index] <= now, () => neverEarly(this.entries, index, now));
    }
  }

  /** Links a detached row to fire at `tick`. */
  abstract insert(index: number, tick: number): void;

  /**
   * The tick of the next slot that needs processing: the earliest tick at which `advance` has
   * work to do, which is at or before the earliest due row. Infinity when the wheel is empty.
   */
  abstract nextDeadline(): number;

  /**
   * Processes every tick up to and including `now`: due rows are unlinked and passed to
   * `onExpire` in due order (equal ticks in insertion order). Stops early after `limit` rows, or
   * right after a row for which `onExpire` returns true, leaving the rest for the next call.
   * Returns how many rows expired.
   */
  abstract advance(now: number, onExpire: ExpireCallback, limit?: number): number;

  /** Allocates a row due at `tick` and returns its index. */
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

  /** Cancels the timer a handle names. False if the handle is stale or the row is not linked. */
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
