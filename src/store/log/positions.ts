/**
 * Positions in the message log. Segment files are numbered (`0000000001.seg`, ...); the highest
 * is active, the others never written again. A record never spans segments: one that would take
 * the active one past `segmentBytes` starts the next (one larger on its own gets its own).
 *
 * A record's position is `segment * 2^32 + byte offset in the segment`. With records of 12,
 * 28 and 12 bytes and `segmentBytes` 40, the first two fill segment 1 exactly (12 + 28 = 40)
 * and the third would pass it, so it starts segment 2:
 *
 *     segment 1:  offset 0  (position 4294967296), offset 12 (position 4294967308)
 *     segment 2:  offset 0  (position 8589934592)
 *
 * So positions increase with every append, and `segmentOf` is one division. Positions need at
 * most 2^53 (so segment numbers run up to 2^21 - 1), and both the segment size and the record
 * size are capped (options.ts) so that offsets stay below 2^32.
 */

import { TickwheelCorruptError } from '../../errors.js';
import { LogError } from './errors.js';

/** Positions are `segment * SEGMENT_SPAN + offset`. */
export const SEGMENT_SPAN = 2 ** 32;
export const LAST_SEGMENT = Math.floor(Number.MAX_SAFE_INTEGER / SEGMENT_SPAN);
export const SEGMENT_FILE = /^(\d{10})\.seg$/;

export function segmentFileName(segment: number): string {
  return `${String(segment).padStart(10, '0')}.seg`;
}

export function segmentOf(position: number): number {
  return Math.floor(position / SEGMENT_SPAN);
}

/** The byte of its segment file a position points at. */
export function offsetOf(position: number): number {
  return position % SEGMENT_SPAN;
}

export function positionOf(segment: number, offset: number): number {
  return segment * SEGMENT_SPAN + offset;
}

/** A position as people read it (in errors and reports). */
export function where(position: number): string {
  return `log segment ${segmentOf(position)} at byte ${offsetOf(position)}`;
}

export function checkPosition(position: number, name: string): void {
  if (!Number.isSafeInteger(position) || position < 0) {
    throw new LogError(
      'ERR_TICKWHEEL_INVALID_POSITION',
      `${name} must be a log position (a non-negative integer), got ${String(position)}`,
    );
  }
}

export function corruptRecord(position: number, reason: string): TickwheelCorruptError {
  return new TickwheelCorruptError(
    `record at position ${position} (segment ${segmentOf(position)}, byte ` +
      `${offsetOf(position)}) is damaged: ${reason}`,
  );
}
