/**
 * The message log: append-only typed, checksummed records in segment files, the first durable
 * stop of every change to a delayed message. Appending is writer.ts's, replaying replay.ts's;
 * reads come from the writer's staged records or the segment files, through a small LRU pool
 * of read handles, every record checked (format.ts).
 */

import { mkdir, open, readdir, stat, unlink, type FileHandle } from 'node:fs/promises';
import { TickwheelCorruptError } from '../../errors.js';
import { LogError, closedError, ioError, isLogFailure, type LogFailure } from './errors.js';
import {
  CREATE_FLAGS,
  DATA_DIRECTORY_MODE,
  DATA_FILE_MODE,
  closeQuietly,
  ifExists,
  ignore,
  readFully,
  syncDirectory,
} from './files.js';
import {
  BAD_CRC,
  NOT_A_RECORD,
  RECORD_HEADER_BYTES,
  checkRecord,
  claimedLength,
  describeCheck,
} from './format.js';
import { readOptions, type LogSettings, type MessageLogOptions } from './options.js';
import {
  LAST_SEGMENT,
  SEGMENT_FILE,
  SEGMENT_SPAN,
  checkPosition,
  corruptRecord,
  segmentFileName,
  segmentOf,
} from './positions.js';
import { scanSegment, type OnRecord, type ReplayOptions, type ReplayReport } from './replay.js';
import { SegmentTable } from './segments.js';
import { Writer, type RecordSlot, type WriterStats } from './writer.js';

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

export class MessageLog {
  readonly dir: string;
  /** The longest record body the log takes. */
  readonly maxRecordBytes: number;
  /** The directory held no segment: open made an empty first one (close removes it if unused). */
  createdFirst = false;
  private readonly table: SegmentTable;
  private readonly writer: Writer;
  /** Read handles by segment, least recently used first. */
  private readonly readers = new Map<number, Reader>();
  private closing: Promise<void> | null = null;

  private constructor(settings: LogSettings, segments: number[], sizes: number[]) {
    this.dir = settings.dir;
    this.maxRecordBytes = settings.maxRecordBytes;
    this.table = new SegmentTable(segments, sizes);
    this.writer = new Writer(settings, this.table);
  }

  static async open(options: MessageLogOptions): Promise<MessageLog> {
    const settings = readOptions(options);
    const { dir } = settings;
    let segments: number[];
    let sizes: number[];
    let createdFirst: boolean;
    try {
      const created = await mkdir(dir, { recursive: true, mode: DATA_DIRECTORY_MODE });
      segments = [];
      for (const name of await readdir(dir)) {
        const match = SEGMENT_FILE.exec(name);
        if (match !== null) segments.push(Number(match[1]));
      }
      segments.sort((a, b) => a - b);
      createdFirst = segments.length === 0;
      if (segments.length === 0) {
        const handle = await open(`${dir}/${segmentFileName(1)}`, CREATE_FLAGS, DATA_FILE_MODE);
        await handle.close();
        if (settings.fsync !== 'never') {
          await syncDirectory(dir);
          if (created !== undefined) await syncDirectory(`${dir}/..`);
        }
        segments.push(1);
        sizes = [0];
      } else {
        sizes = await Promise.all(
          segments.map(async (segment) => (await stat(`${dir}/${segmentFileName(segment)}`)).size),
        );
      }
    } catch (error) {
      throw ioError(`opening the message log in ${dir}`, error);
    }
    for (let i = 0; i < segments.length; i++) {
      if (segments[i] > LAST_SEGMENT || sizes[i] >= SEGMENT_SPAN) {
        throw new TickwheelCorruptError(
          `${dir}/${segmentFileName(segments[i])} is not a segment this log can address ` +
            `(segment numbers go up to ${LAST_SEGMENT}, sizes below 4 GiB)`,
        );
      }
    }
    const log = new MessageLog(settings, segments, sizes);
    log.createdFirst = createdFirst;
    // 'never': the new file's entry is synced by the first syncAll().
    log.table.unsyncedDirectory =
      settings.fsync === 'never' && sizes.length === 1 && sizes[0] === 0;
    return log;
  }

  get closed(): boolean {
    return this.writer.closed;
  }

  get end(): number {
    return this.table.end;
  }

  get firstFailure(): LogFailure | undefined {
    return this.writer.firstFailure;
  }

  segments(): number[] {
    return this.table.list.slice();
  }

  /** The writer's counts, the segments, and the bytes in them (staged records included). */
  stats(): WriterStats & { segments: number; bytes: number } {
    return { segments: this.table.list.length, bytes: this.table.bytes, ...this.writer.counts };
  }

  /** Bytes in a segment (staged records included), or undefined if it is not in the log. */
  segmentSize(segment: number): number | undefined {
    return this.table.sizeOf(segment);
  }

  reserve(type: number, maxLength: number): RecordSlot {
    return this.writer.reserve(type, maxLength);
  }

  /** Appends a copy of `body`; `durable` settles as the fsync policy promises. */
  append(type: number, body: Uint8Array): { position: number; durable: Promise<void> } {
    if (!(body instanceof Uint8Array)) {
      throw new LogError('ERR_TICKWHEEL_INVALID_RECORD', 'record body must be a Uint8Array');
    }
    const slot = this.writer.reserve(type, body.byteLength);
    try {
      slot.buf.set(body, slot.at);
    } catch (err) {
      slot.abort();
      throw err;
    }
    const position = slot.commit(body.byteLength);
    return { position, durable: slot.durable };
  }

  /** Called just before staged records are written: to append records riding that write. */
  set beforeWrite(hook: (() => void) | undefined) {
    this.writer.beforeWrite = hook;
  }

  /** Asks for a write within LATER_MS even if nothing is staged now (writer.ts). */
  writeLater(): void {
    this.writer.writeLater();
  }

  /** Resolves when everything appended so far is durable; rejects if any of it failed. */
  flush(): Promise<void> {
    return this.writer.flush();
  }

  /**
   * flush(), and on disk whatever the policy: under 'never' it fsyncs segments written since and
   * the folder if one was created. Before a checkpoint records sizes as durable.
   */
  async syncAll(): Promise<void> {
    await this.flush();
    const table = this.table;
    if (table.unsynced.size === 0 && !table.unsyncedDirectory) return;
    const segments = [...table.unsynced];
    const directory = table.unsyncedDirectory;
    table.unsynced.clear();
    table.unsyncedDirectory = false;
    try {
      for (const segment of segments) {
        const handle = await ifExists(open(this.pathOf(segment), 'r+'));
        if (handle === undefined) continue; // deleted since (retention): nothing of it must last
        try {
          await this.writer.sync(handle);
        } finally {
          await handle.close().catch(ignore);
        }
      }
      if (directory) await syncDirectory(this.dir);
    } catch (error) {
      for (const segment of segments) table.unsynced.add(segment);
      if (directory) table.unsyncedDirectory = true;
      throw ioError('syncing the log for a checkpoint', error);
    }
  }

  /** Reads and checks the record at `position`; the body is the caller's to keep. */
  async read(position: number): Promise<ReadResult> {
    if (this.closed) throw closedError('read from');
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
    const size = this.table.sizeOf(segment);
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
    if (this.closed) throw closedError('read from');
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
      const size = this.table.sizeOf(segment);
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
  private retire(segment: number): void {
    const reader = this.readers.get(segment);
    if (reader === undefined) return;
    this.readers.delete(segment);
    reader.retired = true;
    if (reader.users === 0) closeQuietly(reader.handle);
  }

  /**
   * Delivers every good record from position `from` on, in order (bodies are copies), and
   * repairs the tail so appends continue after the last good record. Once, before any append.
   * If onRecord throws, replay rejects with that error.
   */
  async replay(onRecord: OnRecord, from = 0, options: ReplayOptions = {}): Promise<ReplayReport> {
    if (this.closed) throw closedError('replay');
    if (this.writer.counts.appends > 0) {
      throw new LogError(
        'ERR_TICKWHEEL_INVALID_STATE',
        'replay() must run before any append(): it repairs the tail that appends continue from',
      );
    }
    checkPosition(from, 'from');
    const report: ReplayReport = { records: 0, corrupt: [], truncatedBytes: 0, end: 0 };
    const fromSegment = segmentOf(from);
    const segments = this.table.list.slice();
    this.writer.replaying = true;
    try {
      for (let k = 0; k < segments.length; k++) {
        const segment = segments[k];
        const last = k === segments.length - 1;
        // The last segment is always scanned (its tail may need repair).
        if (segment < fromSegment && !last) continue;
        const goodEnd = await scanSegment({
          dir: this.dir,
          segment,
          start: segment === fromSegment ? from - segment * SEGMENT_SPAN : 0,
          deliverFrom: from,
          last,
          maxRecordBytes: this.maxRecordBytes,
          onRecord,
          report,
          options,
        });
        if (last) this.table.activeSize = goodEnd;
      }
    } finally {
      this.writer.replaying = false;
    }
    report.end = this.end;
    return report;
  }

  /**
   * Every intact record of a closed segment, in order (bodies are copies), to `onRecord`, as a
   * replay reads them (damage skipped and reported); changes nothing. For compaction.
   */
  async scanClosed(segment: number, onRecord: OnRecord): Promise<ReplayReport> {
    if (this.closed) throw closedError('scan a segment of');
    if (segment === this.table.active) {
      throw new LogError(
        'ERR_TICKWHEEL_SEGMENT_ACTIVE',
        `segment ${segment} is the active segment; only closed segments can be scanned`,
      );
    }
    while (this.writer.pending(segment)) await this.writer.idle(segment);
    const report: ReplayReport = { records: 0, corrupt: [], truncatedBytes: 0, end: 0 };
    await scanSegment({
      dir: this.dir,
      segment,
      start: 0,
      deliverFrom: 0,
      last: false,
      maxRecordBytes: this.maxRecordBytes,
      onRecord,
      report,
      options: { readOnly: true },
    });
    return report;
  }

  /** Deletes a closed segment's file once its staged records are written; not the active one. */
  async deleteSegment(segment: number): Promise<void> {
    for (;;) {
      if (this.closed) throw closedError('delete a segment of');
      if (segment === this.table.active) {
        throw new LogError(
          'ERR_TICKWHEEL_SEGMENT_ACTIVE',
          `segment ${segment} is the active segment; only closed segments can be deleted`,
        );
      }
      if (!this.writer.pending(segment)) break;
      // If that write fails, the segment may become active again, so check again afterwards.
      await this.writer.idle(segment);
    }
    const size = this.table.remove(segment);
    if (size === undefined) return;
    this.retire(segment);
    try {
      await unlink(this.pathOf(segment));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
      this.table.restore(segment, size);
      throw ioError(`deleting segment ${segmentFileName(segment)}`, error);
    }
  }

  /** Flushes and closes; later appends throw ERR_TICKWHEEL_CLOSED. Rejects if either failed. */
  close(): Promise<void> {
    if (this.closing === null) {
      this.writer.closed = true;
      this.closing = this.writer.shutdown().finally(async () => {
        for (const segment of [...this.readers.keys()]) this.retire(segment);
        // A refused open (a directory whose segments are gone) leaves the directory as it was.
        if (this.createdFirst && this.table.list.length === 1 && this.table.sizeOf(1) === 0) {
          await unlink(this.pathOf(1)).catch(ignore);
        }
      });
    }
    return this.closing;
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
