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
 * checkpoint relies on it).
 */

import { mkdir, open, readdir, readFile, rm, stat, truncate } from 'node:fs/promises';
import { join } from 'node:path';
import { writeF64, writeU32 } from '../bytes.js';
import { DATA_DIRECTORY_MODE, DATA_FILE_MODE } from '../log/index.js';

export const ENTRY_BYTES = 24;

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
  private writing: Promise<void> = Promise.resolve();

  private constructor(dir: string, windowMs: number) {
    this.dir = dir;
    this.windowMs = windowMs;
  }

  static async open(dir: string, windowMs: number): Promise<WindowIndex> {
    await mkdir(dir, { recursive: true, mode: DATA_DIRECTORY_MODE });
    const index = new WindowIndex(dir, windowMs);
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
      void this.flush().catch((err: unknown) => process.emitWarning(err as Error));
    }
  }

  private pending = 0;

  get bufferedEntries(): number {
    let n = 0;
    for (const pending of this.buffered.values()) n += pending.length / ENTRY_BYTES;
    return n;
  }

  /** Writes buffered entries to their files. */
  flush(): Promise<void> {
    this.writing = this.writing.then(() => this.writeBuffered());
    return this.writing;
  }

  /** fsyncs every file written since the last sync. */
  async sync(): Promise<void> {
    await this.flush();
    const windows = [...this.unsynced];
    this.unsynced.clear();
    for (const window of windows) {
      const handle = await open(this.file(window), 'r+').catch(() => undefined);
      if (handle === undefined) continue;
      try {
        await handle.sync();
      } finally {
        await handle.close();
      }
    }
  }

  /** Every entry of a window: on disk and still buffered, in append order. */
  async read(window: number): Promise<WindowEntries> {
    await this.flush();
    const bytes = await readFile(this.file(window)).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return Buffer.alloc(0);
      throw err;
    });
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

  async delete(window: number): Promise<void> {
    await this.flush();
    this.known.delete(window);
    this.lastWindow = NaN;
    this.unsynced.delete(window);
    this.bytes.delete(window);
    await rm(this.file(window), { force: true });
  }

  private file(window: number): string {
    return join(this.dir, `${window}.idx`);
  }

  private async writeBuffered(): Promise<void> {
    if (this.buffered.size === 0) return;
    const batches = [...this.buffered];
    this.buffered.clear();
    this.lastWindow = NaN;
    this.lastPending = undefined;
    for (const [window, pending] of batches) {
      const bytes = pending.bytes.subarray(0, pending.length);
      const handle = await open(this.file(window), 'a', DATA_FILE_MODE);
      try {
        await handle.write(bytes);
      } finally {
        await handle.close();
      }
      this.bytes.set(window, (this.bytes.get(window) ?? 0) + bytes.byteLength);
      this.unsynced.add(window);
    }
  }
}
