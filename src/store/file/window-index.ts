/**
 * The schedule index: one append-only file per time window, `index/<window start>.idx`, each
 * entry 24 bytes: deliverAt f64 | log position f64 | id hash low u32 | id hash high u32.
 *
 * An entry says "the record at this position scheduled this id for this time". It goes stale
 * when the id's latest record is another one (moved, finished, buried); the reader checks that
 * against the IdTable instead of the index ever being rewritten. Windows are read whole when
 * they come within the horizon and deleted once read: the log, replayed at recovery, is the
 * truth, and the index only saves reading the log to find what is due next.
 *
 * Appends are buffered and written by flush(); sync() makes written entries durable (the
 * checkpoint relies on it). A write that fails (no file descriptors, a full disk, no inodes)
 * loses nothing: its entries stay buffered, it is retried with a growing pause, and reads and
 * deletes do not wait for it: read() takes a window's buffered entries from memory. Each batch
 * is written at the file's known good size, so a retry overwrites what a failed write left.
 */

import { constants } from 'node:fs';
import { mkdir, open, readdir, readFile, rm, stat, truncate } from 'node:fs/promises';
import { join } from 'node:path';
import { writeF64, writeU32 } from '../bytes.js';
import { DATA_DIRECTORY_MODE, DATA_FILE_MODE } from '../log/index.js';

export const ENTRY_BYTES = 24;

/** The pause before the first retry of a failed write, doubled after each failure... */
const RETRY_FIRST_MS = 50;
/** ...up to this. */
const RETRY_MAX_MS = 5_000;

export interface WindowEntries {
  count: number;
  deliverAt: Float64Array;
  position: Float64Array;
  low: Uint32Array;
  high: Uint32Array;
}

interface PendingEntries {
  bytes: Buffer;
  length: number;
}

export class WindowIndex {
  private readonly dir: string;
  readonly windowMs: number;
  /** Entries not yet written, per window, already in their on-disk form. */
  private readonly buffered = new Map<number, PendingEntries>();
  /** The window of the latest append and its buffer (appends tend to repeat a window). */
  private lastWindow = NaN;
  private lastPending: PendingEntries | undefined;
  private readonly known = new Set<number>();
  private readonly unsynced = new Set<number>();
  /** Bytes in each window's file, as written so far (recorded in checkpoints). */
  private readonly bytes = new Map<number, number>();
  /** The last write, read or delete queued; never rejected, so one failure blocks no other. */
  private tail: Promise<void> = Promise.resolve();
  private retryTimer: ReturnType<typeof setTimeout> | undefined;
  private retryMs = RETRY_FIRST_MS;
  private closed = false;

  private constructor(
    dir: string,
    windowMs: number,
    /** Told the outcome of every write: an error, or undefined once one succeeds. */
    private readonly onWrite: (err: unknown) => void,
  ) {
    this.dir = dir;
    this.windowMs = windowMs;
  }

  static async open(
    dir: string,
    windowMs: number,
    onWrite: (err: unknown) => void = () => undefined,
  ): Promise<WindowIndex> {
    await mkdir(dir, { recursive: true, mode: DATA_DIRECTORY_MODE });
    const index = new WindowIndex(dir, windowMs, onWrite);
    for (const name of await readdir(dir)) {
      const match = /^(-?\d+)\.idx$/.exec(name);
      if (match !== null) {
        index.known.add(Number(match[1]));
        // A torn last entry would misalign every later append: cut it (the log re-creates it).
        const { size } = await stat(join(dir, name));
        if (size % ENTRY_BYTES !== 0) await truncate(join(dir, name), size - (size % ENTRY_BYTES));
        index.bytes.set(Number(match[1]), size - (size % ENTRY_BYTES));
      } else if (name.endsWith('.tmp')) await rm(join(dir, name), { force: true });
    }
    return index;
  }

  windowOf(deliverAt: number): number {
    return Math.floor(deliverAt / this.windowMs) * this.windowMs;
  }

  /** Window starts that have entries (on disk or buffered), ascending. */
  windows(): number[] {
    return [...this.known].sort((a, b) => a - b);
  }

  append(deliverAt: number, position: number, low: number, high: number): void {
    const window = this.windowOf(deliverAt);
    let pending = this.lastPending;
    if (window !== this.lastWindow || pending === undefined) {
      pending = this.buffered.get(window);
      if (pending === undefined) {
        pending = { bytes: Buffer.allocUnsafe(ENTRY_BYTES * 4), length: 0 };
        this.buffered.set(window, pending);
      }
      this.known.add(window);
      this.lastWindow = window;
      this.lastPending = pending;
    }
    if (pending.length + ENTRY_BYTES > pending.bytes.length) {
      const bigger = Buffer.allocUnsafe(pending.bytes.length * 2);
      pending.bytes.copy(bigger, 0, 0, pending.length);
      pending.bytes = bigger;
    }
    const bytes = pending.bytes;
    let at = writeF64(bytes, pending.length, deliverAt);
    at = writeF64(bytes, at, position);
    at = writeU32(bytes, at, low);
    pending.length = writeU32(bytes, at, high);
    // Written in the background once enough piles up, so the buffer stays small.
    if (++this.pending >= 16_384) {
      this.pending = 0;
      void this.flush().catch(() => undefined); // told through onWrite, and retried
    }
  }

  private pending = 0;

  get bufferedEntries(): number {
    let n = 0;
    for (const pending of this.buffered.values()) n += pending.length / ENTRY_BYTES;
    return n;
  }

  /**
   * Writes buffered entries to their files. Rejects if a write fails; the entries stay
   * buffered and a retry is scheduled.
   */
  flush(): Promise<void> {
    return this.queued(async () => {
      try {
        await this.writeBuffered();
      } catch (err) {
        this.onWrite(err);
        this.scheduleRetry();
        throw err;
      }
      this.retryMs = RETRY_FIRST_MS;
      this.onWrite(undefined);
    });
  }

  /** fsyncs every file written since the last sync. */
  async sync(): Promise<void> {
    await this.flush();
    const windows = [...this.unsynced];
    this.unsynced.clear();
    for (let i = 0; i < windows.length; i++) {
      const window = windows[i];
      try {
        const handle = await open(this.file(window), 'r+').catch((err: NodeJS.ErrnoException) => {
          if (err.code === 'ENOENT') return undefined; // deleted meanwhile: nothing to sync
          throw err;
        });
        if (handle === undefined) continue;
        try {
          await handle.sync();
        } finally {
          await handle.close();
        }
      } catch (err) {
        for (const unsynced of windows.slice(i)) this.unsynced.add(unsynced);
        this.onWrite(err);
        throw err;
      }
    }
  }

  /** Stops retrying failed writes (the store is closing; recovery rebuilds what is missing). */
  close(): void {
    this.closed = true;
    clearTimeout(this.retryTimer);
  }

  /** Every entry of a window: on disk and still buffered, in append order. */
  read(window: number): Promise<WindowEntries> {
    return this.queued(() => this.readNow(window));
  }

  private async readNow(window: number): Promise<WindowEntries> {
    const file = await readFile(this.file(window)).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return Buffer.alloc(0);
      throw err;
    });
    // Beyond the known size lie only the remains of a failed write, whose entries are buffered.
    const written = file.subarray(0, Math.min(file.byteLength, this.bytes.get(window) ?? 0));
    const pending = this.buffered.get(window);
    const bytes =
      pending === undefined
        ? written
        : Buffer.concat([written, pending.bytes.subarray(0, pending.length)]);
    const count = Math.floor(bytes.byteLength / ENTRY_BYTES);
    const entries: WindowEntries = {
      count,
      deliverAt: new Float64Array(count),
      position: new Float64Array(count),
      low: new Uint32Array(count),
      high: new Uint32Array(count),
    };
    for (let i = 0; i < count; i++) {
      const at = i * ENTRY_BYTES;
      entries.deliverAt[i] = bytes.readDoubleLE(at);
      entries.position[i] = bytes.readDoubleLE(at + 8);
      entries.low[i] = bytes.readUInt32LE(at + 16);
      entries.high[i] = bytes.readUInt32LE(at + 20);
    }
    return entries;
  }

  /** Window start -> bytes in its file. */
  sizes(): Map<number, number> {
    return new Map(this.bytes);
  }

  /** Deletes a window's file and the entries of it still buffered. */
  delete(window: number): Promise<void> {
    return this.queued(async () => {
      this.known.delete(window);
      this.buffered.delete(window);
      this.lastWindow = NaN;
      this.lastPending = undefined;
      this.unsynced.delete(window);
      this.bytes.delete(window);
      await rm(this.file(window), { force: true });
    });
  }

  /** Runs `work` after every write, read and delete queued before it, whatever their outcome. */
  private queued<T>(work: () => Promise<T>): Promise<T> {
    const run = this.tail.then(work);
    this.tail = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  private scheduleRetry(): void {
    if (this.closed || this.retryTimer !== undefined) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      void this.flush().catch(() => undefined);
    }, this.retryMs);
    this.retryTimer.unref();
    this.retryMs = Math.min(this.retryMs * 2, RETRY_MAX_MS);
  }

  private file(window: number): string {
    return join(this.dir, `${window}.idx`);
  }

  /**
   * Writes each window's buffered entries at the end of what its file is known to hold. A batch
   * leaves the buffer only once written: appends made meanwhile start a new one, and a failed
   * batch goes back in front of them.
   */
  private async writeBuffered(): Promise<void> {
    if (this.buffered.size === 0) return;
    const batches = [...this.buffered];
    this.buffered.clear();
    this.lastWindow = NaN;
    this.lastPending = undefined;
    for (let i = 0; i < batches.length; i++) {
      const [window, pending] = batches[i];
      try {
        await this.writeAt(window, pending.bytes.subarray(0, pending.length));
      } catch (err) {
        this.putBack(batches.slice(i));
        throw err;
      }
      this.bytes.set(window, (this.bytes.get(window) ?? 0) + pending.length);
      this.unsynced.add(window);
    }
  }

  private async writeAt(window: number, bytes: Buffer): Promise<void> {
    const handle = await open(
      this.file(window),
      constants.O_WRONLY | constants.O_CREAT,
      DATA_FILE_MODE,
    );
    try {
      let done = 0;
      const start = this.bytes.get(window) ?? 0;
      while (done < bytes.byteLength) {
        const { bytesWritten } = await handle.write(
          bytes,
          done,
          bytes.byteLength - done,
          start + done,
        );
        done += bytesWritten;
      }
    } finally {
      await handle.close();
    }
  }

  /** Batches that were not written, back in the buffer ahead of entries appended since. */
  private putBack(batches: Array<[number, PendingEntries]>): void {
    for (const [window, failed] of batches) {
      const newer = this.buffered.get(window);
      if (newer !== undefined) {
        const merged = Buffer.allocUnsafe(failed.length + newer.bytes.length);
        failed.bytes.copy(merged, 0, 0, failed.length);
        newer.bytes.copy(merged, failed.length, 0, newer.length);
        failed.bytes = merged;
        failed.length += newer.length;
      }
      this.buffered.set(window, failed);
    }
    this.lastWindow = NaN;
    this.lastPending = undefined;
  }
}
