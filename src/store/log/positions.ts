/**
 * Positions in the message log: `segment * 2^32 + byte offset`, so they grow with every append
 * and segmentOf is one division. Segment files are numbered (`0000000001.seg`, ...), the highest
 * active; a record never spans two. Positions stay below 2^53 (segments up to 2^21 - 1), and
 * options.ts caps segment and record sizes so that offsets stay below 2^32.
 */

import { TickwheelCorruptError } from '../../errors.js';
import { LogError } from './errors.js';

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
