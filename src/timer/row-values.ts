/**
 * One JavaScript value per row of a slab (a callback, or the lean path's data), kept in chunks of
 * 32,768. When the slab grows, chunks are added and nothing is copied: a flat array the size of
 * the slab had to be copied element by element on every doubling, which was the largest cost of
 * a wheel's first million timers. A chunk of 32,768 values (256 KB) is a large object to V8: it
 * is made outside the young generation and never copied by the scavenger, where chunks of 4,096
 * (32 KB) were, all 8 MB of them for a million timers (a wheel's first million schedules took a
 * fifth longer).
 */

const CHUNK_BITS = 15;
const CHUNK_SIZE = 1 << CHUNK_BITS;
const IN_CHUNK = CHUNK_SIZE - 1;

export class RowValues {
  private readonly chunks: unknown[][] = [];

  constructor(capacity: number) {
    this.ensure(capacity);
  }

  /**
   * Makes room for rows 0 .. capacity-1. The first chunk starts at the slab's own size (a
   * small wheel does not pay for 32,768 rows) and is copied up to a whole chunk when the slab
   * outgrows it; every later chunk is a whole one.
   */
  ensure(capacity: number): void {
    const first = this.chunks[0];
    if (first === undefined) {
      this.chunks.push(new Array<unknown>(Math.min(capacity, CHUNK_SIZE)).fill(undefined));
    } else if (first.length < CHUNK_SIZE && capacity > first.length) {
      const grown = new Array<unknown>(Math.min(capacity, CHUNK_SIZE)).fill(undefined);
      for (let i = 0; i < first.length; i++) grown[i] = first[i];
      this.chunks[0] = grown;
    }
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
