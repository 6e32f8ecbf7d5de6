/**
 * One JavaScript value per row of a slab (a callback, or the lean path's data), kept in chunks of
 * 4,096. When the slab grows, chunks are added and nothing is copied: a flat array the size of
 * the slab had to be copied element by element on every doubling, which was the largest cost of
 * a wheel's first million timers.
 */

const CHUNK_BITS = 12;
const CHUNK_SIZE = 1 << CHUNK_BITS;
const IN_CHUNK = CHUNK_SIZE - 1;

export class RowValues {
  private readonly chunks: unknown[][] = [];

  constructor(capacity: number) {
    this.ensure(capacity);
  }

  /** Makes room for rows 0 .. capacity-1. */
  ensure(capacity: number): void {
    while (this.chunks.length * CHUNK_SIZE < capacity) {
      this.chunks.push(new Array<unknown>(CHUNK_SIZE).fill(undefined));
    }
  }

  get(index: number): unknown {
    return this.chunks[index >>> CHUNK_BITS][index & IN_CHUNK];
  }

  set(index: number, value: unknown): void {
    this.chunks[index >>> CHUNK_BITS][index & IN_CHUNK] = value;
  }
}
