/**
 * Log positions (segment × SEGMENT_SPAN + offset: ../log/positions.ts) as the file store sees
 * them: the only place in src/store/file/ that knows SEGMENT_SPAN.
 */

import { SEGMENT_SPAN } from '../log/index.js';

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
