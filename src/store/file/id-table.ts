/**
 * IdTable: a live message's id -> position of its latest record, the only per-message memory
 * the file store keeps beyond the horizon (docs/storage.md, What is in memory). The key is a
 * 64-bit hash of the id, never the string; linear probing in one typed array of 16-byte slots
 * (hash low, hash high, value); hash (0, 0) marks an empty slot and (2^32-1, 2^32-1) a deleted
 * one (ids hashing to either are moved to a neighbour), so no state byte. It grows by half at
 * 80% full, moving entries a few per add. Two live ids with one hash (about 3 in 10^6 at 10
 * million) are told apart by the id in the record it points at (table.ts, FileStore.lookup).
 */

import { assert } from '../../assert.js';

const EMPTY = 0;
const DELETED = 0xffffffff;
const TWO_POW_32 = 4294967296;

/** A 64-bit id hash as two u32 halves, written into by hashId: hashing allocates nothing. */
export class IdHash {
  low = 0;
  high = 0;
}

export function hashId(id: string, into: IdHash): void {
  // FNV-1a for one half, a multiplicative mix for the other; avalanche steps spread similar ids.
  let a = 0x811c9dc5;
  let b = 0x9747b28c;
  for (let i = 0; i < id.length; i++) {
    const c = id.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x5bd1e995);
    b ^= b >>> 15;
  }
  finish(a, b, id.length, into);
}

/** hashId of the id in a record's bytes (one byte a character), without making a string. */
export function hashIdBytes(bytes: Uint8Array, start: number, length: number, into: IdHash): void {
  let a = 0x811c9dc5;
  let b = 0x9747b28c;
  for (let i = start; i < start + length; i++) {
    const c = bytes[i];
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x5bd1e995);
    b ^= b >>> 15;
  }
  finish(a, b, length, into);
}

function finish(a: number, b: number, length: number, into: IdHash): void {
  a ^= a >>> 16;
  a = Math.imul(a, 0x85ebca6b);
  a ^= a >>> 13;
  b ^= length;
  b ^= b >>> 16;
  b = Math.imul(b, 0xc2b2ae35);
  b ^= b >>> 16;
  const low = a >>> 0;
  let high = b >>> 0;
  if (low === EMPTY && high === EMPTY) high = 1;
  if (low === DELETED && high === DELETED) high = DELETED - 1;
  into.low = low;
  into.high = high;
}

/** An IdTable's contents as a snapshot writes them: slots of hash low u32 | high u32 | f64. */
export interface IdTableArrays {
  slots: Float64Array;
  live: number;
  deleted: number;
}

/** One open-addressing table: slot i is slots[2i..2i+1], keys[4i] / keys[4i+1] its hash. */
interface Slots {
  slots: Float64Array;
  keys: Uint32Array;
  capacity: number;
  live: number;
  deleted: number;
  /** While it is the previous table of a growth: the first slot not moved yet. */
  cursor: number;
}

/** Every table has every field (`cursor` too): one object shape keeps the probe optimised. */
function newSlots(capacity: number): Slots {
  const slots = new Float64Array(capacity * 2);
  return { slots, keys: new Uint32Array(slots.buffer), capacity, live: 0, deleted: 0, cursor: 0 };
}

/** Old slots moved into the new table for each entry added while the table grows. */
const GROW_STEP = 32;

export class IdTable {
  private main: Slots;
  /**
   * While the table grows: the previous table, whose entries move into `main` GROW_STEP slots
   * per add (each moved slot becomes a tombstone, keeping the rest's probe chains whole). Every
   * hash is in exactly one of the two.
   */
  private old: Slots | undefined;
  /** A second value per entry, kept only while it is switched on (during recovery). */
  private aux: Float64Array | undefined;
  /** A copy in pieces (beginCopy): slots below `copied` are in `into`; `dirty` changed since. */
  private copying: { into: Float64Array; copied: number; dirty: number[] } | undefined;
  private found = -1;

  constructor(initialCapacity = 1024) {
    this.main = newSlots(Math.max(16, Math.ceil(initialCapacity / 0.8)));
  }

  get size(): number {
    return this.main.live + (this.old?.live ?? 0);
  }

  get bytes(): number {
    const slots = this.main.capacity + (this.old?.capacity ?? 0);
    return slots * 16 + (this.aux === undefined ? 0 : this.main.capacity * 8);
  }

  /** Switches the second value on (8 more bytes a slot) or off. */
  useAux(on: boolean): void {
    this.finishGrowing();
    this.aux = on ? new Float64Array(this.main.capacity) : undefined;
  }

  /** The table that holds a hash, with its slot in `found`; undefined if neither does. */
  private locate(low: number, high: number): Slots | undefined {
    this.found = find(this.main, low, high);
    if (this.found >= 0) return this.main;
    const old = this.old;
    if (old === undefined) return undefined;
    this.found = find(old, low, high);
    return this.found >= 0 ? old : undefined;
  }

  /** The value stored for a hash, or -1. */
  get(low: number, high: number): number {
    const table = this.locate(low, high);
    return table === undefined ? -1 : table.slots[2 * this.found + 1];
  }

  /** Stores a value (>= 0) for a hash, replacing any earlier one. */
  set(low: number, high: number, value: number, aux = NaN): void {
    const table = this.locate(low, high);
    if (table === undefined) {
      this.add(low, high, value, aux);
      return;
    }
    // (The second value is on only while nothing grows: then every hash is in `main`.)
    if (table === this.main) this.changed(this.found);
    if (this.aux !== undefined) this.aux[this.found] = aux;
    table.slots[2 * this.found + 1] = value;
  }

  /** Stores a value for a new hash in one probe sequence; false (no change) if it is there. */
  add(low: number, high: number, value: number, aux = NaN): boolean {
    let main = this.main;
    if (main.live + main.deleted + 1 > main.capacity * 0.8) {
      this.grow();
      main = this.main;
    }
    // Looked for in the old table only now: a growth begun just above made it the old one.
    const old = this.old;
    if (old !== undefined && find(old, low, high) >= 0) return false;
    const keys = main.keys;
    const capacity = main.capacity;
    let slot = home(low, capacity);
    let free = -1;
    while (true) {
      const l = keys[4 * slot];
      const h = keys[4 * slot + 1];
      if (l === low && h === high) return false;
      if (l === EMPTY && h === EMPTY) break;
      if (free < 0 && l === DELETED && h === DELETED) free = slot;
      slot = slot + 1 === capacity ? 0 : slot + 1;
    }
    if (free >= 0) {
      slot = free;
      main.deleted--;
    }
    this.place(slot, low, high, value, aux);
    if (this.old !== undefined) this.moveOld(GROW_STEP);
    return true;
  }

  reserve(count: number): void {
    this.finishGrowing();
    if (count / 0.8 <= this.main.capacity) return;
    this.rehash(Math.ceil(count / 0.7));
  }

  /** Removes a hash, returning its value or -1: get and delete in one probe (a FINISH's). */
  remove(low: number, high: number): number {
    const table = this.locate(low, high);
    if (table === undefined) return -1;
    const value = table.slots[2 * this.found + 1];
    if (table === this.main) this.changed(this.found);
    bury(table, this.found);
    return value;
  }

  delete(low: number, high: number): boolean {
    return this.remove(low, high) >= 0;
  }

  /** Moves up to `count` slots of a growth in progress; true once none is left. */
  growStep(count: number): boolean {
    if (this.old !== undefined) this.moveOld(count);
    return this.old === undefined;
  }

  /**
   * Starts a copy made a piece at a time (copyStep), without one long pause; endCopy() returns
   * the table as it is then. A growth in progress is finished first (see growStep).
   */
  beginCopy(): void {
    this.finishGrowing();
    this.copying = { into: new Float64Array(this.main.slots.length), copied: 0, dirty: [] };
  }

  /** Copies up to `count` more slots; true once every slot has been copied once. */
  copyStep(count: number): boolean {
    const copying = this.copying;
    if (copying === undefined) return true;
    const { slots, capacity } = this.main;
    const end = Math.min(capacity, copying.copied + count);
    copying.into.set(slots.subarray(2 * copying.copied, 2 * end), 2 * copying.copied);
    copying.copied = end;
    return end === capacity;
  }

  /** Ends the copy with the rest and the dirty slots; undefined if it grew meanwhile or none. */
  endCopy(): IdTableArrays | undefined {
    const copying = this.copying;
    this.copying = undefined;
    if (copying === undefined) return undefined;
    const { into, dirty } = copying;
    const main = this.main;
    if (copying.copied < main.capacity) {
      into.set(main.slots.subarray(2 * copying.copied), 2 * copying.copied);
    }
    // Hashes go word by word: as a double one could be a NaN, whose bits a store may change.
    const intoKeys = new Uint32Array(into.buffer, into.byteOffset, into.length * 2);
    for (const slot of dirty) {
      intoKeys[4 * slot] = main.keys[4 * slot];
      intoKeys[4 * slot + 1] = main.keys[4 * slot + 1];
      into[2 * slot + 1] = main.slots[2 * slot + 1];
    }
    return { slots: into, live: main.live, deleted: main.deleted };
  }

  /** Replaces the contents with arrays from endCopy() (taken over, not copied). */
  adoptArrays(arrays: IdTableArrays): void {
    const { slots } = arrays;
    // A snapshot's table has at least 16 slots (snapshot.ts refuses fewer).
    assert(
      slots.length >= 32 && slots.length % 2 === 0,
      () => `IdTable slots must be an even length of at least 32, got ${slots.length}`,
    );
    this.copying = undefined;
    this.old = undefined;
    const keys = new Uint32Array(slots.buffer, slots.byteOffset, slots.length * 2);
    const capacity = slots.length / 2;
    this.main = { slots, keys, capacity, live: arrays.live, deleted: arrays.deleted, cursor: 0 };
    this.aux = undefined;
  }

  forEach(fn: (low: number, high: number, value: number, aux: number) => void): void {
    this.finishGrowing();
    const { keys, slots, capacity } = this.main;
    const aux = this.aux;
    for (let slot = 0; slot < capacity; slot++) {
      const l = keys[4 * slot];
      const h = keys[4 * slot + 1];
      if ((l === EMPTY && h === EMPTY) || (l === DELETED && h === DELETED)) continue;
      fn(l, h, slots[2 * slot + 1], aux === undefined ? NaN : aux[slot]);
    }
  }

  /** Notes a change to a slot of `main` that a copy in progress has already copied. */
  private changed(slot: number): void {
    const copying = this.copying;
    if (copying !== undefined && slot < copying.copied) copying.dirty.push(slot);
  }

  private place(slot: number, low: number, high: number, value: number, aux: number): void {
    this.changed(slot);
    const main = this.main;
    main.keys[4 * slot] = low;
    main.keys[4 * slot + 1] = high;
    main.slots[2 * slot + 1] = value;
    if (this.aux !== undefined) this.aux[slot] = aux;
    main.live++;
  }

  /**
   * At 80% full (live and tombstones) a new table takes over: half as big again if more than
   * half is live, else as big (clearing tombstones). Entries move GROW_STEP per add, or all at
   * once while the second value is on (recovery).
   */
  private grow(): void {
    this.finishGrowing();
    const live = this.main.live;
    const capacity =
      live + 1 > this.main.capacity * 0.5
        ? Math.ceil(this.main.capacity * 1.5)
        : this.main.capacity;
    if (this.aux !== undefined) {
      this.rehash(capacity);
      return;
    }
    this.copying = undefined; // every slot moves: a copy in progress is void
    this.old = this.main;
    this.old.cursor = 0;
    this.main = newSlots(capacity);
  }

  private moveOld(count: number): void {
    const old = this.old as Slots;
    const end = Math.min(old.capacity, old.cursor + count);
    for (let slot = old.cursor; slot < end; slot++) {
      const l = old.keys[4 * slot];
      const h = old.keys[4 * slot + 1];
      if ((l === EMPTY && h === EMPTY) || (l === DELETED && h === DELETED)) continue;
      this.insertNew(l, h, old.slots[2 * slot + 1], NaN);
      bury(old, slot);
    }
    old.cursor = end;
    if (end === old.capacity) this.old = undefined;
  }

  private finishGrowing(): void {
    if (this.old !== undefined) this.moveOld(Infinity);
  }

  /** Inserts a hash known to be in neither table, without looking for it first. */
  private insertNew(low: number, high: number, value: number, aux: number): void {
    const { keys, capacity } = this.main;
    let slot = home(low, capacity);
    while (keys[4 * slot] !== EMPTY || keys[4 * slot + 1] !== EMPTY) {
      slot = slot + 1 === capacity ? 0 : slot + 1;
    }
    this.place(slot, low, high, value, aux);
  }

  /** Moves every entry into a table of `capacity` slots at once (entries are distinct). */
  private rehash(capacity: number): void {
    this.finishGrowing();
    this.copying = undefined;
    const previous = this.main;
    const oldAux = this.aux;
    this.main = newSlots(capacity);
    if (oldAux !== undefined) this.aux = new Float64Array(capacity);
    const { keys, slots } = previous;
    for (let old = 0; old < previous.capacity; old++) {
      const l = keys[4 * old];
      const h = keys[4 * old + 1];
      if ((l === EMPTY && h === EMPTY) || (l === DELETED && h === DELETED)) continue;
      this.insertNew(l, h, slots[2 * old + 1], oldAux === undefined ? NaN : oldAux[old]);
    }
  }
}

function find(table: Slots, low: number, high: number): number {
  const { keys, capacity } = table;
  let slot = home(low, capacity);
  while (true) {
    const l = keys[4 * slot];
    const h = keys[4 * slot + 1];
    if (l === low && h === high) return slot;
    if (l === EMPTY && h === EMPTY) return -1;
    slot = slot + 1 === capacity ? 0 : slot + 1;
  }
}

function bury(table: Slots, slot: number): void {
  table.keys[4 * slot] = DELETED;
  table.keys[4 * slot + 1] = DELETED;
  table.slots[2 * slot + 1] = 0;
  table.live--;
  table.deleted++;
}

/** Multiply-shift maps the hash onto any capacity, not only powers of two. */
function home(low: number, capacity: number): number {
  return Math.floor((low / TWO_POW_32) * capacity);
}
