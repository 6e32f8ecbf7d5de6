/**
 * The wheels' rows: a struct-of-arrays slab (20 bytes a timer, no allocation once grown, nothing
 * for the GC to trace), recycled through a free list threaded through `next`. A handle is
 * `generation * 2^28 + index`; the generation is bumped when a row is taken again (not on
 * release: a cache line less per expiration), so a stale handle is inert. A row whose 2^25 - 1
 * generations are used up is retired. Rows at or above `highWater` are never read before use.
 *
 * Row states, told apart by `prev`: >= 0, or negative above DETACHED, linked into a slot list;
 * DETACHED, in no slot; PENDING, waiting in a driver for a clock reading; FREE.
 */

import { TickwheelRangeError } from '../errors.js';

/** Rows per slab at most: 2^28 (268 million timers), so a handle fits in 2^53. */
export const INDEX_BITS = 28;
const INDEX_SPACE = 2 ** INDEX_BITS;
const INDEX_SCALE = 1 / INDEX_SPACE;
/** Generations run 1 .. 2^25-1 so that no handle is ever 0 and every handle is a safe integer. */
const GENERATION_LIMIT = 2 ** (53 - INDEX_BITS);

export const FREE = -0x80000000;
export const DETACHED = -0x7fffffff;
/** Pending in no slot, its delay in `tick`, until its driver reads the clock (WheelDriver.add). */
export const PENDING = -0x7ffffffe;
/** End of the free list. */
const NIL = -1;

export class EntryStore {
  tick: Float64Array;
  next: Int32Array;
  prev: Int32Array;
  generation: Uint32Array;
  /** Rows not free. */
  live = 0;
  private freeHead = NIL;
  private highWater = 0;
  private readonly growListeners: Array<(capacity: number) => void> = [];

  constructor(initialCapacity = 1024) {
    const capacity = Math.max(16, 2 ** Math.ceil(Math.log2(Math.max(1, initialCapacity))));
    this.tick = new Float64Array(capacity);
    this.next = new Int32Array(capacity);
    this.prev = new Int32Array(capacity);
    this.generation = new Uint32Array(capacity);
  }

  get capacity(): number {
    return this.tick.length;
  }

  /** For owners of parallel arrays: `listener(newCapacity)` on each growth. */
  onGrow(listener: (capacity: number) => void): void {
    this.growListeners.push(listener);
  }

  /** A free row's index; it starts DETACHED. */
  allocate(): number {
    let index = this.freeHead;
    while (index !== NIL) {
      this.freeHead = this.next[index];
      const generation = this.generation[index] + 1;
      if (generation < GENERATION_LIMIT) {
        this.generation[index] = generation;
        break;
      }
      // Wrapping around would let a handle from its first generation name a new timer: the row
      // is retired (FREE, off the free list).
      index = this.freeHead;
    }
    if (index === NIL) {
      if (this.highWater === this.tick.length) this.grow();
      index = this.highWater++;
      this.generation[index] = 1;
    }
    this.prev[index] = DETACHED;
    this.live++;
    return index;
  }

  /** Every handle that names the row becomes inert (see above). */
  release(index: number): void {
    this.prev[index] = FREE;
    this.next[index] = this.freeHead;
    this.freeHead = index;
    this.live--;
  }

  handleOf(index: number): number {
    return this.generation[index] * INDEX_SPACE + index;
  }

  /** The row a handle names (detached ones too: re-armed from their callback), or -1. */
  indexOf(handle: number): number {
    if (typeof handle !== 'number' || !(handle >= 0)) return -1;
    const generation = Math.floor(handle * INDEX_SCALE);
    const index = handle - generation * INDEX_SPACE;
    if (index >= this.highWater || !Number.isInteger(index)) return -1;
    if (this.generation[index] !== generation || this.prev[index] === FREE) return -1;
    // A small integer like every row index (the subtraction is a float): a float stored as the
    // free list's head would change that field's representation and deoptimise the slab's code.
    return index | 0;
  }

  isLinked(index: number): boolean {
    const prev = this.prev[index];
    return prev !== DETACHED && prev !== FREE;
  }

  private grow(): void {
    const capacity = this.tick.length * 2;
    if (capacity > INDEX_SPACE) {
      throw new TickwheelRangeError(
        'ERR_TICKWHEEL_CAPACITY',
        `a wheel holds at most ${INDEX_SPACE} timers; spread them over several wheels`,
      );
    }
    this.tick = grown(this.tick, capacity);
    this.next = grown(this.next, capacity);
    this.prev = grown(this.prev, capacity);
    this.generation = grown(this.generation, capacity);
    for (const listener of this.growListeners) listener(capacity);
  }
}

type Growable = Float64Array | Int32Array | Uint32Array | Uint8Array | unknown[];

/**
 * A copy of `array` with room for `size` elements, the new ones `fill` (else a typed array's are
 * 0). A plain array is copied element by element: one left to grow by itself overshoots by half.
 */
export function grown<A extends Growable>(array: A, size: number, fill?: number): A {
  if (Array.isArray(array)) {
    const copy = new Array<unknown>(size);
    for (let i = 0; i < array.length; i++) copy[i] = array[i];
    return copy as A;
  }
  const copy = new (array.constructor as new (size: number) => Exclude<A, unknown[]>)(size);
  copy.set(array);
  if (fill !== undefined) copy.fill(fill, array.length);
  return copy as A;
}
