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

export const ENTRY_BYTES = 24;

export interface WindowEntries {
  count: number;
  deliverAt: Float64Array;
  position: Float64Array;
  low: Uint32Array;
  high: Uint32Array;
}

export class WindowIndex {
  private readonly dir: string;
  readonly windowMs: number;
  private readonly buffered = new Map<number, number[]>();
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
    await mkdir(dir, { recursive: true });
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
    let list = this.buffered.get(window);
    if (list === undefined) this.buffered.set(window, (list = []));
    list.push(deliverAt, position, low, high);
    this.known.add(window);
    // Written in the background once enough piles up, so the buffer stays small.
    if (++this.pending >= 16_384) {
      this.pending = 0;
      void this.flush().catch((err: unknown) => process.emitWarning(err as Error));
    }
  }

  private pending = 0;

  get bufferedEntries(): number {
    let n = 0;
    for (const list of this.buffered.values()) n += list.length / 4;
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
    for (const [window, list] of batches) {
      const count = list.length / 4;
      const bytes = Buffer.allocUnsafe(count * ENTRY_BYTES);
      for (let i = 0; i < count; i++) {
        const at = i * ENTRY_BYTES;
        bytes.writeDoubleLE(list[i * 4], at);
        bytes.writeDoubleLE(list[i * 4 + 1], at + 8);
        bytes.writeUInt32LE(list[i * 4 + 2], at + 16);
        bytes.writeUInt32LE(list[i * 4 + 3], at + 20);
      }
      const handle = await open(this.file(window), 'a');
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
