/**
 * Replaying a segment, every record checked (format.ts). Damage followed by an intact record
 * (magic byte, a length up to `maxRecordBytes`, a matching CRC) is reported in `corrupt` and
 * skipped; damage nothing intact follows is the torn tail of a crash if it is in the last
 * segment and past its durable bytes (`ReplayOptions.durable`), cut and counted in
 * `truncatedBytes`, else corrupt (left in place unless `cutDurable`). Known limit: a body that
 * holds a well-formed record can be taken for one while resynchronising inside it.
 */

import { open, type FileHandle } from 'node:fs/promises';
import { TickwheelUnavailableError } from '../../errors.js';
import { ioError } from './errors.js';
import { ignore, readFully } from './files.js';
import { RECORD_HEADER_BYTES, RECORD_MAGIC, checkRecord, claimedLength } from './format.js';
import { SEGMENT_SPAN, segmentFileName } from './positions.js';

const HEADER = RECORD_HEADER_BYTES;
/** Replay reads segments in windows of this size. */
const SCAN_BYTES = 4 * 1024 * 1024;

export interface ReplayOptions {
  /** Bytes at the start of each segment known to be durable (see the top of the file). */
  durable?: ReadonlyMap<number, number>;
  /** Change no file: a torn tail is reported in `truncatedBytes` but not cut. */
  readOnly?: boolean;
  /** A repair: cut durable damage at the end of the last segment too (still in `corrupt`). */
  cutDurable?: boolean;
}

export interface ReplayReport {
  /** Good records delivered to onRecord. */
  records: number;
  /** Damaged records skipped; `durable`: it starts in bytes ReplayOptions.durable covers. */
  corrupt: Array<{
    position: number;
    segment: number;
    reason: string;
    bytes: number;
    durable: boolean;
  }>;
  /** Bytes of a torn tail cut from the last segment (with readOnly: that would be cut). */
  truncatedBytes: number;
  /** Position after the last good record: the next append position. */
  end: number;
}

export type OnRecord = (type: number, body: Buffer, position: number) => void;

interface SegmentScan {
  dir: string;
  segment: number;
  start: number;
  /** Records before this position are checked but not delivered. */
  deliverFrom: number;
  /** The last segment of the log: its damaged end may be a torn tail. */
  last: boolean;
  maxRecordBytes: number;
  onRecord: OnRecord;
  report: ReplayReport;
  options: ReplayOptions;
}

/** Replays one segment; returns the offset after its last good record. */
export async function scanSegment(scan: SegmentScan): Promise<number> {
  const { segment, last, report, options } = scan;
  const name = segmentFileName(segment);
  const base = segment * SEGMENT_SPAN;
  const durableBytes = options.durable?.get(segment) ?? 0;
  const readOnly = options.readOnly === true;
  let handle: FileHandle;
  let size: number;
  try {
    handle = await open(`${scan.dir}/${name}`, last && !readOnly ? 'r+' : 'r');
  } catch (error) {
    throw ioError(`opening segment ${name} for replay`, error);
  }
  try {
    try {
      size = (await handle.stat()).size;
    } catch (error) {
      throw ioError(`reading the size of segment ${name}`, error);
    }
    const window = new ScanWindow(handle, size, name);
    let offset = scan.start <= size ? scan.start : 0;
    const corrupt = (reason: string, bytes: number, durable: boolean) =>
      report.corrupt.push({ position: base + offset, segment, reason, bytes, durable });
    while (offset < size) {
      const damage = await recordAt(window, offset);
      if (damage === undefined) {
        const at = offset - window.base;
        const length = claimedLength(window.buf, at);
        if (base + offset >= scan.deliverFrom) {
          const body = Buffer.allocUnsafe(length);
          window.buf.copy(body, 0, at + HEADER, at + HEADER + length);
          scan.onRecord(window.buf[at + 1], body, base + offset);
          report.records++;
        }
        offset += HEADER + length;
        continue;
      }
      const durable = offset < durableBytes;
      const next = await resynchronise(window, offset + 1, scan.maxRecordBytes);
      if (next >= 0) {
        corrupt(damage, next - offset, durable);
        offset = next;
        continue;
      }
      // Only bytes never made durable can be a torn tail, and only at the end of the log.
      const torn = last && !durable;
      const cut = last && !readOnly && (torn || options.cutDurable === true);
      if (cut) {
        try {
          await handle.truncate(offset);
          await handle.datasync();
        } catch (error) {
          throw ioError(`cutting the end of segment ${name} at byte ${offset}`, error);
        }
      }
      if (torn) {
        report.truncatedBytes += size - offset;
      } else {
        corrupt(`${damage}; no intact record follows in this segment`, size - offset, durable);
      }
      // A durable damaged end left in place: appends continue after it, not over it.
      if (!last || cut || torn) size = offset;
      else return size;
    }
    return size;
  } finally {
    await handle.close().catch(ignore);
  }
}

/** Checks the record at `offset`: undefined when intact, else what is wrong, in words. */
async function recordAt(window: ScanWindow, offset: number): Promise<string | undefined> {
  const size = window.size;
  if (size - offset < HEADER) return `header cut short (${size - offset} of ${HEADER} bytes)`;
  if (!window.covers(offset, HEADER)) await window.load(offset, HEADER);
  let at = offset - window.base;
  if (window.buf[at] !== RECORD_MAGIC) {
    return `no record starts here (byte 0x${hex(window.buf[at])}, not magic 0xa7)`;
  }
  const length = claimedLength(window.buf, at);
  if (length > size - offset - HEADER)
    return `body length ${length} runs past the end of the segment`;
  if (!window.covers(offset, HEADER + length)) {
    await window.load(offset, HEADER + length);
    at = 0;
  }
  return checkRecord(window.buf, at, window.len) >= 0 ? undefined : 'CRC mismatch';
}

/** A window onto a segment file that only moves forward, read in SCAN_BYTES chunks. */
class ScanWindow {
  buf = Buffer.allocUnsafeSlow(SCAN_BYTES);
  /** File offset of buf[0]. */
  base = 0;
  /** Bytes of buf that hold file data. */
  len = 0;

  constructor(
    private readonly handle: FileHandle,
    readonly size: number,
    private readonly name: string,
  ) {}

  covers(offset: number, length: number): boolean {
    return offset >= this.base && offset + length <= this.base + this.len;
  }

  /** Moves the window to start at `offset` and hold at least `length` bytes. */
  async load(offset: number, length: number): Promise<void> {
    const kept =
      offset >= this.base && offset < this.base + this.len ? this.base + this.len - offset : 0;
    const want = Math.min(this.size - offset, Math.max(length, SCAN_BYTES, kept));
    const from = offset - this.base;
    if (this.buf.length < want) {
      const bigger = Buffer.allocUnsafeSlow(want);
      if (kept > 0) this.buf.copy(bigger, 0, from, from + kept);
      this.buf = bigger;
    } else if (kept > 0 && from > 0) {
      this.buf.copyWithin(0, from, from + kept);
    }
    let got: number;
    try {
      got = await readFully(this.handle, this.buf, kept, want - kept, offset + kept);
    } catch (error) {
      throw ioError(`reading segment ${this.name} at byte ${offset + kept}`, error);
    }
    this.base = offset;
    this.len = kept + got;
    if (this.len < length) {
      throw new TickwheelUnavailableError(
        'ERR_TICKWHEEL_IO',
        `segment ${this.name} shrank while it was being replayed; is another process using the log?`,
      );
    }
  }
}

/** The first offset from `from` with a credible record (see the top of the file), or -1. */
async function resynchronise(window: ScanWindow, from: number, maxRecordBytes: number) {
  const size = window.size;
  let offset = from;
  while (offset + HEADER <= size) {
    if (!window.covers(offset, 1)) await window.load(offset, 1);
    const found = window.buf.indexOf(RECORD_MAGIC, offset - window.base);
    if (found < 0 || found >= window.len) {
      offset = window.base + window.len;
      continue;
    }
    const candidate = window.base + found;
    if (candidate + HEADER > size) return -1;
    if (!window.covers(candidate, HEADER)) await window.load(candidate, HEADER);
    const length = claimedLength(window.buf, candidate - window.base);
    if (length <= maxRecordBytes && length <= size - candidate - HEADER) {
      if (!window.covers(candidate, HEADER + length)) await window.load(candidate, HEADER + length);
      if (checkRecord(window.buf, candidate - window.base, window.len) >= 0) return candidate;
    }
    offset = candidate + 1;
  }
  return -1;
}

function hex(byte: number): string {
  return byte.toString(16).padStart(2, '0');
}
