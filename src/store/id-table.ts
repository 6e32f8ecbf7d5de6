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
 *   - it grows by half when 80% full (so it stays 53-80% full: 20-30 bytes per live id).
 *
 * Two different ids with the same 64-bit hash are possible in principle (about 3 in 10^6 for a
 * table of 10 million ids). The store resolves them by reading the record the table points at
 * and comparing the id it holds; see FileStore.
 */

const EMPTY = 0;
const DELETED = 0xffffffff;
const TWO_POW_32 = 4294967296;

/** The two halves of the last hash computed (kept in module scope: no allocation per call). */
export let hashLow = 0;
export let hashHigh = 0;

/** Computes the 64-bit hash of an id into `hashLow` / `hashHigh`. */
export function hashId(id: string): void {
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
  finish(a, b, id.length);
}

/**
 * The same hash as hashId, computed from the id's bytes as a record stores them (one byte a
 * character), without making a string: what log replay uses.
 */
export function hashIdBytes(bytes: Uint8Array, start: number, length: number): void {
  let a = 0x811c9dc5;
  let b = 0x9747b28c;
  for (let i = start; i < start + length; i++) {
    const c = bytes[i];
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x5bd1e995);
    b ^= b >>> 15;
  }
  finish(a, b, length);
}

function finish(a: number, b: number, length: number): void {
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
  hashLow = low;
  hashHigh = high;
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

export class IdTable {
  /**
   * Slot i is slots[2i..2i+1]: its first 8 bytes hold the hash (keys[4i] low, keys[4i+1] high,
   * a view of the same memory), the next 8 the value. One slot is one cache-line access, where
   * three parallel arrays took three.
   */
  private slots: Float64Array;
  private keys: Uint32Array;
  private capacitySlots: number;
  /** A second value per entry, kept only while it is switched on (during recovery). */
  private aux: Float64Array | undefined;
  private live = 0;
  private deleted = 0;
  /**
   * A copy being made a piece at a time (see beginCopy): slots below `copied` are in `into`;
   * slots below it that change meanwhile are listed in `dirty` and copied again at the end.
   */
  private copying: { into: Float64Array; copied: number; dirty: number[] } | undefined;

  constructor(initialCapacity = 1024) {
    const capacity = Math.max(16, Math.ceil(initialCapacity / 0.8));
    this.slots = new Float64Array(capacity * 2);
    this.keys = new Uint32Array(this.slots.buffer);
    this.capacitySlots = capacity;
  }

  get size(): number {
    return this.live;
  }

  get capacity(): number {
    return this.capacitySlots;
  }

  get bytes(): number {
    return this.capacitySlots * (this.aux === undefined ? 16 : 24);
  }

  /** Switches the second value on (8 more bytes a slot) or off. */
  useAux(on: boolean): void {
    this.aux = on ? new Float64Array(this.capacitySlots) : undefined;
  }

  /** The second value stored for a hash, or NaN. */
  getAux(low: number, high: number): number {
    const slot = this.find(low, high);
    return slot < 0 || this.aux === undefined ? NaN : this.aux[slot];
  }

  /** The value stored for a hash, or -1. */
  get(low: number, high: number): number {
    const slot = this.find(low, high);
    return slot < 0 ? -1 : this.slots[2 * slot + 1];
  }

  /** Stores a value (>= 0) for a hash, replacing any earlier one. */
  set(low: number, high: number, value: number, aux = NaN): void {
    const existing = this.find(low, high);
    if (existing >= 0) {
      this.changed(existing);
      this.slots[2 * existing + 1] = value;
      if (this.aux !== undefined) this.aux[existing] = aux;
      return;
    }
    this.add(low, high, value, aux);
  }

  /**
   * Stores a value for a hash that is not in the table yet, in one probe sequence; returns false
   * (and changes nothing) when the hash is already there.
   */
  add(low: number, high: number, value: number, aux = NaN): boolean {
    if (this.live + this.deleted + 1 > this.capacitySlots * 0.8) this.resize();
    const keys = this.keys;
    const capacity = this.capacitySlots;
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
      this.deleted--;
    }
    this.place(slot, low, high, value, aux);
    return true;
  }

  /** Makes room for `count` entries at once (avoids repeated growth when the count is known). */
  reserve(count: number): void {
    if (count / 0.8 <= this.capacitySlots) return;
    this.rehash(Math.ceil(count / 0.7));
  }

  /** Removes a hash; true if it was there. */
  delete(low: number, high: number): boolean {
    const slot = this.find(low, high);
    if (slot < 0) return false;
    this.changed(slot);
    this.keys[4 * slot] = DELETED;
    this.keys[4 * slot + 1] = DELETED;
    this.slots[2 * slot + 1] = 0;
    this.live--;
    this.deleted++;
    return true;
  }

  /**
   * Starts a copy of the table made a piece at a time (copyStep), so that a large table is
   * copied without one long pause; endCopy() returns the table as it is at that moment.
   */
  beginCopy(): void {
    this.copying = { into: new Float64Array(this.slots.length), copied: 0, dirty: [] };
  }

  /** Copies up to `count` more slots; true once every slot has been copied once. */
  copyStep(count: number): boolean {
    const copying = this.copying;
    if (copying === undefined) return true;
    const end = Math.min(this.capacitySlots, copying.copied + count);
    copying.into.set(this.slots.subarray(2 * copying.copied, 2 * end), 2 * copying.copied);
    copying.copied = end;
    return end === this.capacitySlots;
  }

  /**
   * Finishes the copy begun by beginCopy(): copies what is left and the slots that changed
   * since they were copied. Undefined if a rehash voided it (or none was begun).
   */
  endCopy(): IdTableArrays | undefined {
    const copying = this.copying;
    this.copying = undefined;
    if (copying === undefined) return undefined;
    const { into, dirty } = copying;
    if (copying.copied < this.capacitySlots) {
      into.set(this.slots.subarray(2 * copying.copied), 2 * copying.copied);
    }
    // The hash half goes word by word: as a double it could be a NaN, whose bits a store may
    // canonicalise.
    const intoKeys = new Uint32Array(into.buffer, into.byteOffset, into.length * 2);
    for (const slot of dirty) {
      intoKeys[4 * slot] = this.keys[4 * slot];
      intoKeys[4 * slot + 1] = this.keys[4 * slot + 1];
      into[2 * slot + 1] = this.slots[2 * slot + 1];
    }
    return { slots: into, live: this.live, deleted: this.deleted };
  }

  /** A copy of the table's slots: one memcpy, no per-entry work. */
  copyArrays(): IdTableArrays {
    return { slots: this.slots.slice(), live: this.live, deleted: this.deleted };
  }

  /** Replaces the contents with arrays from copyArrays() (taken over, not copied). */
  adoptArrays(arrays: IdTableArrays): void {
    const { slots } = arrays;
    if (slots.length < 32 || slots.length % 2 !== 0) {
      throw new RangeError('IdTable slots must be an even length of at least 32');
    }
    this.voidCopy();
    this.slots = slots;
    this.keys = new Uint32Array(slots.buffer, slots.byteOffset, slots.length * 2);
    this.capacitySlots = slots.length / 2;
    this.aux = undefined;
    this.live = arrays.live;
    this.deleted = arrays.deleted;
  }

  /** Calls fn(low, high, value, aux) for every entry. */
  forEach(fn: (low: number, high: number, value: number, aux: number) => void): void {
    const { keys, slots, aux } = this;
    for (let slot = 0; slot < this.capacitySlots; slot++) {
      const l = keys[4 * slot];
      const h = keys[4 * slot + 1];
      if ((l === EMPTY && h === EMPTY) || (l === DELETED && h === DELETED)) continue;
      fn(l, h, slots[2 * slot + 1], aux === undefined ? NaN : aux[slot]);
    }
  }

  /** Every slot moves (rehash, adopt): a copy in progress is void. */
  private voidCopy(): void {
    if (this.copying === undefined) return;
    this.copying = undefined;
  }

  /** Notes a change to a slot that a copy in progress has already copied. */
  private changed(slot: number): void {
    const copying = this.copying;
    if (copying !== undefined && slot < copying.copied) copying.dirty.push(slot);
  }

  private place(slot: number, low: number, high: number, value: number, aux: number): void {
    this.changed(slot);
    this.keys[4 * slot] = low;
    this.keys[4 * slot + 1] = high;
    this.slots[2 * slot + 1] = value;
    if (this.aux !== undefined) this.aux[slot] = aux;
    this.live++;
  }

  private find(low: number, high: number): number {
    const keys = this.keys;
    const capacity = this.capacitySlots;
    let slot = home(low, capacity);
    while (true) {
      const l = keys[4 * slot];
      const h = keys[4 * slot + 1];
      if (l === low && h === high) return slot;
      if (l === EMPTY && h === EMPTY) return -1;
      slot = slot + 1 === capacity ? 0 : slot + 1;
    }
  }

  /** Grows by half when more than half full, else only clears out deleted slots. */
  private resize(): void {
    const grow = this.live + 1 > this.capacitySlots * 0.5;
    this.rehash(grow ? Math.ceil(this.capacitySlots * 1.5) : this.capacitySlots);
  }

  /** Moves every entry into a table of `capacity` slots (entries are distinct: no lookups). */
  private rehash(capacity: number): void {
    this.voidCopy();
    const oldKeys = this.keys;
    const oldSlots = this.slots;
    const oldAux = this.aux;
    const oldCapacity = this.capacitySlots;
    this.slots = new Float64Array(capacity * 2);
    this.keys = new Uint32Array(this.slots.buffer);
    this.capacitySlots = capacity;
    if (oldAux !== undefined) this.aux = new Float64Array(capacity);
    this.live = 0;
    this.deleted = 0;
    const keys = this.keys;
    for (let old = 0; old < oldCapacity; old++) {
      const l = oldKeys[4 * old];
      const h = oldKeys[4 * old + 1];
      if ((l === EMPTY && h === EMPTY) || (l === DELETED && h === DELETED)) continue;
      let slot = home(l, capacity);
      while (keys[4 * slot] !== EMPTY || keys[4 * slot + 1] !== EMPTY) {
        slot = slot + 1 === capacity ? 0 : slot + 1;
      }
      this.place(slot, l, h, oldSlots[2 * old + 1], oldAux === undefined ? NaN : oldAux[old]);
    }
  }
}

/** Multiply-shift maps the hash onto any capacity, not only powers of two. */
function home(low: number, capacity: number): number {
  return Math.floor((low / TWO_POW_32) * capacity);
}
