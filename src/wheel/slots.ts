/**
 * The slots of a wheel: for every slot, a doubly-linked list of entries (threaded through the
 * entry store's `next`/`prev` arrays) and one occupancy bit.
 *
 * A slot is named by a code. Lists carry no sentinel rows; instead the ends of a list name
 * their slot: the head's `prev` is `~code` and the tail's `next` is `~code` (both negative,
 * since row indices are >= 0). Unlinking a row therefore needs no per-row slot field: the
 * neighbours it already points at say which slot's head or tail to move, and a row whose `prev`
 * and `next` are both negative was the only one in its slot, which is now empty.
 *
 * Occupancy bits live in 32-bit words. Codes are laid out as `group * stride + slot` where
 * `stride` is the group size rounded up to 32, so one word never mixes two groups (levels) and a
 * search for the next occupied slot of a group is a scan of a few words with `Math.clz32`.
 */

import { DETACHED, grown, type EntryStore } from './entries.js';

const EMPTY = -1;

export class SlotTable {
  /** First row of each slot's list, or negative when the slot is empty. */
  private heads: Int32Array;
  /** Last row of each slot's list, or negative when the slot is empty. */
  private tails: Int32Array;
  private occupied: Uint32Array;
  /** Codes per group, a multiple of 32. */
  readonly stride: number;

  constructor(
    private readonly entries: EntryStore,
    /** Slots per group (the wheel size). */
    readonly groupSize: number,
    groups = 1,
  ) {
    this.stride = Math.ceil(groupSize / 32) * 32;
    this.heads = new Int32Array(groups * this.stride).fill(EMPTY);
    this.tails = new Int32Array(groups * this.stride).fill(EMPTY);
    this.occupied = new Uint32Array((groups * this.stride) >>> 5);
  }

  get groups(): number {
    return this.heads.length / this.stride;
  }

  /** Adds empty groups until there are `groups` of them. */
  ensureGroups(groups: number): void {
    if (groups <= this.groups) return;
    const size = groups * this.stride;
    this.heads = grown(this.heads, size, EMPTY);
    this.tails = grown(this.tails, size, EMPTY);
    this.occupied = grown(this.occupied, size >>> 5);
  }

  code(group: number, slot: number): number {
    return group * this.stride + slot;
  }

  /** Appends a detached row at the tail of a slot, keeping insertion order within the slot. */
  append(code: number, index: number): void {
    const { next, prev } = this.entries;
    const tail = this.tails[code];
    if (tail < 0) {
      this.heads[code] = index;
      prev[index] = ~code;
      this.occupied[code >>> 5] |= 1 << (code & 31);
    } else {
      next[tail] = index;
      prev[index] = tail;
    }
    next[index] = ~code;
    this.tails[code] = index;
  }

  /** Removes a linked row from its slot; the row becomes DETACHED. */
  unlink(index: number): void {
    const { next, prev } = this.entries;
    const before = prev[index];
    const after = next[index];
    if (before >= 0) next[before] = after;
    else this.heads[~before] = after;
    if (after >= 0) prev[after] = before;
    else this.tails[~after] = before;
    if (before < 0 && after < 0) {
      const code = ~before;
      this.occupied[code >>> 5] &= ~(1 << (code & 31));
    }
    prev[index] = DETACHED;
  }

  /** First row of a slot, or a negative number when it is empty. */
  head(code: number): number {
    return this.heads[code];
  }

  /**
   * Empties a slot and returns its first row; the rest follow through `next` until a negative
   * value. The rows keep stale links: the caller must append or release every one of them.
   */
  takeAll(code: number): number {
    const first = this.heads[code];
    this.heads[code] = EMPTY;
    this.tails[code] = EMPTY;
    this.occupied[code >>> 5] &= ~(1 << (code & 31));
    return first;
  }

  isOccupied(code: number): boolean {
    return (this.occupied[code >>> 5] & (1 << (code & 31))) !== 0;
  }

  /**
   * The first occupied slot of a group at or after `from` (0 <= from), as a slot number within
   * the group, or -1 when none is. Visits one word per 32 slots, never one slot at a time.
   */
  nextOccupied(group: number, from: number): number {
    if (from >= this.groupSize) return -1;
    const base = group * this.stride;
    let word = (base + from) >>> 5;
    const lastWord = (base + this.groupSize - 1) >>> 5;
    // Bits below `from` in the first word are masked off.
    let bits = this.occupied[word] & (~0 << (from & 31));
    while (true) {
      if (bits !== 0) {
        const slot = (word << 5) + (31 - Math.clz32(bits & -bits)) - base;
        return slot < this.groupSize ? slot : -1;
      }
      if (++word > lastWord) return -1;
      bits = this.occupied[word];
    }
  }
}
