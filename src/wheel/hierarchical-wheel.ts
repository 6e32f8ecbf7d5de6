/**
 * Hierarchical timing wheel: Varghese & Lauck's scheme 7, as in Kafka's TimingWheel and tokio's
 * timer, with occupancy bits so that no time is ever spent on an empty slot.
 *
 * ## The math
 *
 * Write ticks in base W (the wheel size); a block is W ticks starting at a multiple of W. The
 * first level holds two blocks, the one `current` is in and the next (`next` is that next
 * block's start), one slot per tick, as two groups of W slots. A later row goes to level L >= 1,
 * the highest L at which its digit differs from `next`'s, in the slot of its digit L:
 *
 *     first level   t in current's block or the next: slot t mod W of that block's group
 *     level(t)      otherwise the highest L such that digit_L(t) != digit_L(next)
 *
 * A slot of level L covers W^L ticks. When `next` enters it (a block before it begins) it is
 * cascaded: its rows are inserted again, onto a lower level or the first level's next block. A
 * row moves at most once per level, and one due within the next block never moves.
 *
 * The next work is the first occupied first-level slot from `current` on, or the cascade of the
 * lowest higher level's first occupied slot after its cursor, whichever comes first; the search
 * reads one occupancy word per 32 slots, and a driver sleeps straight to that tick. Levels are
 * created when first needed (Kafka's overflow wheels), up to 2^53 ticks (5 levels for W = 4096).
 * docs/wheels.md works Kafka's example (W = 20) through, tick by tick.
 */

import { TickwheelRangeError } from '../errors.js';
import { checkOption } from '../validate.js';
import { EntryStore } from './entries.js';
import { TimingWheel, type ExpireCallback } from './wheel.js';

const TWO_POW_32 = 2 ** 32;

/** The first-level group of a block's ticks. */
function parity(block: number): number {
  return block % 2;
}
const MAX_TICK = Number.MAX_SAFE_INTEGER;

export interface HierarchicalWheelOptions {
  /** Slots per level, at least 2. Default 64. Powers of two take a faster path. */
  wheelSize?: number;
  /** The tick the wheel starts at. Default 0. */
  startTick?: number;
  /** Rows to reserve up front; the slab doubles when full. */
  initialCapacity?: number;
}

/**
 * Per level: the cursor and the rows of each slot. The first level has 2W slots (current block,
 * next), its cursor in the first W; a level L >= 1 has W, its cursor digit_L of the next block.
 */
export interface WheelSnapshot {
  levels: Array<{ cursor: number; slots: number[] }>;
  /** The row budget ran out: later occupied slots show 1, not a count. */
  truncated: boolean;
}

export class HierarchicalWheel extends TimingWheel {
  readonly wheelSize: number;
  /** spans[L] = wheelSize^L: ticks one slot of level L covers. bitsPerLevel: log2 of it, or 0. */
  private readonly spans: number[];
  private readonly bitsPerLevel: number;
  private readonly maxLevels: number;
  private levelCount = 1;
  /** Set by moveTo: `current`'s block's start (exact near 2^53) and first-level group. */
  private blockStart = 0;
  private currentGroup = 0;

  constructor(options: HierarchicalWheelOptions = {}) {
    const wheelSize = checkOption(options.wheelSize ?? 64, 'wheelSize', 2, 4096, true);
    super(new EntryStore(options.initialCapacity), wheelSize, 2, options.startTick ?? 0);
    this.wheelSize = wheelSize;
    this.bitsPerLevel = (wheelSize & (wheelSize - 1)) === 0 ? Math.log2(wheelSize) : 0;
    this.spans = [1];
    while (this.spans[this.spans.length - 1] <= MAX_TICK) {
      this.spans.push(this.spans[this.spans.length - 1] * wheelSize);
    }
    this.maxLevels = this.spans.length - 1;
    this.moveTo(this.currentTick);
  }

  get levels(): number {
    return this.levelCount;
  }

  /** For dashboards: rows per slot, and the cursor, per level; 1 per slot past `maxRows` rows. */
  snapshot(maxRows = 100_000): WheelSnapshot {
    const { next } = this.entries;
    let budget = maxRows;
    let truncated = false;
    const count = (group: number, slots: number[], offset: number): void => {
      for (let slot = this.slots.nextOccupied(group, 0); slot >= 0;) {
        let rows = 0;
        for (let index = this.slots.head(this.slots.code(group, slot)); index >= 0;) {
          rows++;
          if (--budget <= 0) {
            truncated = true;
            break;
          }
          index = next[index];
        }
        slots[offset + slot] = rows;
        slot = this.slots.nextOccupied(group, slot + 1);
      }
    };
    const size = this.wheelSize;
    const block = this.blockOf(this.currentTick);
    const first = new Array<number>(2 * size).fill(0);
    count(parity(block), first, 0);
    count(parity(block + 1), first, size);
    const levels: WheelSnapshot['levels'] = [
      { cursor: this.currentTick - block * size, slots: first },
    ];
    const reference = (block + 1) * size;
    for (let level = 1; level < this.levelCount; level++) {
      const slots = new Array<number>(size).fill(0);
      count(level + 1, slots, 0);
      levels.push({ cursor: this.digit(reference, level), slots });
    }
    return { levels, truncated };
  }

  override idleTo(tick: number): void {
    // Empty, so no slot can hold a row the move would skip, and no level needs cascading.
    if (this.linked === 0 && tick > this.currentTick) this.moveTo(tick);
  }

  insert(index: number, tick: number): void {
    this.entries.tick[index] = tick;
    const current = this.currentTick;
    const at = tick > current ? tick : current;
    const offset = at - this.blockStart;
    const size = this.wheelSize;
    if (offset < 2 * size) {
      // This block or the next, each in its own group; no division: moveTo keeps both figures.
      const inNext = offset >= size;
      const group = inNext ? 1 - this.currentGroup : this.currentGroup;
      this.slots.append(this.slots.code(group, inNext ? offset - size : offset), index);
    } else {
      const level = this.levelFor(at, this.blockStart + size);
      if (level >= this.levelCount) this.addLevels(level + 1, at);
      this.slots.append(this.slots.code(level + 1, this.digit(at, level)), index);
    }
    this.linked++;
  }

  nextDeadline(): number {
    if (this.linked === 0) return Infinity;
    const first = this.nextFirstLevelTick();
    const cascade = this.nextCascade();
    return first < cascade ? first : cascade;
  }

  advance(now: number, onExpire: ExpireCallback, limit = Infinity): number {
    let fired = 0;
    while (this.linked > 0) {
      this.cascadeEntered();
      const cascade = this.nextCascade();
      const first = this.nextFirstLevelTick();
      if (cascade <= first) {
        // Cascaded before (or at the tick of) the next first-level row, so that rows it brings
        // for a tick go ahead of rows a callback at that tick adds (insertion order).
        if (cascade > now) break;
        this.moveTo(cascade);
        continue;
      }
      if (first > now) break;
      this.moveTo(first);
      const block = this.blockOf(first);
      const code = this.slots.code(parity(block), first - block * this.wheelSize);
      // Re-read the head each time: onExpire may cancel or add rows of this very slot.
      for (let index = this.slots.head(code); index >= 0; index = this.slots.head(code)) {
        if (fired >= limit) return fired;
        this.checkNotEarly(index, now);
        this.remove(index);
        fired++;
        if (onExpire(index) === true) return fired;
      }
      this.moveTo(first + 1);
    }
    if (now + 1 > this.currentTick) {
      this.moveTo(Math.floor(now) + 1);
      this.cascadeEntered();
    }
    return fired;
  }

  private moveTo(tick: number): void {
    this.currentTick = tick;
    const block = this.blockOf(tick);
    this.blockStart = block * this.wheelSize;
    this.currentGroup = parity(block);
  }

  private blockOf(tick: number): number {
    return Math.floor(tick / this.wheelSize);
  }

  /** The tick of the first-level slot with rows, from `current` on: this block, then the next. */
  private nextFirstLevelTick(): number {
    const size = this.wheelSize;
    const block = this.blockOf(this.currentTick);
    let slot = this.slots.nextOccupied(parity(block), this.currentTick - block * size);
    if (slot >= 0) return block * size + slot;
    slot = this.slots.nextOccupied(parity(block + 1), 0);
    return slot >= 0 ? (block + 1) * size + slot : Infinity;
  }

  /** When a higher level's next occupied slot is cascaded: as `current` enters the block before. */
  private nextCascade(): number {
    const reference = this.blockStart + this.wheelSize;
    for (let level = 1; level < this.levelCount; level++) {
      const slot = this.slots.nextOccupied(level + 1, this.digit(reference, level) + 1);
      if (slot >= 0) {
        const blockSpan = this.spans[level + 1];
        const start = Math.floor(reference / blockSpan) * blockSpan + slot * this.spans[level];
        return start - this.wheelSize;
      }
    }
    return Infinity;
  }

  /**
   * After `current` moved, cascades each level's slot the next block's start stands in: from the
   * top down, as a cascade from level L can fill the cursor slot of level L - 1.
   */
  private cascadeEntered(): void {
    const reference = this.blockStart + this.wheelSize;
    for (let level = this.levelCount - 1; level > 0; level--) {
      const code = this.slots.code(level + 1, this.digit(reference, level));
      if (this.slots.isOccupied(code)) this.cascade(code);
    }
  }

  /** Re-inserts every row of a slot being entered; each lands on a finer level. */
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

  private digit(tick: number, level: number): number {
    const quotient = Math.floor(tick / this.spans[level]);
    return this.bitsPerLevel > 0 ? quotient & (this.wheelSize - 1) : quotient % this.wheelSize;
  }

  /** The highest level at which `tick` and `reference` differ in digit. */
  private levelFor(tick: number, reference: number): number {
    if (this.bitsPerLevel > 0) {
      // The highest differing bit, over both 32-bit halves, decides the level.
      const highDiff = Math.floor(tick / TWO_POW_32) ^ Math.floor(reference / TWO_POW_32);
      if (highDiff !== 0) return Math.floor((63 - Math.clz32(highDiff)) / this.bitsPerLevel);
      const lowDiff = (tick ^ reference) >>> 0;
      return lowDiff === 0 ? 0 : Math.floor((31 - Math.clz32(lowDiff)) / this.bitsPerLevel);
    }
    let level = 0;
    while (
      Math.floor(tick / this.spans[level + 1]) !== Math.floor(reference / this.spans[level + 1])
    ) {
      level++;
    }
    return level;
  }

  private addLevels(levels: number, tick: number): void {
    if (levels > this.maxLevels) {
      throw new TickwheelRangeError(
        'ERR_TICKWHEEL_INVALID_DELAY',
        `tick ${tick} is beyond the last tick a wheel can hold (${MAX_TICK})`,
      );
    }
    // Groups 0 and 1 are the first level's two blocks; level L >= 1 is group L + 1.
    this.slots.ensureGroups(levels + 1);
    this.levelCount = levels;
  }
}
