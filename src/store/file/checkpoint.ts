/**
 * Checkpoints, snapshots and retention (docs/storage.md, Checkpoints, Snapshots, Retention).
 * A checkpoint syncs the log and the index, then records `indexedUntil` and `frontier` (every
 * record before indexedUntil whose message was due at or after the frontier has its index entry
 * on disk, in files at least as long as `windows`) and the log's durable extent, which recovery
 * holds the log to (damage.ts). A snapshot is the tables after exactly the records before one
 * position. A segment goes once no live payload is in it, every older one is gone and the
 * snapshot's position is after it: a FINISH lasts as long as the SCHEDULE it finishes.
 *
 * Invariant: no checkpoint while the tables may differ from the log (before recovery got
 * through it, `replayed`, or after a log write failed): it would vouch for records never
 * replayed, and retention would judge segments by the wrong tables.
 */

import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { syncDirectory, type MessageLog, segmentOf } from '../log/index.js';
import { CHECKPOINT_FILE, replaceFile } from './layout.js';
import {
  isCount,
  removeSnapshot,
  snapshotsSupported,
  writeSnapshot,
  type StoreSnapshot,
} from './snapshot.js';
import type { StoreFaults } from './faults.js';
import type { Tables } from './table.js';
import { LockLostError } from './lock.js';
import type { WindowIndex } from './window-index.js';

export interface Checkpoint {
  indexedUntil: number;
  frontier: number;
  windows: Record<string, number>;
  /** The log's durable extent (absent when the checkpoint does not hold a valid one). */
  log: LogExtent | undefined;
}

/** [segment, bytes made durable, live payloads] for each segment the log needs, ascending. */
type LogExtent = Array<[segment: number, bytes: number, live: number]>;

/** 'auto': a snapshot if one is due; 'always': if the log grew since the last; 'never'. */
export type SnapshotWhen = 'auto' | 'always' | 'never';

/** IdTable slots a snapshot copies per turn of the event loop... */
const COPY_SLOTS = 256 * 1024;
/** ...and slots of a growth in progress it moves (random writes). */
const GROW_SLOTS = 32 * 1024;
/** Index windows kept for the snapshot (retire) beyond which a snapshot is due anyway. */
const KEPT_WINDOWS_LIMIT = 1024;

/** The last checkpoint; one that cannot be read is none (recovery rebuilds the index). */
export async function readCheckpoint(dir: string): Promise<Checkpoint> {
  const none: Checkpoint = { indexedUntil: 0, frontier: Infinity, windows: {}, log: undefined };
  try {
    const text = await readFile(join(dir, CHECKPOINT_FILE), 'utf8');
    const { indexedUntil, frontier, windows, log } = JSON.parse(text) as Record<string, unknown>;
    // A damaged file that still parses trusts nothing: the index is rebuilt from the log.
    if (typeof frontier !== 'number' || typeof windows !== 'object' || windows === null) {
      return none;
    }
    if (!Object.values(windows).every(isCount)) return none;
    const until = typeof indexedUntil === 'number' && indexedUntil >= 0 ? indexedUntil : 0;
    return {
      indexedUntil: until,
      frontier,
      windows: windows as Record<string, number>,
      // Absent or unreadable: no durable extent to hold to.
      log: isExtent(log) && until > 0 ? log : undefined,
    };
  } catch {
    return none;
  }
}

function isExtent(value: unknown): value is LogExtent {
  if (!Array.isArray(value) || value.length === 0) return false;
  let previous = 0;
  for (const entry of value) {
    if (!Array.isArray(entry) || entry.length !== 3 || !entry.every(isCount)) return false;
    if ((entry[0] as number) <= previous) return false;
    previous = entry[0] as number;
  }
  return true;
}

export class Checkpoints {
  /** Whether recovery got through the log (see the invariant above). */
  replayed = false;
  snapshotPosition = -1;
  lastSnapshotBytes = 0;
  /** Bytes appended to the log that the snapshot on disk does not cover. */
  uncoveredBytes = 0;
  private snapshotting = false;
  /** uncoveredBytes at which a snapshot is due (Infinity: none will be written). */
  private snapshotDue = Infinity;
  private readonly snapshotStats = { written: 0, captureMsMax: 0, writeMsLast: 0 };
  /** Windows handed to the queue, kept because the snapshot predates that (see retire). */
  private readonly loaded = new Set<string>();
  private running: Promise<void> | undefined;
  private timer: ReturnType<typeof setInterval> | undefined;
  private closing = false;
  /** Set once the directory is found to be no longer this process's: checkpoints stop. */
  private ownerLost = false;
  /** Applies what the store does not apply at once (hand-outs: handouts.ts) before a capture. */
  beforeCapture: () => void = () => {};
  /** After retention: compaction (compaction.ts), given the first segment the snapshot needs. */
  compact: (keepFrom: number) => Promise<void> = () => Promise.resolve();

  constructor(
    private readonly dir: string,
    private readonly log: MessageLog,
    private readonly index: WindowIndex,
    private readonly tables: Tables,
    private readonly intervalMs: number,
    private readonly snapshotBytes: number,
    private readonly frontier: () => number,
    /** Told each checkpoint's outcome: a failing one is retried at the next interval. */
    private readonly faults: StoreFaults,
    /** Rejects with LockLostError once the directory is no longer ours (lock.ts). */
    private readonly checkOwner: () => Promise<void>,
  ) {}

  /** An index file handed over already (kept only for the snapshot). */
  wasLoaded(key: string): boolean {
    return this.loaded.has(key);
  }

  /** Once recovery is done: checkpoints from now on, periodically and when a snapshot is due. */
  start(): void {
    this.updateSnapshotDue();
    this.timer = setInterval(() => void this.checkpoint().catch(() => undefined), this.intervalMs);
    this.timer.unref();
  }

  /**
   * A record of `bytes` (header included) was appended and applied. A snapshot due starts a
   * checkpoint at once, so the log recovery replays stays near the threshold.
   */
  appended(bytes: number): void {
    this.uncoveredBytes += bytes;
    if (this.uncoveredBytes >= this.snapshotDue && !this.running && !this.closing) {
      void this.checkpoint().catch(() => undefined); // told through faults
    }
  }

  /** Stops the timer, lets a running checkpoint end, and writes the last one. */
  async close(): Promise<void> {
    this.closing = true;
    if (this.timer !== undefined) clearInterval(this.timer);
    // A failure of the running one was told through faults already.
    while (this.running !== undefined) await this.running.catch(() => undefined);
    await this.checkpoint('always', false); // its failure fails close()
  }

  /**
   * See FileStore.checkpoint; refused while the invariant above does not hold. A failure is told
   * through faults as retried, unless `retried` is false (the checkpoints of open and close:
   * their failure fails the call).
   */
  checkpoint(when: SnapshotWhen = 'auto', retried = true): Promise<void> {
    if (!this.replayed || this.log.firstFailure !== undefined || this.ownerLost) {
      return Promise.resolve();
    }
    this.running ??= this.write(when).then(
      () => {
        this.running = undefined;
        this.faults.ok('checkpoint');
      },
      (err: unknown) => {
        this.running = undefined;
        if (retried) this.faults.fail('checkpoint', err);
        throw err;
      },
    );
    return this.running;
  }

  /** A window wholly handed to the queue: deleted, unless a snapshot taken before needs it. */
  async retire(key: string): Promise<void> {
    if (this.snapshotPosition >= 0 || this.snapshotting) this.loaded.add(key);
    else await this.index.delete(key);
  }

  /** Recovery started from the snapshot on disk, at `position`, `bytes` long. */
  async usedSnapshot(position: number, bytes: number): Promise<void> {
    this.snapshotPosition = position;
    this.lastSnapshotBytes = bytes;
    if (this.snapshotBytes === Infinity) {
      // Snapshots are off: this one goes, and the index windows only it needed.
      await removeSnapshot(this.dir);
      this.snapshotPosition = -1;
      for (const window of this.loaded) await this.index.delete(window);
      this.loaded.clear();
    }
  }

  stats() {
    return {
      snapshots: this.snapshotStats.written,
      snapshotBytes: this.lastSnapshotBytes,
      snapshotCaptureMsMax: this.snapshotStats.captureMsMax,
      snapshotWriteMsLast: this.snapshotStats.writeMsLast,
      uncoveredLogBytes: this.uncoveredBytes,
      checkpointing: this.running === undefined ? 0 : 1,
    };
  }

  private updateSnapshotDue(): void {
    // After a failed write the tables may hold changes the log does not: no more snapshots.
    this.snapshotDue =
      this.snapshotBytes === Infinity || !snapshotsSupported || this.log.stats().failures > 0
        ? Infinity
        : Math.max(this.snapshotBytes, this.lastSnapshotBytes);
  }

  private wantsSnapshot(when: SnapshotWhen): boolean {
    this.updateSnapshotDue();
    if (when === 'never' || this.snapshotDue === Infinity) return false;
    if (when === 'always') return this.uncoveredBytes > 0;
    return this.uncoveredBytes >= this.snapshotDue || this.loaded.size > KEPT_WINDOWS_LIMIT;
  }

  private async write(when: SnapshotWhen): Promise<void> {
    // The IdTable is copied in pieces (a growth in progress finished first, in pieces too): one
    // copy of 10 million would pause ~150 ms. endCopy below copies again the slots changed since.
    const capturing = this.wantsSnapshot(when);
    const ids = this.tables.ids;
    if (capturing) {
      this.snapshotting = true;
      await this.inPieces(() => ids.growStep(GROW_SLOTS));
      ids.beginCopy();
      await this.inPieces(() => ids.copyStep(COPY_SLOTS));
      // A log write failed meanwhile: the tables are not the log's any more.
      if (this.log.firstFailure !== undefined) {
        ids.endCopy();
        this.snapshotting = false;
        return;
      }
    }
    // One turn from here to the first await: position, finished segments and tables all agree.
    // (Before endCopy: a slot the catch-up changes is copied again.)
    if (capturing) this.beforeCapture();
    const indexedUntil = this.log.end;
    const frontier = this.frontier();
    const segmentLive = this.tables.segmentLive;
    // Segments that may go, judged now: once the flush below made every record so far durable,
    // no crash brings back a message they hold (judged after it, a FINISH appended meanwhile
    // and lost could leave a live message without payload). Closed segments gain none.
    const segments = this.log.segments();
    const finished: number[] = [];
    for (let i = 0; i < segments.length - 1; i++) {
      if ((segmentLive.get(segments[i]) ?? 0) > 0) break;
      finished.push(segments[i]);
    }
    // The durable extent once the sync below is done (finished segments may go).
    const log: LogExtent = segments
      .slice(finished.length)
      .map((segment) => [
        segment,
        this.log.segmentSize(segment) ?? 0,
        segmentLive.get(segment) ?? 0,
      ]);
    let snapshot: StoreSnapshot | undefined;
    let covered = 0;
    if (capturing) {
      const started = performance.now();
      const copy = ids.endCopy();
      // Undefined if the table grew during the copy: no snapshot this time.
      if (copy !== undefined) {
        snapshot = {
          position: indexedUntil,
          frontier,
          windowMs: this.index.windowMs,
          ...this.tables.capture(copy),
          loaded: [...this.loaded],
        };
        covered = this.uncoveredBytes;
      } else this.snapshotting = false;
      this.noteCapturePause(performance.now() - started);
    }
    try {
      // On disk whatever the fsync policy: the checkpoint tells recovery these bytes are durable.
      await this.log.syncAll();
      // A failed write: the tables judged above may include records that never reached disk.
      if (this.log.firstFailure !== undefined) return;
      // Before the first change to the directory (the lock tells its loss once).
      if (!(await this.ownsDirectory())) return;
      const carriedFiles = await this.index.sync();
      // Read in one turn with the sizes: a load during the syncs moved the frontier and deleted
      // the files it took.
      const windows = Object.fromEntries(this.index.sizes());
      const checkpoint = { version: 1, indexedUntil, frontier: this.frontier(), windows, log };
      await replaceFile(join(this.dir, CHECKPOINT_FILE), JSON.stringify(checkpoint));
      // Before any segment is deleted below: an older checkpoint would still list it.
      await syncDirectory(this.dir);
      // Index files whose entries were carried to others, which the sync made durable.
      await this.index.dropCarried(carriedFiles);
      // Only now, with its log durable and covered, may the snapshot replace the previous one.
      if (snapshot !== undefined && this.log.stats().failures === 0) {
        await this.writeSnapshot(snapshot, covered);
      }
    } finally {
      snapshot = undefined;
      if (capturing) this.snapshotting = false;
    }
    const keepFrom = this.snapshotPosition < 0 ? Infinity : segmentOf(this.snapshotPosition);
    for (const segment of finished) {
      if (segment >= keepFrom) break;
      await this.log.deleteSegment(segment);
    }
    if (!this.closing) await this.compact(keepFrom);
  }

  private async ownsDirectory(): Promise<boolean> {
    try {
      await this.checkOwner();
      return true;
    } catch (err) {
      if (!(err instanceof LockLostError)) throw err;
      this.ownerLost = true;
      return false;
    }
  }

  /** Runs `step` until it says it is done, one call per turn of the event loop. */
  private async inPieces(step: () => boolean): Promise<void> {
    while (true) {
      const started = performance.now();
      const done = step();
      this.noteCapturePause(performance.now() - started);
      if (done) return;
      await new Promise((resolve) => setImmediate(resolve));
    }
  }

  private noteCapturePause(ms: number): void {
    this.snapshotStats.captureMsMax = Math.max(this.snapshotStats.captureMsMax, ms);
  }

  /** Writes a captured snapshot; a failure is a warning (the log and the index suffice). */
  private async writeSnapshot(snapshot: StoreSnapshot, covered: number): Promise<void> {
    const started = performance.now();
    let bytes: number;
    try {
      bytes = await writeSnapshot(this.dir, snapshot);
    } catch (err) {
      this.faults.report(err, { part: 'snapshot' });
      return;
    }
    this.snapshotStats.writeMsLast = performance.now() - started;
    this.snapshotStats.written++;
    this.snapshotPosition = snapshot.position;
    this.lastSnapshotBytes = bytes;
    this.uncoveredBytes -= covered;
    this.updateSnapshotDue();
    for (const window of snapshot.loaded) {
      // Loaded until its file is gone: a load meanwhile must not hand its messages over again.
      await this.index.delete(window);
      this.loaded.delete(window);
    }
  }
}
