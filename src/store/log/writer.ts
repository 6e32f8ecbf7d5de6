/**
 * Appending: records are encoded straight into staging buffers (the one RecordSlot reserve()
 * hands out), given their positions at once, and written by one writer with at most one write
 * in flight; nothing is allocated per record. Under 'batch', records staged during a write and
 * fsync share the next ones (group commit: docs/storage.md, Durability).
 *
 * A `commitLater` record starts no write: it rides the next one, or goes LATER_MS later, so
 * records nobody waits for (hand-outs) delay none that are waited for. `beforeWrite` runs just
 * before staged records are taken, to append such records; at exit they are written
 * synchronously (exit-write.ts).
 *
 * A failed write or fsync fails its record and every one staged after it (their positions
 * assumed its bytes): the segment is cut back to the last good record, whose end the next
 * append takes again, and they reject with ERR_TICKWHEEL_IO. A caller must forget their positions.
 */

import { open, truncate, type FileHandle } from 'node:fs/promises';
import { TickwheelUnavailableError } from '../../errors.js';
import { LogError, closedError, describeCause, ioError, type LogFailure } from './errors.js';
import { CREATE_FLAGS, DATA_FILE_MODE, ignore, syncDirectory, writeFully } from './files.js';
import { RECORD_HEADER_BYTES, writeHeader } from './format.js';
import { forgetAtExit, writeAtExit, writeRangeSync, type StagedWrites } from './exit-write.js';
import type { LogSettings } from './options.js';
import { SEGMENT_SPAN, segmentFileName } from './positions.js';
import type { SegmentTable } from './segments.js';

class Deferred {
  readonly promise: Promise<void>;
  resolve!: () => void;
  reject!: (error: LogFailure) => void;
  constructor() {
    this.promise = new Promise<void>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    // Awaiting `durable` is optional: a failure must not crash the process as unhandled.
    this.promise.catch(ignore);
  }
}

/** Records staged for one write to one segment from `fileOffset`; fixed once taken. */
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
  /** It holds a record committed with `commit`, or LATER_MS passed: it is to be written now. */
  urgent: boolean;
}

/** A record being appended. One per writer, reused. */
export interface RecordSlot {
  /** The staging buffer: write the body from `at`, at most the reserved length. */
  readonly buf: Buffer;
  readonly at: number;
  /** The `durable` promise of the record committed last. */
  readonly durable: Promise<void>;
  /** Completes the record with its real body length; returns its position. */
  commit(length: number): number;
  /** As commit, but starts no write (see the top of the file). */
  commitLater(length: number): number;
  /** Gives the record up (its encoder failed): nothing is appended. */
  abort(): void;
}

export interface WriterStats {
  appends: number;
  writes: number;
  /** fsyncs of segment files (directory syncs after creating a segment are not counted). */
  fsyncs: number;
  fsyncMsTotal: number;
  fsyncMsMax: number;
  /** Writes or fsyncs that failed (each rolled the log back). */
  failures: number;
}

const HEADER = RECORD_HEADER_BYTES;
/** The slot's buffer once its stage's is let go, so that it keeps no large one alive. */
const NO_BUFFER = Buffer.alloc(0);
/** Staging buffers start this big and double when a batch outgrows them. */
const STAGE_BYTES = 256 * 1024;
/** Staging buffers up to this size are kept for reuse; larger ones go back to the GC. */
const SPARE_STAGE_LIMIT = 8 * 1024 * 1024;
const SPARE_STAGES = 2;
/** A commitLater record is written at most this long after: what a SIGKILL can take. */
const LATER_MS = 10;

export class Writer implements StagedWrites {
  private readonly queue: Stage[] = [];
  /** The stage appends go to, if it may still grow. */
  private filling: Stage | null = null;
  private readonly spareBuffers: Buffer[] = [];
  private handle: { segment: number; handle: FileHandle } | null = null;
  private draining: Promise<void> | null = null;
  private kickQueued = false;
  /** Writes records committed with commitLater that nothing else has written (LATER_MS). */
  private laterTimer: ReturnType<typeof setTimeout> | undefined;
  beforeWrite: (() => void) | undefined;
  private preparing = false;
  /** The reserved record: its type and room (-1: none). */
  private recordType = 0;
  private recordRoom = -1;
  private readonly slot: RecordSlot & { buf: Buffer; at: number; durable: Promise<void> };
  firstFailure: LogFailure | undefined;
  readonly counts: WriterStats = {
    appends: 0,
    writes: 0,
    fsyncs: 0,
    fsyncMsTotal: 0,
    fsyncMsMax: 0,
    failures: 0,
  };
  closed = false;
  /** Set while replay runs: appends would land where replay is repairing. */
  replaying = false;

  constructor(
    private readonly settings: LogSettings,
    private readonly table: SegmentTable,
  ) {
    this.slot = {
      buf: NO_BUFFER,
      at: 0,
      durable: Promise.resolve(),
      commit: (length: number) => this.commit(length, true),
      commitLater: (length: number) => this.commit(length, false),
      abort: () => this.abort(),
    };
    writeAtExit(this);
  }

  /** Writes every staged byte not known written, synchronously, as the process exits. */
  writeStagedSync(): void {
    if (this.firstFailure !== undefined) return;
    this.prepare();
    for (const stage of this.queue) {
      if (stage.kept >= stage.len) continue;
      const current = this.handle;
      const fd =
        current !== null && current.segment === stage.segment ? current.handle.fd : undefined;
      const path = this.pathOf(stage.segment);
      writeRangeSync(fd, path, stage.buf, stage.kept, stage.len, stage.fileOffset);
    }
  }

  reserve(type: number, maxLength: number): RecordSlot {
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
    if (maxLength > this.settings.maxRecordBytes) {
      throw new LogError(
        'ERR_TICKWHEEL_RECORD_TOO_LARGE',
        `record body of ${maxLength} bytes is over maxRecordBytes (${this.settings.maxRecordBytes}); ` +
          'store large payloads elsewhere or raise maxRecordBytes',
      );
    }
    const size = HEADER + maxLength;
    const table = this.table;
    if (table.activeSize > 0 && table.activeSize + size > this.settings.segmentBytes) {
      table.roll();
      this.filling = null;
    }
    const stage = this.filling ?? this.startStage();
    if (stage.len + size > stage.buf.length) this.grow(stage, size);
    this.recordType = type;
    this.recordRoom = maxLength;
    this.slot.buf = stage.buf;
    this.slot.at = stage.len + HEADER;
    return this.slot;
  }

  private abort(): void {
    if (this.recordRoom < 0) return;
    this.recordRoom = -1;
    // A stage started for this record alone is dropped: nothing would start its write.
    const stage = this.filling;
    const waiting = stage !== null && stage.waiters !== null && stage.waiters.length > 0;
    if (stage !== null && stage.len === 0 && !waiting && this.queue.at(-1) === stage) {
      this.queue.pop();
      this.filling = null;
      this.recycle(stage.buf);
    }
  }

  private commit(length: number, urgent: boolean): number {
    const stage = this.filling;
    if (stage === null || this.recordRoom < 0 || length > this.recordRoom || length < 0) {
      throw new LogError('ERR_TICKWHEEL_INVALID_STATE', 'commit() without a matching reserve()');
    }
    this.recordRoom = -1;
    const at = stage.len;
    writeHeader(stage.buf, at, this.recordType, length);
    const size = HEADER + length;
    stage.len = at + size;
    const table = this.table;
    const position = table.activeBase + table.activeSize;
    table.activeSize += size;
    this.counts.appends++;
    if (stage.waiters !== null) {
      const waiter = new Deferred();
      stage.waiters.push(waiter);
      this.slot.durable = waiter.promise;
    } else {
      this.slot.durable = (stage.done as Deferred).promise;
    }
    if (urgent) {
      stage.urgent = true;
      this.kickSoon();
    } else {
      this.writeLater();
    }
    return position;
  }

  /** Asks for a write within LATER_MS, even if nothing is staged now (see beforeWrite). */
  writeLater(): void {
    if (this.laterTimer !== undefined || this.closed) return;
    this.laterTimer = setTimeout(this.hurry, LATER_MS);
    // Not a reason to keep the process alive: at exit, staged records are written anyway.
    this.laterTimer.unref();
  }

  /** Lets beforeWrite append what is to go out now (never into itself). */
  private prepare(): void {
    if (this.beforeWrite === undefined || this.preparing) return;
    this.preparing = true;
    try {
      this.beforeWrite();
    } finally {
      this.preparing = false;
    }
  }

  /** Has every staged record written now, those committed with commitLater too. */
  private readonly hurry = (): void => {
    if (this.laterTimer !== undefined) clearTimeout(this.laterTimer);
    this.laterTimer = undefined;
    this.prepare();
    if (this.queue.length === 0) return;
    for (const stage of this.queue) stage.urgent = true;
    this.kickSoon();
  };

  private kickSoon(): void {
    if (this.draining !== null || this.kickQueued) return;
    this.kickQueued = true;
    queueMicrotask(this.kick);
  }

  /** Resolves when everything appended so far is durable; rejects if any of it failed. */
  flush(): Promise<void> {
    this.hurry();
    const last = this.queue.at(-1);
    return last === undefined ? Promise.resolve() : settledLast(last);
  }

  /** The staged bytes holding `offset` of `segment`, for a read of a record not yet written. */
  staged(segment: number, offset: number): { buf: Buffer; at: number; end: number } | undefined {
    for (const stage of this.queue) {
      const local = offset - stage.fileOffset;
      if (stage.segment === segment && local >= 0 && local < stage.len) {
        return { buf: stage.buf, at: local, end: stage.len };
      }
    }
    return undefined;
  }

  /** Where `segment`'s bytes stop being in its file: its first staged byte, or its size. */
  writtenEnd(segment: number): number {
    let end = this.table.sizeOf(segment) ?? 0;
    for (const stage of this.queue) {
      if (stage.segment === segment) end = Math.min(end, stage.fileOffset);
    }
    return end;
  }

  /** Settles once nothing of `segment` waits to be written (or its write failed). */
  async idle(segment: number): Promise<void> {
    if (this.pending(segment)) this.hurry();
    for (let i = this.queue.length - 1; i >= 0; i--) {
      const stage = this.queue[i];
      if (stage.segment === segment) {
        await settledLast(stage).catch(ignore);
        return;
      }
    }
  }

  pending(segment: number): boolean {
    return this.queue.some((stage) => stage.segment === segment);
  }

  async sync(handle: FileHandle): Promise<void> {
    const started = performance.now();
    await this.settings.io.sync(handle);
    const ms = performance.now() - started;
    this.counts.fsyncs++;
    this.counts.fsyncMsTotal += ms;
    if (ms > this.counts.fsyncMsMax) this.counts.fsyncMsMax = ms;
  }

  /** Flushes and closes the segment being written; rejects with the first failure. */
  async shutdown(): Promise<void> {
    let failure: unknown = null;
    try {
      await this.flush();
    } catch (error) {
      failure = error;
    }
    if (this.draining !== null) await this.draining;
    const current = this.handle;
    this.handle = null;
    if (current !== null) {
      try {
        await current.handle.close();
      } catch (error) {
        failure ??= ioError(`closing segment ${segmentFileName(current.segment)}`, error);
      }
    }
    if (this.laterTimer !== undefined) clearTimeout(this.laterTimer);
    this.laterTimer = undefined;
    forgetAtExit(this);
    if (failure !== null) throw failure;
  }

  private startStage(): Stage {
    const eachRecord = this.settings.fsync === 'always';
    const stage: Stage = {
      segment: this.table.active,
      fileOffset: this.table.activeSize,
      buf: this.spareBuffers.pop() ?? Buffer.allocUnsafeSlow(STAGE_BYTES),
      len: 0,
      kept: 0,
      done: eachRecord ? null : new Deferred(),
      waiters: eachRecord ? [] : null,
      settled: 0,
      urgent: false,
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
    if (this.slot.buf === buf) this.slot.buf = NO_BUFFER;
    if (buf.length <= SPARE_STAGE_LIMIT && this.spareBuffers.length < SPARE_STAGES) {
      this.spareBuffers.push(buf);
    }
  }

  private readonly kick = (): void => {
    this.kickQueued = false;
    if (this.draining === null && this.queue.some((stage) => stage.urgent)) {
      this.draining = this.drain();
    }
  };

  /**
   * Writes stages until none is to be written now; never rejects (failures go to fail()).
   * `draining` is cleared in the step that finds none, so an append either sees a drain that
   * will take its stage or starts one. A drain starts only with an urgent stage, so it awaits
   * before it can finish, after the kick's assignment.
   */
  private async drain(): Promise<void> {
    try {
      while (this.queue.length > 0) {
        if (!this.queue.some((waiting) => waiting.urgent)) break;
        this.prepare();
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
      const io = this.settings.io;
      if (stage.waiters !== null) {
        while (stage.kept < stage.len) {
          const end = stage.kept + HEADER + stage.buf.readUInt32LE(stage.kept + 2);
          step = 'writing to';
          await writeFully(handle, stage.buf, stage.fileOffset, stage.kept, end, io, this.counts);
          step = 'fsync of';
          await this.sync(handle);
          stage.kept = end;
          stage.waiters[stage.settled++].resolve();
        }
      } else {
        step = 'writing to';
        await writeFully(handle, stage.buf, stage.fileOffset, 0, stage.len, io, this.counts);
        if (this.settings.fsync === 'batch') {
          step = 'fsync of';
          await this.sync(handle);
        } else {
          this.table.unsynced.add(stage.segment);
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
   * The handle for a stage's segment, opened (created) when the writer moves to it, and cut
   * to the stage's offset: that clears what a failed write left even if fail() could not.
   */
  private async handleFor(stage: Stage): Promise<FileHandle> {
    const current = this.handle;
    if (current !== null && current.segment === stage.segment) return current.handle;
    if (current !== null) {
      this.handle = null;
      await current.handle.close().catch(ignore);
    }
    if (this.table.unborn.has(stage.segment)) await this.settings.beforeNewSegment?.();
    const handle = await open(this.pathOf(stage.segment), CREATE_FLAGS, DATA_FILE_MODE);
    try {
      if (this.table.unborn.has(stage.segment)) {
        if (this.settings.fsync !== 'never') await syncDirectory(this.settings.dir);
        else this.table.unsyncedDirectory = true;
        this.table.unborn.delete(stage.segment);
      }
      const { size } = await handle.stat();
      if (size > stage.fileOffset) await handle.truncate(stage.fileOffset);
      if (size < stage.fileOffset) {
        throw new TickwheelUnavailableError(
          'ERR_TICKWHEEL_IO',
          `the file has ${size} bytes but the log expects ${stage.fileOffset}; ` +
            'was it truncated by something else?',
        );
      }
    } catch (error) {
      await handle.close().catch(ignore);
      throw error;
    }
    this.handle = { segment: stage.segment, handle };
    return handle;
  }

  /**
   * A write or fsync failed: the records from `stage.kept` on and every later stage fail.
   * Positions roll back to the last good record, the file is cut there, then they reject.
   */
  private async fail(stage: Stage, step: string, cause: unknown): Promise<void> {
    this.counts.failures++;
    const goodSize = stage.fileOffset + stage.kept;
    const lost = this.queue.splice(0);
    this.filling = null;
    this.table.rollBack(stage.segment, goodSize);
    const name = segmentFileName(stage.segment);
    // A refused new segment (beforeNewSegment: the lock lost) keeps its code.
    const error = new TickwheelUnavailableError(
      cause instanceof TickwheelUnavailableError ? cause.code : 'ERR_TICKWHEEL_IO',
      `${step} segment ${name} failed: ${describeCause(cause)}. Records from position ` +
        `${stage.segment * SEGMENT_SPAN + goodSize} on were not stored, and their positions ` +
        'will be reused; records acknowledged earlier are intact',
      { cause },
    );
    this.firstFailure ??= error;
    const current = this.handle;
    this.handle = null;
    if (current !== null) await current.handle.close().catch(ignore);
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

  private pathOf(segment: number): string {
    return `${this.settings.dir}/${segmentFileName(segment)}`;
  }
}

/** The promise of a stage's last record: settled once the whole stage is written or failed. */
function settledLast(stage: Stage): Promise<void> {
  return (stage.waiters?.at(-1) ?? (stage.done as Deferred)).promise;
}
