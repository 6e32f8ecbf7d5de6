/**
 * The message log: an append-only sequence of typed, checksummed records in segment files, the
 * first durable stop of every change to a delayed message.
 *
 * ## Record format
 *
 * A record is a 10-byte header followed by its body:
 *
 *     offset  size  field
 *     0       1     magic 0xA7: marks where a record starts, so replay can resynchronise
 *     1       1     type 0..255, chosen by the store
 *     2       4     body length n, u32 little-endian
 *     6       4     CRC-32 (zlib/IEEE) of the type byte followed by the body, u32 little-endian
 *     10      n     body
 *
 * Worked example: type 3 with the body "hi" (68 69) is the 12 bytes
 *
 *     a7 03 02 00 00 00 18 5f 4d 64 68 69       crc32(03 68 69) = 0x644d5f18
 *
 * The length is outside the CRC, so a damaged length shows up as a CRC mismatch over the
 * wrong bytes or as a body that runs past the end of the segment.
 *
 * ## Segments and positions
 *
 * Records go to segment files named by a zero-padded decimal number: `0000000001.seg`,
 * `0000000002.seg`, ... The highest-numbered one is the active segment; the others are closed
 * and never written again. A record never spans segments: when the next record would take the
 * active segment past `segmentBytes`, a new segment begins. The exception is a record that is
 * larger than `segmentBytes` on its own; it gets a segment to itself.
 *
 * A record's position is `segment * 2^32 + byte offset in the segment`. With records of 12,
 * 28 and 12 bytes and `segmentBytes` 40, the first two fill segment 1 exactly (12 + 28 = 40)
 * and the third would pass it, so it starts segment 2:
 *
 *     segment 1:  offset 0  (position 4294967296), offset 12 (position 4294967308)
 *     segment 2:  offset 0  (position 8589934592)
 *
 * So positions increase with every append, and `MessageLog.segmentOf` is one division.
 * Positions need at most 2^53 (so segment numbers run up to 2^21 - 1), and both the segment
 * size and the record size are capped so that offsets stay below 2^32.
 *
 * ## Durability and group commit
 *
 * `append` encodes the record straight into a staging buffer, assigns its position and returns
 * at once; a single writer drains the staged records, with at most one write in flight. With
 * the 'batch' policy every record staged while a write and fsync are in flight goes out in the
 * next single write and single fsync, and every record in that batch shares one `durable`
 * promise:
 *
 *     t0  append a, b, c                 stage [a b c]
 *     t1  write [a b c], fsync ...       append d, e -> stage [d e]
 *     t2  fsync done: a, b, c resolve    write [d e], fsync ...
 *     t3  fsync done: d, e resolve
 *
 * The first write after an idle moment starts one microtask after the first append. So a
 * burst of appends in a single tick shares one write even when the disk is idle. 'always'
 * writes and fsyncs each record on its own, in order. 'never' resolves when the write has
 * reached the OS. That survives a crash of the process but not a power cut.
 *
 * ## Failures
 *
 * If a write or fsync fails, that record and every record staged after it fail together.
 * Their positions assumed the failed bytes would be written. The segment is truncated back to
 * the end of the last good record, the next append takes that position again, and the failed
 * records' `durable` promises reject with ERR_TICKWHEEL_IO. Records acknowledged earlier are
 * untouched. A caller that remembered the position of a failed record must forget it, because
 * that position will be reused.
 *
 * ## Recovery
 *
 * `replay` reads every segment and checks every CRC. Damage in the middle of a segment is
 * reported in `corrupt` and skipped: replay scans forward for the next offset that holds the
 * magic byte, a length that fits (at most `maxRecordBytes`, within the segment) and a matching
 * CRC, and continues from there. Damage that nothing intact follows is a torn tail when it is
 * in the last segment, the remains of a write cut short by a crash: it is truncated and counted
 * in `truncatedBytes`. In a closed segment it is reported as corrupt.
 *
 * A crash can only tear bytes that were never made durable. The caller says which bytes were
 * (`ReplayOptions.durable`: what a checkpoint recorded after `syncAll`); damage that starts
 * inside them is never a torn tail: it is reported in `corrupt` with `durable: true` and left
 * as it is, whatever segment it is in, unless the caller repairs (`cutDurable`).
 * Known limit: a body that itself contains a complete, well-formed record could be taken for
 * one while resynchronising inside that damaged record.
 */

import { constants as fsConstants } from 'node:fs';
import { mkdir, open, readdir, stat, truncate, unlink, type FileHandle } from 'node:fs/promises';
import { crc32 } from 'node:zlib';
import { TickwheelError } from '../errors.js';
import { writeU32 } from './bytes.js';
import { crc32Range } from './crc.js';

export type FsyncPolicy = 'always' | 'batch' | 'never';

/**
 * The file operations the writer uses.
 * @internal Tests replace them to slow the disk down or make it fail.
 */
export interface LogIo {
  /** Writes `length` bytes of `buffer` from `offset` at file `position`; returns bytes written. */
  write(
    handle: FileHandle,
    buffer: Buffer,
    offset: number,
    length: number,
    position: number,
  ): Promise<number>;
  /** Makes everything written to the handle durable (fdatasync). */
  sync(handle: FileHandle): Promise<void>;
}

export interface MessageLogOptions {
  /** The log's own folder, created if missing. Segment files live here. */
  dir: string;
  /** What `durable` waits for; see the module comment. Default 'batch'. */
  fsync?: FsyncPolicy;
  /** Start a new segment when the next record would pass this size. Default 64 MiB; max 2 GiB. */
  segmentBytes?: number;
  /** Largest body `append` accepts. Default 16 MiB; max 1 GiB. */
  maxRecordBytes?: number;
  /** @internal Test hook: replaces the writer's file operations. */
  io?: Partial<LogIo>;
}

export interface ReplayOptions {
  /**
   * Bytes at the start of each segment known to be durable. Damage that starts there is
   * corruption, not a torn tail: reported with `durable: true`, never cut (but see cutDurable).
   */
  durable?: ReadonlyMap<number, number>;
  /** Change no file: a torn tail is reported in `truncatedBytes` but not cut. */
  readOnly?: boolean;
  /**
   * Cut durable damage at the end of the last segment too (a repair: those bytes cannot be
   * read, and appends continue where the good records end). It stays in `corrupt`.
   */
  cutDurable?: boolean;
}

export interface ReplayReport {
  /** Good records delivered to onRecord. */
  records: number;
  /**
   * Damaged records skipped inside segments; `bytes` is how much was skipped; `durable`: the
   * damage starts in bytes ReplayOptions.durable says were durable.
   */
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

export interface MessageLogStats {
  segments: number;
  /** Bytes in all segments, records still waiting to be written included. */
  bytes: number;
  appends: number;
  /** Write calls made to segment files. */
  writes: number;
  /** fsyncs of segment files (directory syncs after creating a segment are not counted). */
  fsyncs: number;
  fsyncMsTotal: number;
  fsyncMsMax: number;
  /** Writes or fsyncs that failed (each rolled the log back; see Failures). */
  failures: number;
}

/** The codes LogError can have: a subset of the catalogue's (src/errors.ts). */
export type LogErrorCode =
  | 'ERR_TICKWHEEL_IO'
  | 'ERR_TICKWHEEL_CORRUPT'
  | 'ERR_TICKWHEEL_RECORD_TOO_LARGE'
  | 'ERR_TICKWHEEL_CLOSED'
  | 'ERR_TICKWHEEL_INVALID_OPTION'
  | 'ERR_TICKWHEEL_INVALID_RECORD'
  | 'ERR_TICKWHEEL_INVALID_POSITION'
  | 'ERR_TICKWHEEL_SEGMENT_ACTIVE'
  | 'ERR_TICKWHEEL_INVALID_STATE';

export class LogError extends TickwheelError<LogErrorCode> {
  constructor(code: LogErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
    this.name = 'LogError';
  }
}

export const RECORD_MAGIC = 0xa7;
export const RECORD_HEADER_BYTES = 10;
/** Positions are `segment * SEGMENT_SPAN + offset`. */
export const SEGMENT_SPAN = 2 ** 32;

const HEADER = RECORD_HEADER_BYTES;
const DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024;
const DEFAULT_MAX_RECORD_BYTES = 16 * 1024 * 1024;
// segmentBytes + header + maxRecordBytes < 2^32, so every offset fits the position scheme.
const SEGMENT_BYTES_LIMIT = 2 ** 31;
const RECORD_BYTES_LIMIT = 2 ** 30;
const LAST_SEGMENT = Math.floor(Number.MAX_SAFE_INTEGER / SEGMENT_SPAN);
const SEGMENT_FILE = /^(\d{10})\.seg$/;

/** Staging buffers start this big and double when a batch outgrows them. */
const STAGE_BYTES = 256 * 1024;
/** Staging buffers up to this size are kept for reuse; larger ones go back to the GC. */
const SPARE_STAGE_LIMIT = 8 * 1024 * 1024;
const SPARE_STAGES = 2;
/** Replay reads segments in windows of this size. */
const SCAN_BYTES = 4 * 1024 * 1024;
/** A read() fetches this much at once, so that small records take a single read. */
const READ_AHEAD_BYTES = 2048;
/** readMany: one read covers records at most this far apart from its first... */
const SPAN_READ_BYTES = 1024 * 1024;
/** ...and gaps between them of at most this much (reading a gap beats another read). */
const SPAN_GAP_BYTES = 64 * 1024;
/** readMany: reads in flight at once. */
const SPAN_READS_IN_FLIGHT = 16;
/** Read handles kept open for read(), least recently used closed first. */
const OPEN_READERS = 16;

/** crc32 of each possible type byte: a record's CRC continues from its type's entry. */
const TYPE_CRC = Uint32Array.from({ length: 256 }, (_, type) => crc32(Uint8Array.of(type)));

export function segmentFileName(segment: number): string {
  return `${String(segment).padStart(10, '0')}.seg`;
}

function ignore(): void {}

/** A promise with its settle functions at hand. */
class Deferred {
  readonly promise: Promise<void>;
  resolve!: () => void;
  reject!: (error: LogError) => void;
  constructor() {
    this.promise = new Promise<void>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    // Awaiting `durable` is optional: a failure must not also crash the process as an
    // unhandled rejection. Whoever awaits the promise still sees the rejection.
    this.promise.catch(ignore);
  }
}

/**
 * Records staged for one write: the bytes of one segment from `fileOffset` on, back to back.
 * While the stage is the log's `filling` stage, appends add to it. Once the writer takes it,
 * its bytes never change again.
 */
interface Stage {
  readonly segment: number;
  readonly fileOffset: number;
  buf: Buffer;
  len: number;
  /** Bytes from the start of the stage that are durable; the rest is lost if a write fails. */
  kept: number;
  /** 'batch' and 'never': one promise for every record of the stage. */
  readonly done: Deferred | null;
  /** 'always': one promise per record, settled in order; `settled` of them so far. */
  readonly waiters: Deferred[] | null;
  settled: number;
}

/** A read-only handle to one segment, shared by concurrent read() calls. */
interface Reader {
  readonly handle: Promise<FileHandle>;
  users: number;
  retired: boolean;
}

const defaultIo: LogIo = {
  async write(handle, buffer, offset, length, position) {
    const { bytesWritten } = await handle.write(buffer, offset, length, position);
    return bytesWritten;
  },
  sync: (handle) => handle.datasync(),
};

export class MessageLog {
  private readonly dir: string;
  private readonly policy: FsyncPolicy;
  private readonly segmentBytes: number;
  private readonly maxRecordBytes: number;
  private readonly io: LogIo;
  /** 'always': each record is written, fsynced and acknowledged on its own. */
  private readonly eachRecord: boolean;

  /** Segments on disk, or about to be, ascending; the last one is active. */
  private readonly segmentList: number[];
  private readonly closedSizes = new Map<number, number>();
  private closedBytes = 0;
  private active: number;
  private activeBase: number;
  /** Size of the active segment once everything staged is written: the next append offset. */
  private activeSize: number;
  /** Segments whose file the writer has yet to create (and whose directory entry to sync). */
  private readonly unborn = new Set<number>();
  /** 'never': segments written since the last syncAll(), and whether a file was created. */
  private readonly unsynced = new Set<number>();
  private unsyncedDirectory = false;

  /** Stages in write order; the writer works on the first one. */
  private readonly queue: Stage[] = [];
  /** The stage appends go to, if it may still grow. */
  private filling: Stage | null = null;
  private readonly spareBuffers: Buffer[] = [];
  private writer: { segment: number; handle: FileHandle } | null = null;
  private draining: Promise<void> | null = null;
  private kickQueued = false;

  private readonly readers = new Map<number, Reader>();
  private closed = false;
  private closing: Promise<void> | null = null;
  private replaying = false;

  /** The error of the first write or fsync that failed, if one ever did. */
  firstFailure: LogError | undefined;
  private appendCount = 0;
  /** The record between beginRecord() and endRecord(): its type and the room reserved (-1: none). */
  private recordType = 0;
  private recordRoom = -1;
  /** Where the body of the record begun by beginRecord() goes in the staging buffer. */
  bodyAt = 0;
  /** The `durable` promise of the latest record appended (shared by its stage under 'batch'). */
  lastDurable: Promise<void> = Promise.resolve();
  private writeCount = 0;
  private fsyncCount = 0;
  private fsyncMsTotal = 0;
  private fsyncMsMax = 0;
  private failureCount = 0;

  private constructor(settings: Settings, segments: number[], sizes: number[]) {
    this.dir = settings.dir;
    this.policy = settings.fsync;
    this.segmentBytes = settings.segmentBytes;
    this.maxRecordBytes = settings.maxRecordBytes;
    this.io = { ...defaultIo, ...settings.io };
    this.eachRecord = settings.fsync === 'always';
    this.segmentList = segments;
    const last = segments.length - 1;
    for (let i = 0; i < last; i++) {
      this.closedSizes.set(segments[i], sizes[i]);
      this.closedBytes += sizes[i];
    }
    this.active = segments[last];
    this.activeBase = this.active * SEGMENT_SPAN;
    this.activeSize = sizes[last];
  }

  static async open(options: MessageLogOptions): Promise<MessageLog> {
    const settings = readOptions(options);
    const { dir } = settings;
    let segments: number[];
    let sizes: number[];
    try {
      const created = await mkdir(dir, { recursive: true });
      segments = [];
      for (const name of await readdir(dir)) {
        const match = SEGMENT_FILE.exec(name);
        if (match !== null) segments.push(Number(match[1]));
      }
      segments.sort((a, b) => a - b);
      if (segments.length === 0) {
        const handle = await open(`${dir}/${segmentFileName(1)}`, CREATE_FLAGS);
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
        throw new LogError(
          'ERR_TICKWHEEL_CORRUPT',
          `${dir}/${segmentFileName(segments[i])} is not a segment this log can address ` +
            `(segment numbers go up to ${LAST_SEGMENT}, sizes below 4 GiB)`,
        );
      }
    }
    const log = new MessageLog(settings, segments, sizes);
    // 'never': the new file's entry is synced by the first syncAll().
    log.unsyncedDirectory = settings.fsync === 'never' && sizes.length === 1 && sizes[0] === 0;
    return log;
  }

  static segmentOf(position: number): number {
    return Math.floor(position / SEGMENT_SPAN);
  }

  /** Next append position. */
  get end(): number {
    return this.activeBase + this.activeSize;
  }

  segments(): number[] {
    return this.segmentList.slice();
  }

  stats(): MessageLogStats {
    return {
      segments: this.segmentList.length,
      bytes: this.closedBytes + this.activeSize,
      appends: this.appendCount,
      writes: this.writeCount,
      fsyncs: this.fsyncCount,
      fsyncMsTotal: this.fsyncMsTotal,
      fsyncMsMax: this.fsyncMsMax,
      failures: this.failureCount,
    };
  }

  /** Bytes in a segment (staged records included), or undefined if it is not in the log. */
  segmentSize(segment: number): number | undefined {
    return segment === this.active ? this.activeSize : this.closedSizes.get(segment);
  }

  // ---- appending ------------------------------------------------------------------------

  /**
   * Assigns the record's position synchronously and stages it for the writer. `durable`
   * settles as the fsync policy promises. `body` is copied, so the caller may reuse it.
   */
  append(type: number, body: Uint8Array): { position: number; durable: Promise<void> } {
    if (!(body instanceof Uint8Array)) {
      throw new LogError('ERR_TICKWHEEL_INVALID_RECORD', 'record body must be a Uint8Array');
    }
    const buf = this.beginRecord(type, body.byteLength);
    try {
      buf.set(body, this.bodyAt);
    } catch (err) {
      this.abortRecord();
      throw err;
    }
    const position = this.endRecord(body.byteLength);
    return { position, durable: this.lastDurable };
  }

  /**
   * The allocation-free way to append: reserves room for a body of at most `maxLength` bytes
   * and returns the staging buffer, in which the caller writes the body from `bodyAt` on, in
   * the same synchronous step, and then calls endRecord() with its real length. Nothing else
   * may append in between.
   */
  beginRecord(type: number, maxLength: number): Buffer {
    if (this.closed) throw closedError('append to');
    if (this.replaying) {
      throw new LogError(
        'ERR_TICKWHEEL_INVALID_STATE',
        'cannot append while replay() runs: the tail it repairs is where appends continue',
      );
    }
    if ((type & 0xff) !== type) {
      throw new LogError(
        'ERR_TICKWHEEL_INVALID_RECORD',
        `record type must be an integer from 0 to 255, got ${String(type)}`,
      );
    }
    if (maxLength > this.maxRecordBytes) {
      throw new LogError(
        'ERR_TICKWHEEL_RECORD_TOO_LARGE',
        `record body of ${maxLength} bytes is over maxRecordBytes (${this.maxRecordBytes}); ` +
          'store large payloads elsewhere or raise maxRecordBytes',
      );
    }
    const size = HEADER + maxLength;
    if (this.activeSize > 0 && this.activeSize + size > this.segmentBytes) this.roll();
    const stage = this.filling ?? this.startStage();
    if (stage.len + size > stage.buf.length) this.grow(stage, size);
    this.recordType = type;
    this.recordRoom = maxLength;
    this.bodyAt = stage.len + HEADER;
    return stage.buf;
  }

  /**
   * Gives up the record begun by beginRecord() (its encoder failed): nothing is appended, and
   * a stage that beginRecord() started for it alone is dropped, so that no empty stage waits
   * for a write that nothing would start.
   */
  abortRecord(): void {
    if (this.recordRoom < 0) return;
    this.recordRoom = -1;
    const stage = this.filling;
    const waiting = stage !== null && stage.waiters !== null && stage.waiters.length > 0;
    if (stage !== null && stage.len === 0 && !waiting && this.queue.at(-1) === stage) {
      this.queue.pop();
      this.filling = null;
      this.recycle(stage.buf);
    }
  }

  /** Completes the record begun by beginRecord(); returns its position (see `lastDurable`). */
  endRecord(length: number): number {
    const stage = this.filling;
    if (stage === null || this.recordRoom < 0 || length > this.recordRoom || length < 0) {
      throw new LogError(
        'ERR_TICKWHEEL_INVALID_STATE',
        'endRecord() without a matching beginRecord()',
      );
    }
    this.recordRoom = -1;
    const buf = stage.buf;
    const at = stage.len;
    const type = this.recordType;
    buf[at] = RECORD_MAGIC;
    buf[at + 1] = type;
    writeU32(buf, at + 2, length);
    writeU32(buf, at + 6, crc32Range(buf, at + HEADER, at + HEADER + length, TYPE_CRC[type]));
    const size = HEADER + length;
    stage.len = at + size;

    const position = this.activeBase + this.activeSize;
    this.activeSize += size;
    this.appendCount++;
    if (stage.waiters !== null) {
      const waiter = new Deferred();
      stage.waiters.push(waiter);
      this.lastDurable = waiter.promise;
    } else {
      this.lastDurable = (stage.done as Deferred).promise;
    }
    if (this.draining === null && !this.kickQueued) {
      this.kickQueued = true;
      queueMicrotask(this.kick);
    }
    return position;
  }

  /** Resolves when everything appended so far is durable; rejects if any of it failed. */
  flush(): Promise<void> {
    const last = this.queue[this.queue.length - 1];
    if (last === undefined) return Promise.resolve();
    if (last.waiters !== null) return last.waiters[last.waiters.length - 1].promise;
    return (last.done as Deferred).promise;
  }

  /**
   * Like flush(), but on disk whatever the fsync policy: under 'never' it also fsyncs every
   * segment written since the last call, and the log's folder if a segment was created. A
   * checkpoint calls it before it records sizes that recovery will hold to be durable.
   */
  async syncAll(): Promise<void> {
    await this.flush();
    if (this.unsynced.size === 0 && !this.unsyncedDirectory) return;
    const segments = [...this.unsynced];
    const directory = this.unsyncedDirectory;
    this.unsynced.clear();
    this.unsyncedDirectory = false;
    try {
      for (const segment of segments) {
        let handle: FileHandle;
        try {
          handle = await open(this.pathOf(segment), 'r+');
        } catch (error) {
          // Deleted since (retention): nothing of it needs to last.
          if ((error as NodeJS.ErrnoException).code === 'ENOENT') continue;
          throw error;
        }
        try {
          await this.sync(handle);
        } finally {
          await handle.close().catch(ignore);
        }
      }
      if (directory) await syncDirectory(this.dir);
    } catch (error) {
      for (const segment of segments) this.unsynced.add(segment);
      if (directory) this.unsyncedDirectory = true;
      throw ioError('syncing the log for a checkpoint', error);
    }
  }

  private roll(): void {
    if (this.active >= LAST_SEGMENT) {
      throw new LogError(
        'ERR_TICKWHEEL_INVALID_STATE',
        `the log has used every segment number up to ${LAST_SEGMENT}; start a new log`,
      );
    }
    this.closedSizes.set(this.active, this.activeSize);
    this.closedBytes += this.activeSize;
    this.active = this.segmentList[this.segmentList.length - 1] + 1;
    this.segmentList.push(this.active);
    this.unborn.add(this.active);
    this.activeBase = this.active * SEGMENT_SPAN;
    this.activeSize = 0;
    this.filling = null;
  }

  private startStage(): Stage {
    const eachRecord = this.eachRecord;
    const stage: Stage = {
      segment: this.active,
      fileOffset: this.activeSize,
      buf: this.spareBuffers.pop() ?? Buffer.allocUnsafeSlow(STAGE_BYTES),
      len: 0,
      kept: 0,
      done: eachRecord ? null : new Deferred(),
      waiters: eachRecord ? [] : null,
      settled: 0,
    };
    this.queue.push(stage);
    this.filling = stage;
    return stage;
  }

  private grow(stage: Stage, need: number): void {
    const bigger = Buffer.allocUnsafeSlow(Math.max(stage.buf.length * 2, stage.len + need));
    stage.buf.copy(bigger, 0, 0, stage.len);
    this.recycle(stage.buf);
    stage.buf = bigger;
  }

  private recycle(buf: Buffer): void {
    if (buf.length <= SPARE_STAGE_LIMIT && this.spareBuffers.length < SPARE_STAGES) {
      this.spareBuffers.push(buf);
    }
  }

  // ---- the writer -----------------------------------------------------------------------

  private readonly kick = (): void => {
    this.kickQueued = false;
    if (this.draining === null && this.queue.length > 0) this.draining = this.drain();
  };

  /**
   * Writes stages one at a time until none is left. Never rejects: failures go to fail().
   * `draining` is cleared in the same synchronous step that finds the queue empty, so an
   * append either sees a running drain that will take its stage or starts a new one. drain()
   * always awaits before it can finish, so the kick's assignment happens first.
   */
  private async drain(): Promise<void> {
    try {
      while (this.queue.length > 0) {
        const stage = this.queue[0];
        if (this.filling === stage) this.filling = null;
        if (await this.writeStage(stage)) {
          this.queue.shift();
          this.recycle(stage.buf);
        }
      }
    } finally {
      this.draining = null;
    }
  }

  private async writeStage(stage: Stage): Promise<boolean> {
    let step = 'opening';
    try {
      const handle = await this.handleFor(stage);
      if (stage.waiters !== null) {
        while (stage.kept < stage.len) {
          const end = stage.kept + HEADER + stage.buf.readUInt32LE(stage.kept + 2);
          step = 'writing to';
          await this.writeRange(handle, stage, stage.kept, end);
          step = 'fsync of';
          await this.sync(handle);
          stage.kept = end;
          stage.waiters[stage.settled++].resolve();
        }
      } else {
        step = 'writing to';
        await this.writeRange(handle, stage, 0, stage.len);
        if (this.policy === 'batch') {
          step = 'fsync of';
          await this.sync(handle);
        } else {
          this.unsynced.add(stage.segment);
        }
        stage.kept = stage.len;
        (stage.done as Deferred).resolve();
      }
      return true;
    } catch (cause) {
      await this.fail(stage, step, cause);
      return false;
    }
  }

  /**
   * The writer's handle for a stage's segment, opened (and created) when the writer moves to
   * that segment. A freshly opened file is cut to the stage's offset. That clears whatever a
   * failed write left behind even when the truncation in fail() could not.
   */
  private async handleFor(stage: Stage): Promise<FileHandle> {
    const current = this.writer;
    if (current !== null && current.segment === stage.segment) return current.handle;
    if (current !== null) {
      this.writer = null;
      await current.handle.close().catch(ignore);
    }
    const handle = await open(this.pathOf(stage.segment), CREATE_FLAGS);
    try {
      if (this.unborn.has(stage.segment)) {
        if (this.policy !== 'never') await syncDirectory(this.dir);
        else this.unsyncedDirectory = true;
        this.unborn.delete(stage.segment);
      }
      const { size } = await handle.stat();
      if (size > stage.fileOffset) await handle.truncate(stage.fileOffset);
      if (size < stage.fileOffset) {
        throw new Error(
          `the file has ${size} bytes but the log expects ${stage.fileOffset}; ` +
            'was it truncated by something else?',
        );
      }
    } catch (error) {
      await handle.close().catch(ignore);
      throw error;
    }
    this.writer = { segment: stage.segment, handle };
    return handle;
  }

  private async writeRange(handle: FileHandle, stage: Stage, from: number, to: number) {
    while (from < to) {
      const written = await this.io.write(
        handle,
        stage.buf,
        from,
        to - from,
        stage.fileOffset + from,
      );
      this.writeCount++;
      if (!(written > 0)) throw new Error(`write made no progress (${String(written)} bytes)`);
      from += written;
    }
  }

  private async sync(handle: FileHandle): Promise<void> {
    const started = performance.now();
    await this.io.sync(handle);
    const ms = performance.now() - started;
    this.fsyncCount++;
    this.fsyncMsTotal += ms;
    if (ms > this.fsyncMsMax) this.fsyncMsMax = ms;
  }

  /**
   * A write or fsync of `stage` failed. The stage's records from `stage.kept` on fail, and so
   * does every stage after it. Positions roll back so the next append lands right after the
   * last good record, the file is cut there, and then the failed records are rejected.
   */
  private async fail(stage: Stage, step: string, cause: unknown): Promise<void> {
    this.failureCount++;
    const goodSize = stage.fileOffset + stage.kept;
    const lost = this.queue.splice(0);
    this.filling = null;
    this.rollBack(stage.segment, goodSize);
    const name = segmentFileName(stage.segment);
    const error = new LogError(
      'ERR_TICKWHEEL_IO',
      `${step} segment ${name} failed: ${describeCause(cause)}. Records from position ` +
        `${stage.segment * SEGMENT_SPAN + goodSize} on were not stored, and their positions ` +
        'will be reused; records acknowledged earlier are intact',
      { cause },
    );
    this.firstFailure ??= error;
    const writer = this.writer;
    this.writer = null;
    if (writer !== null) await writer.handle.close().catch(ignore);
    await truncate(this.pathOf(stage.segment), goodSize).catch(ignore);
    for (const failed of lost) {
      if (failed.waiters !== null) {
        for (let i = failed.settled; i < failed.waiters.length; i++)
          failed.waiters[i].reject(error);
      } else {
        (failed.done as Deferred).reject(error);
      }
      this.recycle(failed.buf);
    }
  }

  /** Makes `segment` active again with `size` bytes, forgetting segments started after it. */
  private rollBack(segment: number, size: number): void {
    while (this.active !== segment) {
      this.segmentList.pop();
      this.unborn.delete(this.active);
      this.active = this.segmentList[this.segmentList.length - 1];
      this.closedBytes -= this.closedSizes.get(this.active) ?? 0;
      this.closedSizes.delete(this.active);
    }
    this.activeBase = segment * SEGMENT_SPAN;
    this.activeSize = size;
  }

  // ---- reading --------------------------------------------------------------------------

  /**
   * Reads the record at `position`, from the staged records or from disk, and verifies its
   * CRC. The body is the caller's to keep.
   */
  async read(position: number): Promise<{ type: number; body: Buffer }> {
    if (this.closed) throw closedError('read from');
    checkPosition(position, 'position');
    const segment = MessageLog.segmentOf(position);
    const offset = position - segment * SEGMENT_SPAN;
    for (const stage of this.queue) {
      const local = offset - stage.fileOffset;
      if (stage.segment === segment && local >= 0 && local < stage.len) {
        return decodeStaged(stage, local, position);
      }
    }
    const size = segment === this.active ? this.activeSize : this.closedSizes.get(segment);
    if (size === undefined || offset >= size) {
      throw new LogError(
        'ERR_TICKWHEEL_INVALID_POSITION',
        size === undefined
          ? `no record at position ${position}: segment ${segment} is not in the log`
          : `no record at position ${position}: segment ${segment} has ${size} bytes`,
      );
    }
    const reader = this.acquireReader(segment);
    try {
      return await readRecord(await reader.handle, position, offset, size - offset);
    } catch (error) {
      if (error instanceof LogError) throw error;
      throw ioError(`reading position ${position} from segment ${segmentFileName(segment)}`, error);
    } finally {
      this.releaseReader(reader);
    }
  }

  /**
   * Reads many records at once: positions in the same segment that lie close together (as the
   * records of messages scheduled together do) share one read of the span between them,
   * instead of one read each. Results come in the order of `positions`; a position that cannot
   * be read yields the error read() would have thrown for it, in its place.
   */
  async readMany(positions: readonly number[]): Promise<Array<ReadResult | LogError>> {
    if (this.closed) throw closedError('read from');
    const results = new Array<ReadResult | LogError>(positions.length);
    const order = positions.map((_, i) => i).sort((a, b) => positions[a] - positions[b]);
    const single = async (i: number) => {
      try {
        results[i] = await this.read(positions[i]);
      } catch (err) {
        if (!(err instanceof LogError)) throw err;
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
      const segment = MessageLog.segmentOf(position);
      const offset = position - segment * SEGMENT_SPAN;
      const size = segment === this.active ? this.activeSize : this.closedSizes.get(segment);
      // Records still staged (not written yet) and unknown positions take the single path.
      const written =
        segment === this.active ? Math.min(size ?? 0, this.writtenEnd()) : (size ?? 0);
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
      const reader = this.acquireReader(span.segment);
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
        this.releaseReader(reader);
      }
      for (const i of span.members) {
        const at = positions[i] - span.segment * SEGMENT_SPAN - span.from;
        const record = recordIn(buf, at);
        // Longer than what was read, or damaged: read() reads it whole or names the damage.
        if (record === undefined) retry.push(i);
        else results[i] = record;
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

  /**
   * Up to `length` bytes of a segment's file from `offset`, as they are, unchecked: what is left
   * of a damaged record, for a repair to name what it held. Empty if the file is not there.
   */
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

  /** Where the active segment's bytes stop being in the file: the first staged byte. */
  private writtenEnd(): number {
    let end = this.activeSize;
    for (const stage of this.queue) {
      if (stage.segment === this.active) end = Math.min(end, stage.fileOffset);
    }
    return end;
  }

  private acquireReader(segment: number): Reader {
    let reader = this.readers.get(segment);
    if (reader !== undefined) {
      this.readers.delete(segment); // re-insert: the map's order is least recently used first
    } else {
      const opened: Reader = { handle: open(this.pathOf(segment), 'r'), users: 0, retired: false };
      opened.handle.catch(() => {
        if (this.readers.get(segment) === opened) this.readers.delete(segment);
      });
      reader = opened;
      if (this.readers.size >= OPEN_READERS) this.retireIdleReader();
    }
    this.readers.set(segment, reader);
    reader.users++;
    return reader;
  }

  private releaseReader(reader: Reader): void {
    reader.users--;
    if (reader.retired && reader.users === 0) closeQuietly(reader.handle);
  }

  private retireReader(segment: number): void {
    const reader = this.readers.get(segment);
    if (reader === undefined) return;
    this.readers.delete(segment);
    reader.retired = true;
    if (reader.users === 0) closeQuietly(reader.handle);
  }

  private retireIdleReader(): void {
    for (const [segment, reader] of this.readers) {
      if (reader.users === 0) {
        this.retireReader(segment);
        return;
      }
    }
  }

  // ---- recovery -------------------------------------------------------------------------

  /**
   * Delivers every good record from `from` (a position; 0 = the start of the oldest segment)
   * to the end, in order, and repairs the tail so appends continue after the last good
   * record. Call it once, right after open() and before any append(). Bodies are copies, the
   * caller's to keep. If onRecord throws, replay stops and rejects with that error.
   */
  async replay(
    onRecord: (type: number, body: Buffer, position: number) => void,
    from = 0,
    options: ReplayOptions = {},
  ): Promise<ReplayReport> {
    if (this.closed) throw closedError('replay');
    if (this.appendCount > 0) {
      throw new LogError(
        'ERR_TICKWHEEL_INVALID_STATE',
        'replay() must run before any append(): it repairs the tail that appends continue from',
      );
    }
    checkPosition(from, 'from');
    const report: ReplayReport = { records: 0, corrupt: [], truncatedBytes: 0, end: 0 };
    const fromSegment = MessageLog.segmentOf(from);
    const segments = this.segmentList.slice();
    this.replaying = true;
    try {
      for (let k = 0; k < segments.length; k++) {
        const segment = segments[k];
        const last = k === segments.length - 1;
        // The last segment is always scanned (its tail may need repair); records before
        // `from` are checked but not delivered.
        if (segment < fromSegment && !last) continue;
        const start = segment === fromSegment ? from - segment * SEGMENT_SPAN : 0;
        const goodEnd = await this.scan(segment, start, from, last, onRecord, report, options);
        if (last) this.activeSize = goodEnd;
      }
    } finally {
      this.replaying = false;
    }
    report.end = this.end;
    return report;
  }

  /** Replays one segment; returns the offset after its last good record. */
  private async scan(
    segment: number,
    start: number,
    deliverFrom: number,
    last: boolean,
    onRecord: (type: number, body: Buffer, position: number) => void,
    report: ReplayReport,
    options: ReplayOptions,
  ): Promise<number> {
    const name = segmentFileName(segment);
    const base = segment * SEGMENT_SPAN;
    const durableBytes = options.durable?.get(segment) ?? 0;
    const readOnly = options.readOnly === true;
    let handle: FileHandle;
    let size: number;
    try {
      handle = await open(this.pathOf(segment), last && !readOnly ? 'r+' : 'r');
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
      let offset = start <= size ? start : 0;
      while (offset < size) {
        let damage: string;
        if (size - offset < HEADER) {
          damage = `header cut short (${size - offset} of ${HEADER} bytes)`;
        } else {
          if (!window.covers(offset, HEADER)) await window.load(offset, HEADER);
          let at = offset - window.base;
          const length = window.buf.readUInt32LE(at + 2);
          if (window.buf[at] !== RECORD_MAGIC) {
            damage = `no record starts here (byte 0x${hex(window.buf[at])}, not magic 0xa7)`;
          } else if (length > size - offset - HEADER) {
            damage = `body length ${length} runs past the end of the segment`;
          } else {
            if (!window.covers(offset, HEADER + length)) {
              await window.load(offset, HEADER + length);
              at = 0;
            }
            const type = window.buf[at + 1];
            const body = Buffer.allocUnsafe(length);
            window.buf.copy(body, 0, at + HEADER, at + HEADER + length);
            if (crc32(body, TYPE_CRC[type]) === window.buf.readUInt32LE(at + 6)) {
              if (base + offset >= deliverFrom) {
                onRecord(type, body, base + offset);
                report.records++;
              }
              offset += HEADER + length;
              continue;
            }
            damage = 'CRC mismatch';
          }
        }
        const durable = offset < durableBytes;
        const next = await resynchronise(window, offset + 1, this.maxRecordBytes);
        if (next >= 0) {
          report.corrupt.push({
            position: base + offset,
            segment,
            reason: damage,
            bytes: next - offset,
            durable,
          });
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
          report.corrupt.push({
            position: base + offset,
            segment,
            reason: `${damage}; no intact record follows in this segment`,
            bytes: size - offset,
            durable,
          });
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

  // ---- retention and shutdown -----------------------------------------------------------

  /**
   * Deletes a closed segment's file. Records of that segment still being written are waited
   * for first. Refuses the active segment; deleting a segment that is not there does nothing.
   */
  async deleteSegment(segment: number): Promise<void> {
    for (;;) {
      if (this.closed) throw closedError('delete a segment of');
      if (segment === this.active) {
        throw new LogError(
          'ERR_TICKWHEEL_SEGMENT_ACTIVE',
          `segment ${segment} is the active segment; only closed segments can be deleted`,
        );
      }
      const pending = this.lastStageOf(segment);
      if (pending === null) break;
      // If that write fails, the segment may become active again, so check again afterwards.
      await (
        pending.waiters?.[pending.waiters.length - 1] ?? (pending.done as Deferred)
      ).promise.catch(ignore);
    }
    const index = this.segmentList.indexOf(segment);
    if (index < 0) return;
    this.segmentList.splice(index, 1);
    const size = this.closedSizes.get(segment) ?? 0;
    this.closedSizes.delete(segment);
    this.closedBytes -= size;
    this.retireReader(segment);
    try {
      await unlink(this.pathOf(segment));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
      const at = this.segmentList.findIndex((s) => s > segment);
      this.segmentList.splice(at < 0 ? this.segmentList.length : at, 0, segment);
      this.closedSizes.set(segment, size);
      this.closedBytes += size;
      throw ioError(`deleting segment ${segmentFileName(segment)}`, error);
    }
  }

  private lastStageOf(segment: number): Stage | null {
    for (let i = this.queue.length - 1; i >= 0; i--) {
      if (this.queue[i].segment === segment) return this.queue[i];
    }
    return null;
  }

  /**
   * Flushes, then closes every file. Later appends throw ERR_TICKWHEEL_CLOSED. Rejects if the
   * final flush or closing the active segment failed.
   */
  close(): Promise<void> {
    if (this.closing === null) {
      this.closed = true;
      this.closing = this.shutdown();
    }
    return this.closing;
  }

  private async shutdown(): Promise<void> {
    let failure: unknown = null;
    try {
      await this.flush();
    } catch (error) {
      failure = error;
    }
    if (this.draining !== null) await this.draining;
    const writer = this.writer;
    this.writer = null;
    if (writer !== null) {
      try {
        await writer.handle.close();
      } catch (error) {
        failure ??= ioError(`closing segment ${segmentFileName(writer.segment)}`, error);
      }
    }
    for (const segment of [...this.readers.keys()]) this.retireReader(segment);
    if (failure !== null) throw failure;
  }

  private pathOf(segment: number): string {
    return `${this.dir}/${segmentFileName(segment)}`;
  }
}

// ---- replay helpers ---------------------------------------------------------------------

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
      throw new LogError(
        'ERR_TICKWHEEL_IO',
        `segment ${this.name} shrank while it was being replayed; is another process using the log?`,
      );
    }
  }
}

/**
 * The first offset at or after `from` that holds a credible record: magic byte, a length
 * within `maxRecordBytes` that fits in the segment, and a matching CRC. Returns -1 if none.
 */
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
    const length = window.buf.readUInt32LE(candidate - window.base + 2);
    if (length <= maxRecordBytes && length <= size - candidate - HEADER) {
      if (!window.covers(candidate, HEADER + length)) await window.load(candidate, HEADER + length);
      const at = candidate - window.base;
      const body = window.buf.subarray(at + HEADER, at + HEADER + length);
      if (crc32(body, TYPE_CRC[window.buf[at + 1]]) === window.buf.readUInt32LE(at + 6)) {
        return candidate;
      }
    }
    offset = candidate + 1;
  }
  return -1;
}

// ---- record decoding --------------------------------------------------------------------

function decodeStaged(stage: Stage, at: number, position: number): { type: number; body: Buffer } {
  const buf = stage.buf;
  if (at + HEADER > stage.len || buf[at] !== RECORD_MAGIC) throw notARecord(position);
  const length = buf.readUInt32LE(at + 2);
  if (at + HEADER + length > stage.len) throw notARecord(position);
  const body = Buffer.allocUnsafe(length);
  buf.copy(body, 0, at + HEADER, at + HEADER + length);
  if (crc32(body, TYPE_CRC[buf[at + 1]]) !== buf.readUInt32LE(at + 6)) {
    throw corruptRecord(position, 'CRC mismatch');
  }
  return { type: buf[at + 1], body };
}

interface ReadResult {
  type: number;
  body: Buffer;
}

/** The whole, CRC-checked record at `at` in `buf`, or undefined if it is not all there or bad. */
function recordIn(buf: Buffer, at: number): ReadResult | undefined {
  if (at < 0 || at + HEADER > buf.length || buf[at] !== RECORD_MAGIC) return undefined;
  const end = at + HEADER + buf.readUInt32LE(at + 2);
  if (end > buf.length) return undefined;
  const body = buf.subarray(at + HEADER, end);
  if (crc32(body, TYPE_CRC[buf[at + 1]]) !== buf.readUInt32LE(at + 6)) return undefined;
  return { type: buf[at + 1], body };
}

async function readRecord(
  handle: FileHandle,
  position: number,
  offset: number,
  available: number,
): Promise<{ type: number; body: Buffer }> {
  const first = Math.min(available, READ_AHEAD_BYTES);
  let record = Buffer.allocUnsafe(first);
  let got = await readFully(handle, record, 0, first, offset);
  if (got < HEADER || record[0] !== RECORD_MAGIC) throw notARecord(position);
  const total = HEADER + record.readUInt32LE(2);
  if (total > available) throw notARecord(position);
  if (total > got) {
    const whole = Buffer.allocUnsafe(total);
    record.copy(whole, 0, 0, got);
    got += await readFully(handle, whole, got, total - got, offset + got);
    record = whole;
    if (got < total) throw corruptRecord(position, 'the record is cut short');
  }
  const body = record.subarray(HEADER, total);
  if (crc32(body, TYPE_CRC[record[1]]) !== record.readUInt32LE(6)) {
    throw corruptRecord(position, 'CRC mismatch');
  }
  return { type: record[1], body };
}

// ---- small helpers ----------------------------------------------------------------------

const CREATE_FLAGS = fsConstants.O_RDWR | fsConstants.O_CREAT;

interface Settings {
  dir: string;
  fsync: FsyncPolicy;
  segmentBytes: number;
  maxRecordBytes: number;
  io: Partial<LogIo> | undefined;
}

function readOptions(options: MessageLogOptions): Settings {
  if (typeof options !== 'object' || options === null) {
    throw invalidOption('options must be an object such as { dir: "data/log" }');
  }
  if (typeof options.dir !== 'string' || options.dir.length === 0) {
    throw invalidOption('dir must be the path of the folder for the log segments');
  }
  const fsync = options.fsync ?? 'batch';
  if (fsync !== 'batch' && fsync !== 'always' && fsync !== 'never') {
    throw invalidOption(`fsync must be 'batch', 'always' or 'never', got ${String(fsync)}`);
  }
  return {
    dir: options.dir,
    fsync,
    segmentBytes: sizeOption(
      options.segmentBytes,
      'segmentBytes',
      DEFAULT_SEGMENT_BYTES,
      1,
      SEGMENT_BYTES_LIMIT,
    ),
    maxRecordBytes: sizeOption(
      options.maxRecordBytes,
      'maxRecordBytes',
      DEFAULT_MAX_RECORD_BYTES,
      0,
      RECORD_BYTES_LIMIT,
    ),
    io: options.io,
  };
}

function sizeOption(
  value: number | undefined,
  name: string,
  fallback: number,
  min: number,
  max: number,
): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < min || value > max) {
    throw invalidOption(
      `${name} must be an integer from ${min} to ${max} bytes, got ${String(value)}`,
    );
  }
  return value;
}

function checkPosition(position: number, name: string): void {
  if (!Number.isSafeInteger(position) || position < 0) {
    throw new LogError(
      'ERR_TICKWHEEL_INVALID_POSITION',
      `${name} must be a log position (a non-negative integer), got ${String(position)}`,
    );
  }
}

function invalidOption(message: string): LogError {
  return new LogError('ERR_TICKWHEEL_INVALID_OPTION', message);
}

function closedError(what: string): LogError {
  return new LogError('ERR_TICKWHEEL_CLOSED', `cannot ${what} the message log: it is closed`);
}

function notARecord(position: number): LogError {
  return corruptRecord(position, 'no intact record header there (is it a record position?)');
}

function corruptRecord(position: number, reason: string): LogError {
  return new LogError(
    'ERR_TICKWHEEL_CORRUPT',
    `record at position ${position} (segment ${MessageLog.segmentOf(position)}, byte ` +
      `${position % SEGMENT_SPAN}) is damaged: ${reason}`,
  );
}

function ioError(what: string, cause: unknown): LogError {
  if (cause instanceof LogError) return cause;
  return new LogError('ERR_TICKWHEEL_IO', `${what} failed: ${describeCause(cause)}`, { cause });
}

/** The cause's message, with its errno code in front if the message does not already say it. */
function describeCause(cause: unknown): string {
  const message = cause instanceof Error ? cause.message : String(cause);
  const code = (cause as { code?: unknown } | null)?.code;
  return typeof code === 'string' && !message.includes(code) ? `${code}: ${message}` : message;
}

function hex(byte: number): string {
  return byte.toString(16).padStart(2, '0');
}

async function readFully(
  handle: FileHandle,
  buffer: Buffer,
  offset: number,
  length: number,
  position: number,
): Promise<number> {
  let done = 0;
  while (done < length) {
    const { bytesRead } = await handle.read(buffer, offset + done, length - done, position + done);
    if (bytesRead === 0) break;
    done += bytesRead;
  }
  return done;
}

function closeQuietly(handle: Promise<FileHandle>): void {
  handle.then((h) => h.close()).catch(ignore);
}

async function syncDirectory(path: string): Promise<void> {
  // Windows cannot open a directory to fsync it; NTFS journals the entry itself.
  if (process.platform === 'win32') return;
  const handle = await open(path, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
