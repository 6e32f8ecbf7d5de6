/**
 * The schedule index: append-only files of 24-byte entries (deliverAt f64 | log position f64 |
 * id hash low u32 | high u32) under `index/`. An entry is stale once its id's latest record is
 * another: readers check against the IdTable, so nothing is rewritten. Appends are buffered; a
 * failed write keeps them buffered (reads take them from memory) and is retried with a growing
 * pause at the file's known good size.
 *
 * Which file an entry goes to: a hierarchical timing wheel on disk (docs/storage.md, The
 * schedule index, has a worked example). A level-L file covers 2^L windows, aligned to its
 * span; an entry due n whole windows after the frontier goes to the level floor(log2(n)) file
 * holding its due time (level 0 for n < 2), so at most three files of each level exist. When
 * the frontier passes a file's start, its entries are handed over or appended again a level
 * lower: each is written once per level. A file's key is `<start>` at level 0, else
 * `<start>.<level>`; its name is `<key>.idx`.
 */

import { constants } from 'node:fs';
import { mkdir, open, readdir, readFile, rm, stat, truncate } from 'node:fs/promises';
import { join } from 'node:path';
import { LITTLE_ENDIAN, writeF64, writeU32 } from '../bytes.js';
import { DATA_DIRECTORY_MODE, DATA_FILE_MODE, ifExists, writeFully } from '../log/index.js';

/** The highest level: spans of 2^52 windows, beyond any due time a queue takes. */
const MAX_LEVEL = 52;

export interface IndexFile {
  key: string;
  start: number;
  /** Where its span ends (exclusive): every entry it holds is due before this. */
  end: number;
  level: number;
}

const KEY = /^(-?\d+)(?:\.(\d+))?$/;

/** The file a key names, or undefined for a key of no index file. */
export function fileOfKey(key: string, windowMs: number): IndexFile | undefined {
  const match = KEY.exec(key);
  if (match === null) return undefined;
  const level = match[2] === undefined ? 0 : Number(match[2]);
  if (level > MAX_LEVEL) return undefined;
  return fileAt(Number(match[1]), level, windowMs);
}

function fileAt(start: number, level: number, windowMs: number): IndexFile {
  return {
    key: level === 0 ? String(start) : `${start}.${level}`,
    start,
    end: start + windowMs * 2 ** level,
    level,
  };
}

/** The level of the file an entry due at `deliverAt` goes to while the frontier is `frontier`. */
function levelFor(deliverAt: number, frontier: number, windowMs: number): number {
  const ahead = Number.isFinite(frontier) ? Math.floor((deliverAt - frontier) / windowMs) : 0;
  if (ahead < 2) return 0;
  const level = Math.min(MAX_LEVEL, Math.floor(Math.log2(ahead)));
  // log2 rounds up just below a large power of two: the span must not exceed what is ahead.
  return 2 ** level > ahead ? level - 1 : level;
}

/** The file an entry due at `deliverAt` goes to while the frontier is `frontier`. */
export function fileFor(deliverAt: number, frontier: number, windowMs: number): IndexFile {
  const level = levelFor(deliverAt, frontier, windowMs);
  const span = windowMs * 2 ** level;
  return fileAt(Math.floor(deliverAt / span) * span, level, windowMs);
}

/** Files in the order they come within the horizon: by start, then the shorter first. */
function byStart(a: IndexFile, b: IndexFile): number {
  return a.start - b.start || a.level - b.level;
}

const ENTRY_BYTES = 24;
/** Bytes of a file scan() reads at a time. */
const SCAN_BYTES = ENTRY_BYTES * 43_690;

/** The pause before the first retry of a failed write, doubled after each failure... */
const RETRY_FIRST_MS = 50;
/** ...up to this. */
const RETRY_MAX_MS = 5_000;

interface PendingEntries {
  bytes: Buffer;
  length: number;
}

export class WindowIndex {
  /** Entries not yet written, per file key, already in their on-disk form. */
  private readonly buffered = new Map<string, PendingEntries>();
  /** The file of the latest append and its buffer (appends tend to repeat a file). */
  private lastStart = NaN;
  private lastLevel = NaN;
  private lastPending: PendingEntries | undefined;
  /** Files with entries (on disk or buffered) and not taken yet, by key. */
  private readonly known = new Map<string, IndexFile>();
  private readonly unsynced = new Set<string>();
  /** Bytes written to each file (recorded in checkpoints). */
  private readonly bytes = new Map<string, number>();
  /** Files are chosen by how far ahead of it an entry is due. */
  private frontier = -Infinity;
  /** Files taken since open: their later entries were appended again already. */
  private readonly taken = new Set<string>();
  /** Taken files some of whose entries were appended again: kept until those are durable. */
  private readonly carried = new Set<string>();
  /** Taken files of `carried`, to go once a checkpoint covers what they carried. */
  private readonly deleteAfterCheckpoint = new Set<string>();
  /** The last write, read or delete queued; never rejected, so one failure blocks no other. */
  private tail: Promise<void> = Promise.resolve();
  private retryTimer: ReturnType<typeof setTimeout> | undefined;
  private retryMs = RETRY_FIRST_MS;
  private closed = false;
  private syncFailing = false;

  private constructor(
    private readonly dir: string,
    readonly windowMs: number,
    /** Told the outcome of every write: an error, or undefined once one succeeds. */
    private readonly onWrite: (err: unknown) => void,
  ) {}

  static async open(
    dir: string,
    windowMs: number,
    onWrite: (err: unknown) => void,
  ): Promise<WindowIndex> {
    await mkdir(dir, { recursive: true, mode: DATA_DIRECTORY_MODE });
    const index = new WindowIndex(dir, windowMs, onWrite);
    for (const name of await readdir(dir)) {
      const file = name.endsWith('.idx') ? fileOfKey(name.slice(0, -4), windowMs) : undefined;
      if (file !== undefined) {
        index.known.set(file.key, file);
        // A torn last entry would misalign every later append: cut it (the log re-creates it).
        const { size } = await stat(join(dir, name));
        if (size % ENTRY_BYTES !== 0) await truncate(join(dir, name), size - (size % ENTRY_BYTES));
        index.bytes.set(file.key, size - (size % ENTRY_BYTES));
      } else if (name.endsWith('.tmp')) await rm(join(dir, name), { force: true });
    }
    return index;
  }

  windowOf(deliverAt: number): number {
    return Math.floor(deliverAt / this.windowMs) * this.windowMs;
  }

  /** The horizon moved (it never moves back): entries appended from now on go by it. */
  advance(frontier: number): void {
    if (frontier <= this.frontier) return;
    this.frontier = frontier;
    this.lastStart = NaN; // the level of a due time depends on the frontier
  }

  /** Files that have entries (on disk or buffered), in the order the horizon reaches them. */
  files(): IndexFile[] {
    return [...this.known.values()].sort(byStart);
  }

  append(deliverAt: number, position: number, low: number, high: number): void {
    let pending = this.lastPending;
    const last = this.lastStart;
    if (
      pending === undefined ||
      !(deliverAt >= last && deliverAt < last + this.windowMs * 2 ** this.lastLevel) ||
      levelFor(deliverAt, this.frontier, this.windowMs) !== this.lastLevel
    ) {
      const file = fileFor(deliverAt, this.frontier, this.windowMs);
      pending = this.buffered.get(file.key);
      if (pending === undefined) {
        pending = { bytes: Buffer.allocUnsafe(ENTRY_BYTES * 4), length: 0 };
        this.buffered.set(file.key, pending);
      }
      if (!this.known.has(file.key)) this.known.set(file.key, file);
      this.lastStart = file.start;
      this.lastLevel = file.level;
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

  /** Writes buffered entries; on failure they stay buffered, a retry is scheduled, it rejects. */
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
      // Healed only once an fsync that failed has succeeded too (sync()).
      if (!this.syncFailing) this.onWrite(undefined);
    });
  }

  /** fsyncs the files written since; returns the deleted files for dropCarried() after. */
  async sync(): Promise<string[]> {
    const covered = [...this.deleteAfterCheckpoint];
    await this.flush();
    const keys = [...this.unsynced];
    this.unsynced.clear();
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i];
      try {
        const handle = await ifExists(open(this.path(key), 'r+'));
        if (handle === undefined) continue; // deleted meanwhile: nothing to sync
        try {
          await handle.sync();
        } finally {
          await handle.close();
        }
      } catch (err) {
        for (const unsynced of keys.slice(i)) this.unsynced.add(unsynced);
        this.syncFailing = true;
        this.onWrite(err);
        throw err;
      }
    }
    if (this.syncFailing) {
      this.syncFailing = false;
      this.onWrite(undefined);
    }
    return covered;
  }

  /** Removes deleted files whose carried entries a checkpoint on disk now covers (see sync). */
  dropCarried(keys: readonly string[]): Promise<void> {
    return this.queued(async () => {
      for (const key of keys) {
        if (!this.deleteAfterCheckpoint.delete(key)) continue;
        await rm(this.path(key), { force: true });
      }
    });
  }

  /** Stops retrying failed writes (the store is closing; recovery rebuilds what is missing). */
  close(): void {
    this.closed = true;
    clearTimeout(this.retryTimer);
  }

  /** Every entry of a file: on disk and still buffered, in append order. */
  read(key: string): Promise<EntryChunk> {
    return this.queued(async () => {
      const file = (await ifExists(readFile(this.path(key)))) ?? Buffer.alloc(0);
      // Beyond the known size lie only the remains of a failed write, whose entries are buffered.
      const written = file.subarray(0, Math.min(file.byteLength, this.bytes.get(key) ?? 0));
      const pending = this.buffered.get(key);
      const bytes =
        pending === undefined
          ? written
          : Buffer.concat([written, pending.bytes.subarray(0, pending.length)]);
      return entryChunk(bytes, bytes.length);
    });
  }

  /**
   * A file whose start the horizon passed: returns its entries due before `frontier`, and
   * appends those due later and still `current` to files nearer their time (the first time it
   * is taken since open). Delete the file once its entries are handed over.
   */
  async take(
    key: string,
    frontier: number,
    current: (low: number, high: number, position: number) => boolean,
  ): Promise<EntryChunk> {
    const entries = await this.read(key);
    const file = this.known.get(key);
    if (file === undefined || file.end <= frontier) return entries;
    const carry = !this.taken.has(key);
    this.taken.add(key);
    const { f64, u32 } = entries;
    let due = 0;
    for (let i = 0; i < entries.count; i++) {
      const deliverAt = f64[3 * i];
      const position = f64[3 * i + 1];
      // (copyWithin moves bytes: the id hash, read as a double, keeps its bits.)
      if (deliverAt < frontier) f64.copyWithin(3 * due++, 3 * i, 3 * i + 3);
      else if (carry && current(u32[6 * i + 4], u32[6 * i + 5], position)) {
        this.append(deliverAt, position, u32[6 * i + 4], u32[6 * i + 5]);
        this.carried.add(key);
      }
    }
    entries.count = due;
    return entries;
  }

  /**
   * Every entry of a file (on disk, then buffered), to `visit` a chunk of at most SCAN_BYTES at
   * a time, uncopied where little-endian: reading without taking (list()).
   */
  scan(key: string, visit: (entries: EntryChunk) => void): Promise<void> {
    return this.queued(async () => {
      const known = this.bytes.get(key) ?? 0;
      const handle = await ifExists(open(this.path(key), 'r'));
      if (handle !== undefined) {
        try {
          // Its own ArrayBuffer: aligned, so that typed arrays can view it.
          const chunk = Buffer.from(new ArrayBuffer(Math.min(SCAN_BYTES, known)));
          for (let at = 0; at < known;) {
            const want = Math.min(chunk.length, known - at);
            const { bytesRead } = await handle.read(chunk, 0, want, at);
            const whole = bytesRead - (bytesRead % ENTRY_BYTES);
            if (whole === 0) break;
            visit(entryChunk(chunk, whole));
            at += whole;
          }
        } finally {
          await handle.close();
        }
      }
      const pending = this.buffered.get(key);
      if (pending !== undefined) visit(entryChunk(pending.bytes, pending.length));
    });
  }

  sizes(): Map<string, number> {
    return new Map(this.bytes);
  }

  /**
   * Deletes a file and its buffered entries (one that carried entries stays on disk until a
   * checkpoint covers them, but leaves files() and sizes() at once).
   */
  delete(key: string): Promise<void> {
    return this.queued(async () => {
      this.known.delete(key);
      this.buffered.delete(key);
      this.lastStart = NaN;
      this.lastPending = undefined;
      this.unsynced.delete(key);
      this.bytes.delete(key);
      this.taken.delete(key);
      if (this.carried.delete(key)) this.deleteAfterCheckpoint.add(key);
      else await rm(this.path(key), { force: true });
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

  private path(key: string): string {
    return join(this.dir, `${key}.idx`);
  }

  /** Writes each file's buffered batch at its known end; a failed batch goes back in front. */
  private async writeBuffered(): Promise<void> {
    if (this.buffered.size === 0) return;
    const batches = [...this.buffered];
    this.buffered.clear();
    this.lastStart = NaN;
    this.lastPending = undefined;
    for (let i = 0; i < batches.length; i++) {
      const [key, pending] = batches[i];
      try {
        await this.writeAt(key, pending.bytes.subarray(0, pending.length));
      } catch (err) {
        this.putBack(batches.slice(i));
        throw err;
      }
      this.bytes.set(key, (this.bytes.get(key) ?? 0) + pending.length);
      this.unsynced.add(key);
    }
  }

  private async writeAt(key: string, bytes: Buffer): Promise<void> {
    const handle = await open(
      this.path(key),
      constants.O_WRONLY | constants.O_CREAT,
      DATA_FILE_MODE,
    );
    try {
      await writeFully(handle, bytes, this.bytes.get(key) ?? 0);
    } finally {
      await handle.close();
    }
  }

  /** Batches that were not written, back in the buffer ahead of entries appended since. */
  private putBack(batches: Array<[string, PendingEntries]>): void {
    for (const [key, failed] of batches) {
      const newer = this.buffered.get(key);
      if (newer !== undefined) {
        const merged = Buffer.allocUnsafe(failed.length + newer.bytes.length);
        failed.bytes.copy(merged, 0, 0, failed.length);
        newer.bytes.copy(merged, failed.length, 0, newer.length);
        failed.bytes = merged;
        failed.length += newer.length;
      }
      this.buffered.set(key, failed);
    }
    this.lastStart = NaN;
    this.lastPending = undefined;
  }
}

/**
 * Entries in the on-disk layout: entry i's due time is f64[3i], its log position f64[3i + 1],
 * its id hash u32[6i + 4] (low) and u32[6i + 5] (high).
 */
export interface EntryChunk {
  count: number;
  f64: Float64Array;
  u32: Uint32Array;
}

/** The first `length` bytes of `bytes` as an EntryChunk: views where they can be, else a copy. */
function entryChunk(bytes: Buffer, length: number): EntryChunk {
  const count = Math.floor(length / ENTRY_BYTES);
  if (LITTLE_ENDIAN && bytes.byteOffset % 8 === 0) {
    return {
      count,
      f64: new Float64Array(bytes.buffer, bytes.byteOffset, count * 3),
      u32: new Uint32Array(bytes.buffer, bytes.byteOffset, count * 6),
    };
  }
  const f64 = new Float64Array(count * 3);
  const u32 = new Uint32Array(f64.buffer);
  for (let i = 0; i < count; i++) {
    const at = i * ENTRY_BYTES;
    f64[3 * i] = bytes.readDoubleLE(at);
    f64[3 * i + 1] = bytes.readDoubleLE(at + 8);
    u32[6 * i + 4] = bytes.readUInt32LE(at + 16);
    u32[6 * i + 5] = bytes.readUInt32LE(at + 20);
  }
  return { count, f64, u32 };
}
