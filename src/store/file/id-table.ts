/**
 * IdTable: message id -> log position of the message's latest record, for every live message,
 * in about 16 bytes per slot. It is the only per-message memory the file store keeps for
 * messages beyond the near horizon, so it is built for size, not generality:
 *
 *   - the key is a 64-bit hash of the id (two independent 32-bit hashes), never the string;
 *   - open addressing with linear probing in one typed array, 16 bytes a slot (hash low, hash
 *     high, value side by side: one memory access a probe);
 *   - the hash (0, 0) marks an empty slot and (2^32-1, 2^32-1) a deleted one; ids that hash to
 *     either are moved to a neighbouring value, so no per-slot state byte is needed;
 *   - it grows by half when 80% full (so it stays 53-80% full: 20-30 bytes per live id), moving
 *     the entries into the bigger table a few per add rather than all at once.
 *
 * Two different ids with the same 64-bit hash are possible in principle (about 3 in 10^6 for a
 * table of 10 million ids). The store resolves them by reading the record the table points at
 * and comparing the id it holds; see Tables (table.ts) and FileStore.lookup.
 */

import { assert } from '../../assert.js';

const EMPTY = 0;
const DELETED = 0xffffffff;
const TWO_POW_32 = 4294967296;

/**
 * A 64-bit id hash as two unsigned 32-bit halves. The caller owns one and hashId / hashIdBytes
 * write into it, so hashing allocates nothing (returning a pair would allocate one per call,
 * on the path every record takes).
 */
export class IdHash {
  low = 0;
  high = 0;
}

/** Computes the 64-bit hash of an id into `into`. */
export function hashId(id: string, into: IdHash): void {
  // FNV-1a for one half and a multiplicative mix with another seed for the other; each
  // finalised with an avalanche step so that similar ids spread.
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

/**
 * The same hash as hashId, computed from the id's bytes as a record stores them (one byte a
 * character), without making a string: what log replay uses.
 */
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

/**
 * An IdTable's contents: its slot array as it is (the file store's snapshot writes it as it
 * is), 16 bytes a slot: hash low u32 | hash high u32 | value f64.
 */
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
  /** Live entries in this table. */
  live: number;
  /** Tombstones (deleted slots) in this table. */
  deleted: number;
  /** While it is the previous table of a growth: the first slot not moved yet. */
  cursor: number;
}

/**
 * Every table has the same fields from the start (`cursor` too), so the code that probes them
 * sees one object shape: a table given its cursor only when it became the old one was a second
 * shape, and the optimised probe deoptimised the first time it met it.
 */
function newSlots(capacity: number): Slots {
  const slots = new Float64Array(capacity * 2);
  return {
    slots,
    keys: new Uint32Array(slots.buffer),
    capacity,
    live: 0,
    deleted: 0,
    cursor: 0,
  };
}

/** Old slots moved into the new table for each entry added while the table grows. */
const GROW_STEP = 32;

export class IdTable {
  /**
   * The table. Slot i is slots[2i..2i+1]: its first 8 bytes hold the hash (keys[4i] low,
   * keys[4i+1] high, a view of the same memory), the next 8 the value. One slot is one
   * cache-line access, where three parallel arrays took three.
   */
  private main: Slots;
  /**
   * While the table grows: the previous table, whose entries move into `main` GROW_STEP slots
   * per add (from `cursor` on; each moved slot becomes a tombstone there, so the probe chains
   * of the rest stay whole), instead of all at once in one long pause. Every hash is in
   * exactly one of the two.
   */
  private old: Slots | undefined;
  /** A second value per entry, kept only while it is switched on (during recovery). */
  private aux: Float64Array | undefined;
  /**
   * A copy being made a piece at a time (see beginCopy): slots below `copied` are in `into`;
   * slots below it that change meanwhile are listed in `dirty` and copied again at the end.
   */
  private copying: { into: Float64Array; copied: number; dirty: number[] } | undefined;

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

  /** The value stored for a hash, or -1. */
  get(low: number, high: number): number {
    const slot = find(this.main, low, high);
    if (slot >= 0) return this.main.slots[2 * slot + 1];
    const old = this.old;
    if (old === undefined) return -1;
    const oldSlot = find(old, low, high);
    return oldSlot < 0 ? -1 : old.slots[2 * oldSlot + 1];
  }

  /** Stores a value (>= 0) for a hash, replacing any earlier one. */
  set(low: number, high: number, value: number, aux = NaN): void {
    const slot = find(this.main, low, high);
    if (slot >= 0) {
      this.changed(slot);
      this.main.slots[2 * slot + 1] = value;
      if (this.aux !== undefined) this.aux[slot] = aux;
      return;
    }
    const old = this.old;
    const oldSlot = old === undefined ? -1 : find(old, low, high);
    if (old !== undefined && oldSlot >= 0) {
      old.slots[2 * oldSlot + 1] = value;
      return;
    }
    this.add(low, high, value, aux);
  }

  /**
   * Stores a value for a hash that is not in the table yet, in one probe sequence; returns false
   * (and changes nothing) when the hash is already there.
   */
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

  /** Makes room for `count` entries at once (avoids repeated growth when the count is known). */
  reserve(count: number): void {
    this.finishGrowing();
    if (count / 0.8 <= this.main.capacity) return;
    this.rehash(Math.ceil(count / 0.7));
  }

  /**
   * Removes a hash and returns the value it had, or -1 if it was not there: get() and delete()
   * in one probe sequence (a FINISH does both, and the probe is mostly a cache miss, ~60 ns).
   */
  remove(low: number, high: number): number {
    const main = this.main;
    const slot = find(main, low, high);
    if (slot >= 0) {
      const value = main.slots[2 * slot + 1];
      this.changed(slot);
      bury(main, slot);
      return value;
    }
    const old = this.old;
    if (old === undefined) return -1;
    const oldSlot = find(old, low, high);
    if (oldSlot < 0) return -1;
    const value = old.slots[2 * oldSlot + 1];
    bury(old, oldSlot);
    return value;
  }

  /** Removes a hash; true if it was there. */
  delete(low: number, high: number): boolean {
    const main = this.main;
    const slot = find(main, low, high);
    if (slot >= 0) {
      this.changed(slot);
      bury(main, slot);
      return true;
    }
    const old = this.old;
    if (old === undefined) return false;
    const oldSlot = find(old, low, high);
    if (oldSlot < 0) return false;
    bury(old, oldSlot);
    return true;
  }

  /**
   * Moves up to `count` slots' entries of a growth in progress into the new table (callers
   * with time to spare finish it sooner than adds alone would); true once none is left.
   */
  growStep(count: number): boolean {
    if (this.old !== undefined) this.moveOld(count);
    return this.old === undefined;
  }

  /**
   * Starts a copy of the table made a piece at a time (copyStep), so that a large table is
   * copied without one long pause; endCopy() returns the table as it is at that moment. Any
   * growth in progress is finished first (callers avoid that pause with growStep).
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

  /**
   * Finishes the copy begun by beginCopy(): copies what is left and the slots that changed
   * since they were copied. Undefined if the table started growing meanwhile (every slot
   * moves), or if no copy was begun.
   */
  endCopy(): IdTableArrays | undefined {
    const copying = this.copying;
    this.copying = undefined;
    if (copying === undefined) return undefined;
    const { into, dirty } = copying;
    const main = this.main;
    if (copying.copied < main.capacity) {
      into.set(main.slots.subarray(2 * copying.copied), 2 * copying.copied);
    }
    // The hash half goes word by word: as a double it could be a NaN, whose bits a store may
    // canonicalise.
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

  /** Calls fn(low, high, value, aux) for every entry. */
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
   * The table is 80 % full (live and tombstones): a bigger one (by half, when more than half
   * of it is live; else as big, to clear out tombstones) takes over. Entries move into it
   * GROW_STEP slots per add: the new table has room for them all and for the adds meanwhile.
   * While the second value is on (recovery, a batch job) it all moves at once.
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

  /** Moves the entries of up to `count` old slots into `main`. */
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

/** Turns a live slot into a tombstone. */
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
