/**
 * Checkpoints, snapshots and retention: what the file store writes besides the log so that
 * recovery is short, and what it deletes so that the directory does not grow without end.
 *
 * A checkpoint (checkpoint.json, every checkpointIntervalMs and at close) syncs the log and the
 * schedule index and then records:
 *   - indexedUntil and frontier: every record before indexedUntil whose message was due at or
 *     after the frontier has its index entry on disk, in index files of at least the sizes
 *     listed in `windows`; recovery then re-indexes only the records after indexedUntil;
 *   - the log's durable extent: each segment the log needs, how many of its bytes were durable
 *     and how many live payloads it held. Recovery holds the log to it: a segment missing or
 *     shorter, or a record failing its CRC inside those bytes, is corruption, not the torn tail
 *     of a crash (damage.ts).
 *
 * A snapshot (snapshot.bin) is the tables as of one log position P, written with a checkpoint
 * once the log has grown by snapshotBytes (or by the last snapshot's size, if larger) past the
 * last one; recovery then replays only the log after P. The IdTable, its largest part, is
 * copied a piece at a time with the event loop running between pieces; everything else is
 * captured in one turn, together with P, so the snapshot is the tables after exactly the
 * records before P.
 *
 * Retention: a segment is deleted once
 *   1. no live message keeps its payload there (segmentLive),
 *   2. every older segment is gone (prefix deletion), and
 *   3. the snapshot's position is not in it or before it.
 * Rule 2 keeps FINISH records at least as long as the SCHEDULE records they finish, so a replay
 * never resurrects a finished message; rule 3 keeps the log a snapshot's recovery replays.
 * Index files whose entries were handed to the queue are deleted at once, or, while a
 * snapshot taken before the hand-over exists (recovery from it reads them again), kept in
 * `loaded` until the next snapshot. One that carried entries on to other files goes only after
 * a checkpoint that covers those (WindowIndex.sync and dropCarried).
 *
 * Invariant: no checkpoint is written while the tables may differ from the log, that is before
 * recovery got through the log (`replayed`) or after a log write failed (the tables then hold
 * changes the log lost): a checkpoint would vouch for records never replayed, and retention
 * would judge segments by the wrong tables.
 */

import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { syncDirectory, type MessageLog } from '../log/index.js';
import { CHECKPOINT_FILE, replaceFile } from './layout.js';
import { segmentOf } from './positions.js';
import {
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

/** A snapshot copies the IdTable this many slots (16 bytes each) per turn of the event loop. */
const COPY_SLOTS = 256 * 1024;
/** ...and moves the entries of this many slots of a growth in progress (random writes). */
const GROW_SLOTS = 32 * 1024;
/**
 * Loaded index windows kept on disk for the snapshot (see retire) beyond which a checkpoint
 * writes a snapshot even if the log has not grown much: one file a window adds up when
 * traffic is low and windows are short.
 */
const KEPT_WINDOWS_LIMIT = 1024;

/** The last checkpoint; one that cannot be read is none (recovery rebuilds the index). */
export async function readCheckpoint(dir: string): Promise<Checkpoint> {
  const none: Checkpoint = { indexedUntil: 0, frontier: Infinity, windows: {}, log: undefined };
  try {
    const text = await readFile(join(dir, CHECKPOINT_FILE), 'utf8');
    const { indexedUntil, frontier, windows, log } = JSON.parse(text) as Record<string, unknown>;
    if (typeof frontier !== 'number' || typeof windows !== 'object' || windows === null) {
      return none;
    }
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
    if (!Array.isArray(entry) || entry.length !== 3) return false;
    if (!entry.every((n) => Number.isSafeInteger(n) && (n as number) >= 0)) return false;
    if ((entry[0] as number) <= previous) return false;
    previous = entry[0] as number;
  }
  return true;
}

export class Checkpoints {
  /** Whether recovery got through the log (see the invariant above). */
  replayed = false;
  /** Log position of the snapshot on disk, or -1. */
  snapshotPosition = -1;
  lastSnapshotBytes = 0;
  /** Bytes appended to the log that the snapshot on disk does not cover. */
  uncoveredBytes = 0;
  private snapshotting = false;
  /** uncoveredBytes at which a snapshot is due (Infinity: none will be written). */
  private snapshotDue = Infinity;
  private readonly snapshotStats = { written: 0, captureMsMax: 0, writeMsLast: 0 };
  /**
   * Index windows whose entries were handed to the queue but whose files are kept, because
   * the snapshot on disk (or the one being written) was taken before: recovery from it reads
   * them again. The next snapshot lets them go.
   */
  private readonly loaded = new Set<string>();
  private running: Promise<void> | undefined;
  private timer: ReturnType<typeof setInterval> | undefined;
  private closing = false;
  /** Set once the directory is found to be no longer this process's: checkpoints stop. */
  private ownerLost = false;
  /**
   * Brings the tables up to date with what the store does not apply as it happens (the
   * hand-outs of messages in flight: handouts.ts), just before a snapshot captures them.
   */
  beforeCapture: () => void = () => {};

  constructor(
    private readonly dir: string,
    private readonly log: MessageLog,
    private readonly index: WindowIndex,
    private readonly tables: Tables,
    private readonly intervalMs: number,
    private readonly snapshotBytes: number,
    /** The store's frontier, read when a checkpoint captures the tables (the store owns it). */
    private readonly frontier: () => number,
    /** Told each checkpoint's outcome: a failing one is retried at the next interval. */
    private readonly faults: StoreFaults,
    /**
     * Rejects with LockLostError once the directory's LOCK is not the file this process locked
     * (lock.ts): from then on no checkpoint writes or deletes anything.
     */
    private readonly checkOwner: () => Promise<void> = async () => {},
  ) {}

  /** Whether snapshots are wanted at all (snapshotBytes: Infinity says never). */
  get snapshots(): boolean {
    return this.snapshotBytes !== Infinity;
  }

  /** Whether an index file was handed over already (it is only kept for the snapshot). */
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
   * A record of `bytes` (header included) was appended and applied. If that makes a snapshot
   * due, a checkpoint starts at once rather than at the next periodic one: the log recovery
   * replays stays close to the threshold instead of growing an interval's worth beyond it.
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
    await this.checkpoint('always');
  }

  /**
   * Syncs the index, records how far it covers the log, writes a snapshot if the log has grown
   * enough since the last one (`when`), and deletes finished segments.
   */
  checkpoint(when: SnapshotWhen = 'auto'): Promise<void> {
    // After a failed recovery (close() on the way out of a failed open) the tables are partial.
    if (!this.replayed) return Promise.resolve();
    // After a failed write the tables may hold changes the log does not.
    if (this.log.firstFailure !== undefined) return Promise.resolve();
    // Another process may own the directory now (lock.ts).
    if (this.ownerLost) return Promise.resolve();
    this.running ??= this.write(when).then(
      () => {
        this.running = undefined;
        this.faults.ok('checkpoint');
      },
      (err: unknown) => {
        this.running = undefined;
        this.faults.fail('checkpoint', err);
        throw err;
      },
    );
    return this.running;
  }

  /**
   * A window whose entries were all handed to the queue: deleted, unless a snapshot taken
   * before (on disk or being written) still needs it to find those messages after a crash.
   */
  async retire(key: string): Promise<void> {
    if (this.snapshotPosition >= 0 || this.snapshotting) this.loaded.add(key);
    else await this.index.delete(key);
  }

  /** Recovery started from the snapshot on disk, at `position`, `bytes` long. */
  async usedSnapshot(position: number, bytes: number): Promise<void> {
    this.snapshotPosition = position;
    this.lastSnapshotBytes = bytes;
    if (!this.snapshots) await this.dropSnapshot();
  }

  stats() {
    return {
      snapshots: this.snapshotStats.written,
      snapshotBytes: this.lastSnapshotBytes,
      snapshotCaptureMsMax: this.snapshotStats.captureMsMax,
      snapshotWriteMsLast: this.snapshotStats.writeMsLast,
      uncoveredLogBytes: this.uncoveredBytes,
      /** 1 while a checkpoint (and maybe a snapshot, with its copy of the tables) is written. */
      checkpointing: this.running === undefined ? 0 : 1,
    };
  }

  private updateSnapshotDue(): void {
    this.snapshotDue =
      this.snapshotBytes === Infinity || !snapshotsSupported || this.log.stats().failures > 0
        ? Infinity
        : Math.max(this.snapshotBytes, this.lastSnapshotBytes);
  }

  private wantsSnapshot(when: SnapshotWhen): boolean {
    // After a failed write the tables may hold changes the log does not (a failed MOVE or
    // FINISH is not undone): only the log is to be trusted until the next recovery.
    this.updateSnapshotDue();
    if (when === 'never' || this.snapshotDue === Infinity) return false;
    if (when === 'always') return this.uncoveredBytes > 0;
    return this.uncoveredBytes >= this.snapshotDue || this.loaded.size > KEPT_WINDOWS_LIMIT;
  }

  private async write(when: SnapshotWhen): Promise<void> {
    // A snapshot's biggest part, the IdTable, is copied a piece at a time first, with the
    // event loop running between pieces (at 10 million messages one copy would pause it for
    // ~150 ms); slots that change meanwhile are copied again when it ends, below.
    const capturing = this.wantsSnapshot(when);
    const ids = this.tables.ids;
    if (capturing) {
      this.snapshotting = true;
      await this.copyIdsGradually();
      // A log write failed meanwhile: the tables are not the log's any more.
      if (this.log.firstFailure !== undefined) {
        ids.endCopy();
        this.snapshotting = false;
        return;
      }
    }
    // From here to the first await is one turn: the checkpoint's position, the segments that
    // may go and the snapshot's tables are all those after every record before that position.
    // (Before endCopy: a slot the catch-up changes is copied again.)
    if (capturing) this.beforeCapture();
    const indexedUntil = this.log.end;
    const frontier = this.frontier();
    const segmentLive = this.tables.segmentLive;
    // Segments that may go, judged by the tables as they are now: once the flush below has
    // made every record so far durable, no crash can bring back a message they hold. (Judged
    // after the flush instead, a FINISH appended meanwhile and lost in a crash could leave a
    // live message whose payload is gone.) A closed segment never gains live messages.
    const segments = this.log.segments();
    const finished: number[] = [];
    for (let i = 0; i < segments.length - 1; i++) {
      if ((segmentLive.get(segments[i]) ?? 0) > 0) break;
      finished.push(segments[i]);
    }
    // The log's durable extent once the sync below is done: each segment it still needs (the
    // finished ones may go), its size and its live payloads. Recovery holds the log to it.
    const extent: LogExtent = segments
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
      // A rehash (the table grew) during the copy voids it: no snapshot this time.
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
      // flush() has nothing to wait for once a failed write emptied the log's queue: the
      // tables judged above may then include records that never reached the disk.
      if (this.log.firstFailure !== undefined) return;
      // Before the first change to the directory: another process may own it now. (Its loss
      // is told by the lock once, as a warning; the checkpoint just stops.)
      if (!(await this.ownsDirectory())) return;
      const carriedFiles = await this.index.sync();
      // Read with the files' sizes, in one turn: a load during the syncs above moved the
      // frontier and deleted the files it took, and a later frontier vouches for less.
      const indexedFrontier = this.frontier();
      const windows = Object.fromEntries(this.index.sizes());
      await replaceFile(
        join(this.dir, CHECKPOINT_FILE),
        JSON.stringify({
          version: 1,
          indexedUntil,
          frontier: indexedFrontier,
          windows,
          log: extent,
        }),
      );
      // Before any segment is deleted below: an older checkpoint would still list it.
      await syncDirectory(this.dir);
      // Index files whose entries were carried to others, which the sync made durable.
      await this.index.dropCarried(carriedFiles);
      // The log up to the snapshot's position is durable and the checkpoint covers it: only
      // now may the snapshot replace the previous one.
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

  /**
   * Copies the IdTable in pieces of COPY_SLOTS slots, yielding to the event loop between. A
   * growth that starts meanwhile voids the copy (endCopy says so).
   */
  private async copyIdsGradually(): Promise<void> {
    const ids = this.tables.ids;
    // A growth of the table still moving entries is finished first, in pieces too.
    await this.inPieces(() => ids.growStep(GROW_SLOTS));
    ids.beginCopy();
    await this.inPieces(() => ids.copyStep(COPY_SLOTS));
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
      // Marked loaded until its file is gone from the index: a load running meanwhile must not
      // read it again and hand over messages the queue took long ago (and may have finished).
      await this.index.delete(window);
      this.loaded.delete(window);
    }
  }

  /** Deletes the snapshot, and the index windows only it needed. */
  private async dropSnapshot(): Promise<void> {
    await removeSnapshot(this.dir);
    this.snapshotPosition = -1;
    for (const window of this.loaded) await this.index.delete(window);
    this.loaded.clear();
  }
}
