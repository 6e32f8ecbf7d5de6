/**
 * One JavaScript value per row of a slab, in chunks of 32,768 so that growing copies nothing
 * (copying at each doubling was the main cost of the first million timers). A 256 KB chunk is a
 * large object to V8: the scavenger never copies it.
 */

const CHUNK_BITS = 15;
const CHUNK_SIZE = 1 << CHUNK_BITS;
const IN_CHUNK = CHUNK_SIZE - 1;

export class RowValues {
  private readonly chunks: unknown[][] = [];

  constructor(capacity: number) {
    this.ensure(capacity);
  }

  /** Makes room for rows 0 .. capacity-1; the first chunk starts small, for small wheels. */
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
