/**
 * Hierarchical timing wheel: Varghese & Lauck's scheme 7, as in Kafka's TimingWheel and
 * tokio's timer, with occupancy bits so that no time is ever spent on an empty slot.
 *
 * ## The math
 *
 * Write ticks in base W (the wheel size). Level L has W slots, and slot s of level L holds the
 * rows whose tick has digit s at position L. A row goes to the level of the highest digit in
 * which its tick differs from `current`:
 *
 *     level(t) = the highest L such that digit_L(t) != digit_L(current)      (0 if t == current)
 *
 * so every row of level L shares all digits above L with `current`, and (as t >= current) has a
 * larger digit at L. A slot of level L therefore covers W^L consecutive ticks, all in the
 * future, and the slot of level L whose range `current` enters is processed the moment it does:
 * level 0 rows fire, higher rows cascade, i.e. are inserted again and land on a finer level
 * because `current` now shares their digit L too. A row cascades at most once per level.
 *
 * Finding the next tick with work: the lowest level with an occupied slot after the cursor
 * (the cursor of level L is digit_L(current)) holds it, because a level's occupied slots all lie
 * beyond the end of the finer level's span. The search reads one 32-bit occupancy word per 32
 * slots. A driver sleeps straight to that tick: an idle wheel costs nothing per tick.
 *
 * Levels are created when a row first needs them (Kafka's overflow wheels), up to what a safe
 * integer tick needs (9 levels for W = 64, 13 for W = 20).
 *
 * ## Worked example (Kafka's): W = 20, one tick = 1 ms, current = 0
 *
 *     add 2, 8, 19   level 0 (they differ from 0 only in digit 0), slots 2, 8, 19
 *     add 350        350 = (0, 17, 10) in base 20: level 1, slot 17, covering 340..359
 *     add 450        450 = (1, 2, 10): level 2 is created, slot 1, covering 400..799
 *
 *     next expiration: level 0 slot 2 -> tick 2. Rows 2, 8, 19 fire at ticks 2, 8, 19.
 *     tick 340: level 1 slot 17 is entered; 350 cascades to level 0 slot 10.   Fires at 350.
 *     tick 400: level 2 slot 1 is entered; 450 = (1, 2, 10) now differs from current
 *               400 = (1, 0, 0) in digit 1: it cascades to level 1 slot 2 (440..459).
 *     tick 440: level 1 slot 2 is entered; 450 cascades to level 0 slot 10.    Fires at 450.
 *
 * Between those ticks a driver sleeps: 8 wake-ups in all (2, 8, 19, 340, 350, 400, 440, 450)
 * where a scheme-6 wheel would have ticked 450 times.
 */

import { DEBUG, debugAssert } from '../assert.js';
import { EntryStore } from './entries.js';
import { TimingWheel, neverEarly, type ExpireCallback } from './wheel.js';

const TWO_POW_32 = 2 ** 32;
const MAX_TICK = Number.MAX_SAFE_INTEGER;

export interface HierarchicalWheelOptions {
  /** Slots per level, at least 2. Default 64. Powers of two take a faster path. */
  wheelSize?: number;
  /** The tick the wheel starts at. Default 0. */
  startTick?: number;
  /** Rows to reserve up front; the slab doubles when full. */
  initialCapacity?: number;
}

/** Per level: the cursor (digit_L(current)) and the rows each slot holds. */
export interface WheelSnapshot {
  levels: Array<{ cursor: number; slots: number[] }>;
  /** True when the row budget ran out: later slots show at least 1 when occupied, not a count. */
  truncated: boolean;
}

export class HierarchicalWheel extends TimingWheel {
  readonly wheelSize: number;
  /** spans[L] = wheelSize^L: ticks covered by one slot of level L. */
  private readonly spans: number[];
  /** log2(wheelSize) when it is a power of two, else 0. */
  private readonly bitsPerLevel: number;
  private readonly maxLevels: number;
  private levelCount = 1;

  constructor(options: HierarchicalWheelOptions = {}) {
    const wheelSize = options.wheelSize ?? 64;
    if (!Number.isInteger(wheelSize) || wheelSize < 2 || wheelSize > 4096) {
      throw new RangeError(`wheelSize must be an integer from 2 to 4096, got ${wheelSize}`);
    }
    super(new EntryStore(options.initialCapacity), wheelSize, 1, options.startTick ?? 0);
    this.wheelSize = wheelSize;
    this.bitsPerLevel = (wheelSize & (wheelSize - 1)) === 0 ? Math.log2(wheelSize) : 0;
    this.spans = [1];
    while (this.spans[this.spans.length - 1] <= MAX_TICK) {
      this.spans.push(this.spans[this.spans.length - 1] * wheelSize);
    }
    this.maxLevels = this.spans.length - 1;
  }

  /** Levels created so far. */
  get levels(): number {
    return this.levelCount;
  }

  /**
   * A read-only picture of the wheel for dashboards: rows per slot and cursor, per level.
   * Counting walks slot lists, so at most `maxRows` rows are visited; past that budget an
   * occupied slot counts as 1 and `truncated` is set.
   */
  snapshot(maxRows = 100_000): WheelSnapshot {
    const { next } = this.entries;
    let budget = maxRows;
    let truncated = false;
    const levels: WheelSnapshot['levels'] = [];
    for (let level = 0; level < this.levelCount; level++) {
      const slots = new Array<number>(this.wheelSize).fill(0);
      for (let slot = this.slots.nextOccupied(level, 0); slot >= 0;) {
        let count = 0;
        for (let index = this.slots.head(this.slots.code(level, slot)); index >= 0;) {
          count++;
          if (--budget <= 0) {
            truncated = true;
            break;
          }
          index = next[index];
        }
        slots[slot] = count;
        slot = this.slots.nextOccupied(level, slot + 1);
      }
      levels.push({ cursor: this.digit(this.currentTick, level), slots });
    }
    return { levels, truncated };
  }

  override idleTo(tick: number): void {
    // Empty, so no slot can hold a row the move would skip, and no level needs cascading.
    if (this.linked === 0 && tick > this.currentTick) this.currentTick = tick;
  }

  insert(index: number, tick: number): void {
    this.entries.tick[index] = tick;
    const at = tick > this.currentTick ? tick : this.currentTick;
    const level = this.levelFor(at);
    if (level >= this.levelCount) this.addLevels(level + 1);
    this.slots.append(this.slots.code(level, this.digit(at, level)), index);
    this.linked++;
  }

  nextDeadline(): number {
    if (this.linked === 0) return Infinity;
    for (let level = 0; level < this.levelCount; level++) {
      const slot = this.nextOccupiedSlot(level);
      if (slot >= 0) return this.slotStart(level, slot);
    }
    return Infinity;
  }

  advance(now: number, onExpire: ExpireCallback, limit = Infinity): number {
    let fired = 0;
    while (this.linked > 0) {
      this.cascadeEntered();
      let level = 0;
      let slot = -1;
      for (; level < this.levelCount; level++) {
        slot = this.nextOccupiedSlot(level);
        if (slot >= 0) break;
      }
      if (slot < 0) break;
      const start = this.slotStart(level, slot);
      if (start > now) break;
      // Moving to the start of the lowest occupied slot crosses no boundary of a higher level.
      this.currentTick = start;
      const code = this.slots.code(level, slot);
      if (level === 0) {
        // Re-read the head each time: onExpire may cancel or add rows of this very slot.
        for (let index = this.slots.head(code); index >= 0; index = this.slots.head(code)) {
          if (fired >= limit) return fired;
          // Guarded here, not only inside debugAssert: its argument would read the row's tick, a
          // cache miss per expiration in a storm, even with the checks off.
          if (DEBUG) {
            debugAssert(this.entries.tick[index] <= now, () =>
              neverEarly(this.entries, index, now),
            );
          }
          this.remove(index);
          fired++;
          if (onExpire(index) === true) return fired;
        }
        this.currentTick = start + 1;
      } else {
        this.cascade(code);
      }
    }
    if (now + 1 > this.currentTick) {
      this.currentTick = Math.floor(now) + 1;
      this.cascadeEntered();
    }
    return fired;
  }

  /**
   * Restores the invariant after `current` moved forward by more than a slot start: a higher
   * level's slot that `current` now stands in (its cursor slot) is cascaded at once, from the top
   * level down, since a cascade from level L can fill the cursor slot of level L - 1.
   */
  private cascadeEntered(): void {
    for (let level = this.levelCount - 1; level > 0; level--) {
      const code = this.slots.code(level, this.digit(this.currentTick, level));
      if (this.slots.isOccupied(code)) this.cascade(code);
    }
  }

  /** Re-inserts every row of a slot `current` has just entered; each lands on a finer level. */
  private cascade(code: number): void {
    const { next, tick } = this.entries;
    let index = this.slots.takeAll(code);
    while (index >= 0) {
      const following = next[index];
      this.linked--;
      this.insert(index, tick[index]);
      index = following;
    }
  }

  /** The cursor of a level is digit_L(current); level 0 includes it, higher levels start after. */
  private nextOccupiedSlot(level: number): number {
    const cursor = this.digit(this.currentTick, level);
    return this.slots.nextOccupied(level, level === 0 ? cursor : cursor + 1);
  }

  /** First tick of a slot at a level, within the current block of the level above. */
  private slotStart(level: number, slot: number): number {
    const blockSpan = this.spans[level + 1];
    return Math.floor(this.currentTick / blockSpan) * blockSpan + slot * this.spans[level];
  }

  private digit(tick: number, level: number): number {
    const quotient = Math.floor(tick / this.spans[level]);
    return this.bitsPerLevel > 0 ? quotient & (this.wheelSize - 1) : quotient % this.wheelSize;
  }

  /** The highest level at which `tick` and `current` differ in digit. */
  private levelFor(tick: number): number {
    const current = this.currentTick;
    if (this.bitsPerLevel > 0) {
      // The highest differing bit, over both 32-bit halves, decides the level.
      const highDiff = Math.floor(tick / TWO_POW_32) ^ Math.floor(current / TWO_POW_32);
      let bit: number;
      if (highDiff !== 0) {
        bit = 63 - Math.clz32(highDiff);
      } else {
        const lowDiff = (tick ^ current) >>> 0;
        if (lowDiff === 0) return 0;
        bit = 31 - Math.clz32(lowDiff);
      }
      return Math.floor(bit / this.bitsPerLevel);
    }
    let level = 0;
    while (
      Math.floor(tick / this.spans[level + 1]) !== Math.floor(current / this.spans[level + 1])
    ) {
      level++;
    }
    return level;
  }

  private addLevels(levels: number): void {
    if (levels > this.maxLevels) {
      throw new RangeError(`tick ${this.currentTick} is beyond the last tick a wheel can hold`);
    }
    this.slots.ensureGroups(levels);
    this.levelCount = levels;
  }
}
