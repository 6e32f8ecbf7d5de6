/**
 * The slots of a wheel: per slot, a doubly-linked list of rows (through the entry store's
 * `next`/`prev`) and an occupancy bit.
 *
 * A slot is named by a code. Lists have no sentinels: the head's `prev` and the tail's `next` are
 * `~code` (negative, as rows are >= 0), so unlinking needs no per-row slot field, and a row with
 * both negative was alone in its slot. Codes are `group * stride + slot`, with the stride the
 * group size rounded up to 32: an occupancy word never mixes two groups (levels), and the next
 * occupied slot is a scan of a few words with `Math.clz32`.
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
   * Empties a slot and returns its first row (the rest follow through `next`); the rows keep
   * stale links, so the caller must append or release every one.
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

  /** The first occupied slot of a group at or after `from` (>= 0), or -1; one word per 32 slots. */
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
