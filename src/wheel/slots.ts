/**
 * A wheel's slots: per slot a doubly-linked list of rows (the entries' `next`/`prev`) and an
 * occupancy bit. A slot's code is `group * stride + slot`, the stride a multiple of 32, so an
 * occupancy word never mixes two groups (levels). Lists have no sentinels: the head's `prev` and
 * the tail's `next` are `~code` (negative), so unlinking needs no per-row slot field.
 */

import { DETACHED, grown, type EntryStore } from './entries.js';

const EMPTY = -1;

export class SlotTable {
  /** First and last row of each slot's list; negative when empty. */
  private heads: Int32Array;
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

  /** Appends a detached row: insertion order within the slot. */
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

  head(code: number): number {
    return this.heads[code];
  }

  /** Empties a slot: its first row, the rest through `next`; each must be appended or released. */
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
