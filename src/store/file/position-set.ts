/**
 * A set of log positions in one Float64Array, not a Set<number>: positions are above 2^31, so
 * V8 boxes them there (~170 ns a delete at 100,000). Linear probing with tombstones; rebuilt
 * past 3/4 full, or under 1/64 of a grown table, so a burst leaves no large table behind.
 * Iteration is in slot order.
 */

const EMPTY = -1;
const DELETED = -2;
const MIN_CAPACITY = 64;
const TWO_POW_32 = 4294967296;

/** Home slot of a position: both halves mixed, so neighbouring offsets spread out. */
function homeOf(position: number, mask: number): number {
  // (No `%` on a double: V8 makes it a call to fmod.)
  const high = Math.floor(position / TWO_POW_32);
  const low = (position - high * TWO_POW_32) | 0;
  let h = Math.imul(low ^ Math.imul(high | 0, 0x9e3779b1), 0x85ebca6b);
  h ^= h >>> 15;
  return h & mask;
}

export class PositionSet {
  private slots: Float64Array;
  private mask: number;
  private live = 0;
  private deleted = 0;

  constructor(positions?: Iterable<number>) {
    this.slots = new Float64Array(MIN_CAPACITY).fill(EMPTY);
    this.mask = MIN_CAPACITY - 1;
    if (positions !== undefined) for (const position of positions) this.add(position);
  }

  get size(): number {
    return this.live;
  }

  has(position: number): boolean {
    return this.find(position) >= 0;
  }

  add(position: number): this {
    if ((this.live + this.deleted + 1) * 4 > this.slots.length * 3) {
      this.rebuild(this.live + 1);
    }
    const slots = this.slots;
    const mask = this.mask;
    let slot = homeOf(position, mask);
    let free = -1;
    while (true) {
      const value = slots[slot];
      if (value === position) return this;
      if (value === EMPTY) break;
      if (free < 0 && value === DELETED) free = slot;
      slot = (slot + 1) & mask;
    }
    if (free >= 0) {
      slots[free] = position;
      this.deleted--;
    } else slots[slot] = position;
    this.live++;
    return this;
  }

  delete(position: number): boolean {
    const slot = this.find(position);
    if (slot < 0) return false;
    this.slots[slot] = DELETED;
    this.live--;
    this.deleted++;
    if (this.live * 64 < this.slots.length && this.slots.length > MIN_CAPACITY) {
      this.rebuild(this.live);
    }
    return true;
  }

  /** The positions in one pass, for a snapshot (the iterator took ~10x as long at a million). */
  toArray(): Float64Array {
    const slots = this.slots;
    const positions = new Float64Array(this.live);
    let count = 0;
    for (let i = 0; i < slots.length; i++) {
      const value = slots[i];
      if (value >= 0) positions[count++] = value;
    }
    return positions;
  }

  *[Symbol.iterator](): IterableIterator<number> {
    // A copy: callers may change the set while they walk it.
    const slots = this.slots.slice();
    for (let i = 0; i < slots.length; i++) if (slots[i] >= 0) yield slots[i];
  }

  private find(position: number): number {
    const slots = this.slots;
    const mask = this.mask;
    let slot = homeOf(position, mask);
    while (true) {
      const value = slots[slot];
      if (value === position) return slot;
      if (value === EMPTY) return -1;
      slot = (slot + 1) & mask;
    }
  }

  /** Moves the positions into a table sized for `live` of them at most 3/8 full. */
  private rebuild(live: number): void {
    let capacity = MIN_CAPACITY;
    while (capacity * 3 < live * 8) capacity *= 2;
    const old = this.slots;
    const slots = new Float64Array(capacity).fill(EMPTY);
    const mask = capacity - 1;
    for (let i = 0; i < old.length; i++) {
      const position = old[i];
      if (position < 0) continue;
      let slot = homeOf(position, mask);
      while (slots[slot] !== EMPTY) slot = (slot + 1) & mask;
      slots[slot] = position;
    }
    this.slots = slots;
    this.mask = mask;
    this.deleted = 0;
  }
}
