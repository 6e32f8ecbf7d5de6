/**
 * Reading records back (read, readMany, readRaw) from the writer's staged records or the
 * segment files, through a small LRU pool of read handles; every record checked (format.ts).
 */

import { open, type FileHandle } from 'node:fs/promises';
import { LogError, closedError, ioError, isLogFailure, type LogFailure } from './errors.js';
import { closeQuietly, ignore, readFully } from './files.js';
import {
  BAD_CRC,
  NOT_A_RECORD,
  RECORD_HEADER_BYTES,
  checkRecord,
  claimedLength,
  describeCheck,
} from './format.js';
import {
  SEGMENT_SPAN,
  checkPosition,
  corruptRecord,
  segmentFileName,
  segmentOf,
} from './positions.js';
import type { SegmentTable } from './segments.js';
import type { Writer } from './writer.js';

const HEADER = RECORD_HEADER_BYTES;
/** A read() fetches this much at once, so that small records take a single read. */
const READ_AHEAD_BYTES = 2048;
/** readMany: one read covers records at most this far apart from its first... */
const SPAN_READ_BYTES = 1024 * 1024;
/** ...and gaps between them of at most this much (reading a gap beats another read). */
const SPAN_GAP_BYTES = 64 * 1024;
/** readMany: reads in flight at once. */
const SPAN_READS_IN_FLIGHT = 16;
const OPEN_READERS = 16;

export interface ReadResult {
  type: number;
  body: Buffer;
}

/** A read-only handle to one segment, shared by concurrent read() calls. */
interface Reader {
  readonly handle: Promise<FileHandle>;
  users: number;
  retired: boolean;
}

export class LogReader {
  private readonly readers = new Map<number, Reader>();

  constructor(
    private readonly dir: string,
    private readonly writer: Writer,
    private readonly segments: SegmentTable,
  ) {}

  /** Reads and checks the record at `position`; the body is the caller's to keep. */
  async read(position: number): Promise<ReadResult> {
    if (this.writer.closed) throw closedError('read from');
    checkPosition(position, 'position');
    const segment = segmentOf(position);
    const offset = position - segment * SEGMENT_SPAN;
    const staged = this.writer.staged(segment, offset);
    if (staged !== undefined) {
      const result = checkRecord(staged.buf, staged.at, staged.end);
      // A record cut short in the staging buffer is no record start, as for a header.
      if (result < 0)
        throw corruptRecord(position, describeCheck(result === BAD_CRC ? BAD_CRC : NOT_A_RECORD));
      const body = Buffer.allocUnsafe(result);
      staged.buf.copy(body, 0, staged.at + HEADER, staged.at + HEADER + result);
      return { type: staged.buf[staged.at + 1], body };
    }
    const size = this.segments.sizeOf(segment);
    if (size === undefined || offset >= size) {
      throw new LogError(
        'ERR_TICKWHEEL_INVALID_POSITION',
        size === undefined
          ? `no record at position ${position}: segment ${segment} is not in the log`
          : `no record at position ${position}: segment ${segment} has ${size} bytes`,
      );
    }
    const reader = this.acquire(segment);
    try {
      return await readRecord(await reader.handle, position, offset, size - offset);
    } catch (error) {
      if (isLogFailure(error)) throw error;
      throw ioError(`reading position ${position} from segment ${segmentFileName(segment)}`, error);
    } finally {
      this.release(reader);
    }
  }

  /**
   * Reads many records: positions close together in a segment share one read of their span.
   * Results in the order of `positions`; one that cannot be read yields read()'s error there.
   */
  async readMany(positions: readonly number[]): Promise<Array<ReadResult | LogFailure>> {
    if (this.writer.closed) throw closedError('read from');
    const results = new Array<ReadResult | LogFailure>(positions.length);
    const order = positions.map((_, i) => i).sort((a, b) => positions[a] - positions[b]);
    const single = async (i: number) => {
      try {
        results[i] = await this.read(positions[i]);
      } catch (err) {
        if (!isLogFailure(err)) throw err;
        results[i] = err;
      }
    };
    const spans: Array<{ segment: number; from: number; to: number; members: number[] }> = [];
    for (const i of order) {
      const position = positions[i];
      if (!Number.isSafeInteger(position) || position < 0) {
        await single(i);
        continue;
      }
      const segment = segmentOf(position);
      const offset = position - segment * SEGMENT_SPAN;
      const size = this.segments.sizeOf(segment);
      // Records still staged (not written yet) and unknown positions take the single path.
      const written = size === undefined ? 0 : this.writer.writtenEnd(segment);
      if (size === undefined || offset + HEADER > written) {
        await single(i);
        continue;
      }
      const last = spans[spans.length - 1];
      if (
        last !== undefined &&
        last.segment === segment &&
        offset - last.from < SPAN_READ_BYTES &&
        offset <= last.to + SPAN_GAP_BYTES
      ) {
        last.to = Math.min(written, Math.max(last.to, offset + READ_AHEAD_BYTES));
        last.members.push(i);
      } else {
        spans.push({
          segment,
          from: offset,
          to: Math.min(written, offset + READ_AHEAD_BYTES),
          members: [i],
        });
      }
    }
    const retry: number[] = [];
    const readSpan = async (span: (typeof spans)[number]) => {
      const reader = this.acquire(span.segment);
      let buf: Buffer;
      try {
        buf = Buffer.allocUnsafe(span.to - span.from);
        const got = await readFully(await reader.handle, buf, 0, buf.length, span.from);
        buf = buf.subarray(0, got);
      } catch {
        // Each position on its own, with read()'s precise error.
        for (const i of span.members) retry.push(i);
        return;
      } finally {
        this.release(reader);
      }
      for (const i of span.members) {
        const at = positions[i] - span.segment * SEGMENT_SPAN - span.from;
        const length = checkRecord(buf, at, buf.length);
        // Longer than what was read, or damaged: read() reads it whole or names the damage.
        if (length < 0) retry.push(i);
        else
          results[i] = { type: buf[at + 1], body: buf.subarray(at + HEADER, at + HEADER + length) };
      }
    };
    for (let start = 0; start < spans.length; start += SPAN_READS_IN_FLIGHT) {
      await Promise.all(spans.slice(start, start + SPAN_READS_IN_FLIGHT).map(readSpan));
    }
    for (let start = 0; start < retry.length; start += SPAN_READS_IN_FLIGHT) {
      await Promise.all(retry.slice(start, start + SPAN_READS_IN_FLIGHT).map(single));
    }
    return results;
  }

  /** Up to `length` raw bytes from `offset` (a damaged record, for a repair); empty if gone. */
  async readRaw(segment: number, offset: number, length: number): Promise<Buffer> {
    let handle: FileHandle;
    try {
      handle = await open(this.pathOf(segment), 'r');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return Buffer.alloc(0);
      throw ioError(`opening segment ${segmentFileName(segment)}`, error);
    }
    try {
      const buf = Buffer.alloc(length);
      return buf.subarray(0, await readFully(handle, buf, 0, length, offset));
    } catch (error) {
      throw ioError(`reading segment ${segmentFileName(segment)} at byte ${offset}`, error);
    } finally {
      await handle.close().catch(ignore);
    }
  }

  /** Closes the segment's read handle once its readers are done. */
  retire(segment: number): void {
    const reader = this.readers.get(segment);
    if (reader === undefined) return;
    this.readers.delete(segment);
    reader.retired = true;
    if (reader.users === 0) closeQuietly(reader.handle);
  }

  retireAll(): void {
    for (const segment of [...this.readers.keys()]) this.retire(segment);
  }

  private acquire(segment: number): Reader {
    let reader = this.readers.get(segment);
    if (reader !== undefined) {
      this.readers.delete(segment); // re-insert: the map's order is least recently used first
    } else {
      const opened: Reader = { handle: open(this.pathOf(segment), 'r'), users: 0, retired: false };
      opened.handle.catch(() => {
        if (this.readers.get(segment) === opened) this.readers.delete(segment);
      });
      reader = opened;
      if (this.readers.size >= OPEN_READERS) this.retireIdle();
    }
    this.readers.set(segment, reader);
    reader.users++;
    return reader;
  }

  private release(reader: Reader): void {
    reader.users--;
    if (reader.retired && reader.users === 0) closeQuietly(reader.handle);
  }

  private retireIdle(): void {
    for (const [segment, reader] of this.readers) {
      if (reader.users === 0) {
        this.retire(segment);
        return;
      }
    }
  }

  private pathOf(segment: number): string {
    return `${this.dir}/${segmentFileName(segment)}`;
  }
}

async function readRecord(
  handle: FileHandle,
  position: number,
  offset: number,
  available: number,
): Promise<ReadResult> {
  const first = Math.min(available, READ_AHEAD_BYTES);
  let record = Buffer.allocUnsafe(first);
  let got = await readFully(handle, record, 0, first, offset);
  if (checkRecord(record, 0, got) === NOT_A_RECORD)
    throw corruptRecord(position, describeCheck(NOT_A_RECORD));
  const total = HEADER + claimedLength(record, 0);
  if (total > available) throw corruptRecord(position, describeCheck(NOT_A_RECORD));
  if (total > got) {
    const whole = Buffer.allocUnsafe(total);
    record.copy(whole, 0, 0, got);
    got += await readFully(handle, whole, got, total - got, offset + got);
    record = whole;
  }
  const length = checkRecord(record, 0, got);
  if (length < 0) throw corruptRecord(position, describeCheck(length));
  return { type: record[1], body: record.subarray(HEADER, HEADER + length) };
}
