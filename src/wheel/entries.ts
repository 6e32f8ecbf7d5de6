/**
 * Entry storage for the wheels: a struct-of-arrays slab.
 *
 * Every timer is a row index into a handful of typed arrays instead of an object, so a pending
 * timer costs a fixed 20 bytes here (tick 8, next 4, prev 4, generation 4), scheduling allocates
 * nothing once the arrays have grown, and the garbage collector never has to trace timers.
 *
 * Rows are recycled through a free list threaded through `next`. A handle given to users is
 * `generation * 2^28 + index`. A released row is FREE, which no handle resolves to, and its
 * generation is bumped when it is taken again, so a handle kept after its timer fired or was
 * cancelled no longer matches and is inert: it can never cancel a later timer that happens to
 * reuse the row. (Bumped on release, the generation was one more cache line each expiration
 * touched, in an expiry storm of timers spread over memory in random order.) A row whose
 * generations are all used up (2^25 - 1 timers) is retired rather than started again at 1.
 *
 * Growing copies the arrays into ones twice the size and writes nothing else: the new half is
 * left as the allocator's zeroed pages, which the kernel maps only when a row there is first
 * used. Rows at or above `highWater` have never been used; their `prev` and `generation` are
 * meaningless (0) and nothing reads them (indexOf refuses such rows), and allocate() gives a
 * fresh row generation 1.
 *
 * Row states are told apart by `prev`:
 *   - `prev >= 0`, or `prev < 0` but above DETACHED: linked into a slot list (see slots.ts,
 *     where a negative `prev` names the slot of a list head);
 *   - `DETACHED`: allocated but in no slot (between expiry and re-arm, or just allocated);
 *   - `PENDING`: allocated, pending, waiting in a driver for a clock reading (no slot yet);
 *   - `FREE`: on the free list.
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
/**
 * Allocated, counted as pending, and in no slot yet: a driver holds it until it reads the clock
 * (see WheelDriver.add), with the row's delay in `tick`. Only a driver makes and ends this state.
 */
export const PENDING = -0x7ffffffe;
/** End of the free list. */
const NIL = -1;

export class EntryStore {
  /** Tick at which the row's timer is due. */
  tick: Float64Array;
  next: Int32Array;
  prev: Int32Array;
  generation: Uint32Array;
  /** Rows in use (attached to a slot or detached), not counting free ones. */
  live = 0;
  private freeHead = NIL;
  /** Rows ever handed out; rows at or above this index have never been used. */
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

  /** Calls `listener(newCapacity)` whenever the slab grows, so owners of parallel arrays can follow. */
  onGrow(listener: (capacity: number) => void): void {
    this.growListeners.push(listener);
  }

  /** Takes a free row and returns its index; the row starts DETACHED. */
  allocate(): number {
    let index = this.freeHead;
    while (index !== NIL) {
      this.freeHead = this.next[index];
      const generation = this.generation[index] + 1;
      if (generation < GENERATION_LIMIT) {
        this.generation[index] = generation;
        break;
      }
      // Every generation of this row has named a timer: wrapping around would let a handle kept
      // from its first one name a new timer. The row is retired (FREE, off the free list), one
      // row per 2^25 timers it served.
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

  /** Returns a row to the free list and invalidates every handle that names it (see above). */
  release(index: number): void {
    this.prev[index] = FREE;
    this.next[index] = this.freeHead;
    this.freeHead = index;
    this.live--;
  }

  handleOf(index: number): number {
    return this.generation[index] * INDEX_SPACE + index;
  }

  /**
   * The row a handle names, or -1 when the handle is stale, forged or not a handle at all.
   * Detached rows resolve too: a timer whose callback is running can still be re-armed.
   */
  indexOf(handle: number): number {
    if (typeof handle !== 'number' || !(handle >= 0)) return -1;
    const generation = Math.floor(handle * INDEX_SCALE);
    const index = handle - generation * INDEX_SPACE;
    if (index >= this.highWater || !Number.isInteger(index)) return -1;
    if (this.generation[index] !== generation || this.prev[index] === FREE) return -1;
    // A small integer, as every other row index is (the subtraction above is a float): stored
    // as the free list's head, a float changed that field's representation and deoptimised the
    // code compiled for the slab (at the first cancel of a process).
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
 * A copy of `array` with room for `size` elements, the new ones `fill` (a typed array's are 0
 * otherwise, left as the allocator's zeroed pages). A plain array is copied element by element,
 * as one left to grow by itself overshoots by half.
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
