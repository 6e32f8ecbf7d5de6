/**
 * The message log: append-only typed, checksummed records in segment files, the first durable
 * stop of every change to a delayed message. A facade over this folder's modules (writer.ts
 * appends, reader.ts reads, replay.ts recovers; the list is in docs/storage.md).
 */

import { mkdir, open, readdir, stat, unlink } from 'node:fs/promises';
import { TickwheelCorruptError } from '../../errors.js';
import { LogError, closedError, ioError, type LogFailure } from './errors.js';
import {
  CREATE_FLAGS,
  DATA_DIRECTORY_MODE,
  DATA_FILE_MODE,
  syncDirectory,
  ifExists,
  ignore,
} from './files.js';

import { defaultIo, readOptions, type MessageLogOptions } from './options.js';
import {
  LAST_SEGMENT,
  SEGMENT_FILE,
  SEGMENT_SPAN,
  checkPosition,
  segmentFileName,
  segmentOf,
} from './positions.js';
import { LogReader, type ReadResult } from './reader.js';
import { scanSegment, type OnRecord, type ReplayOptions, type ReplayReport } from './replay.js';
import { SegmentTable } from './segments.js';
import { Writer, type RecordSlot, type WriterStats } from './writer.js';

interface MessageLogStats extends WriterStats {
  segments: number;
  /** Bytes in all segments, records still waiting to be written included. */
  bytes: number;
}

export class MessageLog {
  readonly dir: string;
  private readonly maxRecordBytes: number;
  private readonly table: SegmentTable;
  private readonly writer: Writer;
  private readonly reader: LogReader;
  private closing: Promise<void> | null = null;

  private constructor(
    settings: ReturnType<typeof readOptions>,
    segments: number[],
    sizes: number[],
  ) {
    this.dir = settings.dir;
    this.maxRecordBytes = settings.maxRecordBytes;
    this.table = new SegmentTable(segments, sizes);
    this.writer = new Writer(
      settings.dir,
      settings.fsync,
      settings.segmentBytes,
      settings.maxRecordBytes,
      { ...defaultIo, ...settings.io },
      this.table,
      settings.beforeNewSegment,
    );
    this.reader = new LogReader(settings.dir, this.writer, this.table);
  }

  static async open(options: MessageLogOptions): Promise<MessageLog> {
    const settings = readOptions(options);
    const { dir } = settings;
    let segments: number[];
    let sizes: number[];
    try {
      const created = await mkdir(dir, { recursive: true, mode: DATA_DIRECTORY_MODE });
      segments = [];
      for (const name of await readdir(dir)) {
        const match = SEGMENT_FILE.exec(name);
        if (match !== null) segments.push(Number(match[1]));
      }
      segments.sort((a, b) => a - b);
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

  stats(): MessageLogStats {
    return { segments: this.table.list.length, bytes: this.table.bytes, ...this.writer.counts };
  }

  /** Bytes in a segment (staged records included), or undefined if it is not in the log. */
  segmentSize(segment: number): number | undefined {
    return this.table.sizeOf(segment);
  }

  /** Reserves room for a record body of at most `maxLength` bytes (see writer.ts). */
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
        const handle = await ifExists(open(`${this.dir}/${segmentFileName(segment)}`, 'r+'));
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

  read(position: number): Promise<ReadResult> {
    return this.reader.read(position);
  }

  readMany(positions: readonly number[]): Promise<Array<ReadResult | LogFailure>> {
    return this.reader.readMany(positions);
  }

  readRaw(segment: number, offset: number, length: number): Promise<Buffer> {
    return this.reader.readRaw(segment, offset, length);
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
    this.reader.retire(segment);
    try {
      await unlink(`${this.dir}/${segmentFileName(segment)}`);
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
      this.closing = this.writer.shutdown().finally(() => this.reader.retireAll());
    }
    return this.closing;
  }
}
