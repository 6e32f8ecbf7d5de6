/**
 * Log positions. A record's position is
 *
 *   position = segment × SEGMENT_SPAN + offset
 *
 * where `segment` numbers the segment file (log/<segment>.seg) and `offset` is the record's
 * first byte in it (see ../log/positions.ts). A position alone thus says which file to read and
 * where, and positions grow with the log: a record written later has a greater one. The file
 * store keeps positions (in its tables, index entries, checkpoints and snapshots) and never
 * anything that depends on how large a segment grew.
 *
 * This module is the only place in src/store/file/ that knows SEGMENT_SPAN.
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
