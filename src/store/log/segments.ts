/**
 * The log's segments, their sizes (staged records included), the active one, and what is still
 * to be made durable. Invariant: `list` ascends and ends with `active`; `closedSizes` holds the
 * others' sizes, `closedBytes` their sum; the next append goes at `end`.
 */

import { LogError } from './errors.js';
import { LAST_SEGMENT, SEGMENT_SPAN } from './positions.js';

export class SegmentTable {
  /** Segments on disk, or about to be, ascending; the last one is active. */
  readonly list: number[];
  readonly closedSizes = new Map<number, number>();
  closedBytes = 0;
  active: number;
  activeBase: number;
  /** Size of the active segment once everything staged is written: the next append offset. */
  activeSize: number;
  /** Segments whose file the writer has yet to create (and whose directory entry to sync). */
  readonly unborn = new Set<number>();
  /** 'never': segments written since the last syncAll(), and whether a file was created. */
  readonly unsynced = new Set<number>();
  unsyncedDirectory = false;

  constructor(segments: number[], sizes: number[]) {
    this.list = segments;
    const last = segments.length - 1;
    for (let i = 0; i < last; i++) {
      this.closedSizes.set(segments[i], sizes[i]);
      this.closedBytes += sizes[i];
    }
    this.active = segments[last];
    this.activeBase = this.active * SEGMENT_SPAN;
    this.activeSize = sizes[last];
  }

  get end(): number {
    return this.activeBase + this.activeSize;
  }

  get bytes(): number {
    return this.closedBytes + this.activeSize;
  }

  sizeOf(segment: number): number | undefined {
    return segment === this.active ? this.activeSize : this.closedSizes.get(segment);
  }

  /** Closes the active segment and starts the next one (its file is made by the writer). */
  roll(): void {
    if (this.active >= LAST_SEGMENT) {
      throw new LogError(
        'ERR_TICKWHEEL_INVALID_STATE',
        `the log has used every segment number up to ${LAST_SEGMENT}; start a new log`,
      );
    }
    this.closedSizes.set(this.active, this.activeSize);
    this.closedBytes += this.activeSize;
    this.active = this.list[this.list.length - 1] + 1;
    this.list.push(this.active);
    this.unborn.add(this.active);
    this.activeBase = this.active * SEGMENT_SPAN;
    this.activeSize = 0;
  }

  /** Makes `segment` active again with `size` bytes, forgetting segments started after it. */
  rollBack(segment: number, size: number): void {
    while (this.active !== segment) {
      this.list.pop();
      this.unborn.delete(this.active);
      this.active = this.list[this.list.length - 1];
      this.closedBytes -= this.closedSizes.get(this.active) ?? 0;
      this.closedSizes.delete(this.active);
    }
    this.activeBase = segment * SEGMENT_SPAN;
    this.activeSize = size;
  }

  /** Forgets a closed segment; returns its size, or undefined if it was not there. */
  remove(segment: number): number | undefined {
    const index = this.list.indexOf(segment);
    if (index < 0) return undefined;
    this.list.splice(index, 1);
    const size = this.closedSizes.get(segment) ?? 0;
    this.closedSizes.delete(segment);
    this.closedBytes -= size;
    return size;
  }

  /** Puts back a closed segment that remove() took out (its file could not be deleted). */
  restore(segment: number, size: number): void {
    const at = this.list.findIndex((s) => s > segment);
    this.list.splice(at < 0 ? this.list.length : at, 0, segment);
    this.closedSizes.set(segment, size);
    this.closedBytes += size;
  }
}
