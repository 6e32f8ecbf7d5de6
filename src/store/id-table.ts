/**
 * IdTable: message id -> log position of the message's latest record, for every live message,
 * in about 16 bytes per slot. It is the only per-message memory the file store keeps for
 * messages beyond the near horizon, so it is built for size, not generality:
 *
 *   - the key is a 64-bit hash of the id (two independent 32-bit hashes), never the string;
 *   - open addressing with linear probing in three typed arrays (hash low, hash high, value);
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

/** An IdTable's contents as its three arrays (the file store's snapshot writes them as they are). */
export interface IdTableArrays {
  low: Uint32Array;
  high: Uint32Array;
  value: Float64Array;
  live: number;
  deleted: number;
}

export class IdTable {
  private low: Uint32Array;
  private high: Uint32Array;
  private value: Float64Array;
  /** A second value per entry, kept only while it is switched on (during recovery). */
  private aux: Float64Array | undefined;
  private live = 0;
  private deleted = 0;

  constructor(initialCapacity = 1024) {
    const capacity = Math.max(16, Math.ceil(initialCapacity / 0.8));
    this.low = new Uint32Array(capacity);
    this.high = new Uint32Array(capacity);
    this.value = new Float64Array(capacity);
  }

  get size(): number {
    return this.live;
  }

  get capacity(): number {
    return this.low.length;
  }

  get bytes(): number {
    return this.low.length * (this.aux === undefined ? 16 : 24);
  }

  /** Switches the second value on (8 more bytes a slot) or off. */
  useAux(on: boolean): void {
    this.aux = on ? new Float64Array(this.low.length) : undefined;
  }

  /** The second value stored for a hash, or NaN. */
  getAux(low: number, high: number): number {
    const slot = this.find(low, high);
    return slot < 0 || this.aux === undefined ? NaN : this.aux[slot];
  }

  /** The value stored for a hash, or -1. */
  get(low: number, high: number): number {
    const slot = this.find(low, high);
    return slot < 0 ? -1 : this.value[slot];
  }

  /** Stores a value (>= 0) for a hash, replacing any earlier one. */
  set(low: number, high: number, value: number, aux = NaN): void {
    const existing = this.find(low, high);
    if (existing >= 0) {
      this.value[existing] = value;
      if (this.aux !== undefined) this.aux[existing] = aux;
      return;
    }
    if (this.live + this.deleted + 1 > this.low.length * 0.8) this.resize();
    const mask = this.low.length;
    let slot = this.home(low, mask);
    while (true) {
      const l = this.low[slot];
      const h = this.high[slot];
      if ((l === EMPTY && h === EMPTY) || (l === DELETED && h === DELETED)) {
        if (l === DELETED) this.deleted--;
        this.low[slot] = low;
        this.high[slot] = high;
        this.value[slot] = value;
        if (this.aux !== undefined) this.aux[slot] = aux;
        this.live++;
        return;
      }
      slot = slot + 1 === mask ? 0 : slot + 1;
    }
  }

  /**
   * Stores a value for a hash that is not in the table yet, in one probe sequence; returns false
   * (and changes nothing) when the hash is already there.
   */
  add(low: number, high: number, value: number, aux = NaN): boolean {
    if (this.live + this.deleted + 1 > this.low.length * 0.8) this.resize();
    const capacity = this.low.length;
    let slot = this.home(low, capacity);
    let free = -1;
    while (true) {
      const l = this.low[slot];
      const h = this.high[slot];
      if (l === low && h === high) return false;
      if (l === EMPTY && h === EMPTY) break;
      if (free < 0 && l === DELETED && h === DELETED) free = slot;
      slot = slot + 1 === capacity ? 0 : slot + 1;
    }
    if (free >= 0) {
      slot = free;
      this.deleted--;
    }
    this.low[slot] = low;
    this.high[slot] = high;
    this.value[slot] = value;
    if (this.aux !== undefined) this.aux[slot] = aux;
    this.live++;
    return true;
  }

  /** Makes room for `count` entries at once (avoids repeated growth when the count is known). */
  reserve(count: number): void {
    if (count / 0.8 <= this.low.length) return;
    const old = { low: this.low, high: this.high, value: this.value, aux: this.aux };
    const capacity = Math.ceil(count / 0.7);
    this.low = new Uint32Array(capacity);
    this.high = new Uint32Array(capacity);
    this.value = new Float64Array(capacity);
    if (old.aux !== undefined) this.aux = new Float64Array(capacity);
    this.live = 0;
    this.deleted = 0;
    for (let slot = 0; slot < old.low.length; slot++) {
      const l = old.low[slot];
      const h = old.high[slot];
      if ((l === EMPTY && h === EMPTY) || (l === DELETED && h === DELETED)) continue;
      this.add(l, h, old.value[slot], old.aux === undefined ? NaN : old.aux[slot]);
    }
  }

  /** Removes a hash; true if it was there. */
  delete(low: number, high: number): boolean {
    const slot = this.find(low, high);
    if (slot < 0) return false;
    this.low[slot] = DELETED;
    this.high[slot] = DELETED;
    this.value[slot] = 0;
    this.live--;
    this.deleted++;
    return true;
  }

  /** A copy of the table's arrays: one memcpy each, no per-entry work. */
  copyArrays(): IdTableArrays {
    return {
      low: this.low.slice(),
      high: this.high.slice(),
      value: this.value.slice(),
      live: this.live,
      deleted: this.deleted,
    };
  }

  /** Replaces the contents with arrays from copyArrays() (taken over, not copied). */
  adoptArrays(arrays: IdTableArrays): void {
    const { low, high, value } = arrays;
    if (low.length < 16 || high.length !== low.length || value.length !== low.length) {
      throw new RangeError('IdTable arrays must have one common length of at least 16');
    }
    this.low = low;
    this.high = high;
    this.value = value;
    this.aux = undefined;
    this.live = arrays.live;
    this.deleted = arrays.deleted;
  }

  /** Calls fn(low, high, value, aux) for every entry. */
  forEach(fn: (low: number, high: number, value: number, aux: number) => void): void {
    for (let slot = 0; slot < this.low.length; slot++) {
      const l = this.low[slot];
      const h = this.high[slot];
      if ((l === EMPTY && h === EMPTY) || (l === DELETED && h === DELETED)) continue;
      fn(l, h, this.value[slot], this.aux === undefined ? NaN : this.aux[slot]);
    }
  }

  private home(low: number, capacity: number): number {
    // Multiply-shift maps the hash onto any capacity, not only powers of two.
    return Math.floor((low / TWO_POW_32) * capacity);
  }

  private find(low: number, high: number): number {
    const capacity = this.low.length;
    let slot = this.home(low, capacity);
    while (true) {
      const l = this.low[slot];
      const h = this.high[slot];
      if (l === low && h === high) return slot;
      if (l === EMPTY && h === EMPTY) return -1;
      slot = slot + 1 === capacity ? 0 : slot + 1;
    }
  }

  private resize(): void {
    const oldLow = this.low;
    const oldHigh = this.high;
    const oldValue = this.value;
    const oldAux = this.aux;
    const grow = this.live + 1 > oldLow.length * 0.5;
    const capacity = grow ? Math.ceil(oldLow.length * 1.5) : oldLow.length;
    this.low = new Uint32Array(capacity);
    this.high = new Uint32Array(capacity);
    this.value = new Float64Array(capacity);
    if (oldAux !== undefined) this.aux = new Float64Array(capacity);
    this.live = 0;
    this.deleted = 0;
    for (let slot = 0; slot < oldLow.length; slot++) {
      const l = oldLow[slot];
      const h = oldHigh[slot];
      if ((l === EMPTY && h === EMPTY) || (l === DELETED && h === DELETED)) continue;
      this.set(l, h, oldValue[slot], oldAux === undefined ? NaN : oldAux[slot]);
    }
  }
}
