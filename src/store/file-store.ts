/**
 * FileStore: the embedded, durable store. Layout of its directory:
 *
 *   LOCK               pid of the owning process (see lock.ts)
 *   format.json        { format }: the on-disk format; other formats are refused at open
 *   log/*.seg          the message log: every change of every message, appended (log.ts)
 *   index/<t>.idx      the schedule index, one file per time window (window-index.ts)
 *   checkpoint.json    { indexedUntil, frontier, windows }: index entries of all records
 *                      before indexedUntil that were due at or after frontier are on disk,
 *                      in index files of (at least) the sizes listed in windows
 *   snapshot.bin       the tables below as of one log position (snapshot.ts), so recovery
 *                      replays only the log after it
 *   repair.json        what repairs of a damaged log dropped, and the damaged stretches they
 *                      accepted as lost (present only after a repair)
 *
 * The checkpoint also records the log's durable extent: each segment the log needs and how many
 * of its bytes were durable (`log`). Recovery holds the log to it: a segment missing or shorter,
 * or a record failing its CRC inside those bytes, is corruption, not the torn tail of a crash;
 * the store then refuses to open (TickwheelCorruptError) unless asked to repair.
 *
 * Memory per live message beyond the horizon: one IdTable slot (id hash -> position of its
 * latest record), 20-30 bytes. Payloads stay on disk until their message comes near. Counts
 * per topic and per hour (counts.ts) cost memory per topic and per hour, not per message.
 *
 * Every change goes through `apply`, the same function that replays the log at recovery, so
 * the in-memory tables are by construction what a replay would rebuild.
 *
 * Retention: a segment can go once no live message keeps its payload there, every older
 * segment is gone (prefix deletion), and the snapshot's position is not in it or before it.
 * The second rule keeps FINISH records at least as long as the SCHEDULE records they finish,
 * so a replay never resurrects a finished message; the third keeps the log a snapshot's
 * recovery replays.
 */

import { mkdir, open, readFile, readdir, rename, stat } from 'node:fs/promises';
import { join } from 'node:path';
import {
  TickwheelCorruptError,
  TickwheelStateError,
  TickwheelTypeError,
  checkOption,
  type StoreDamage,
} from '../errors.js';
import { checkId, checkTopic, type MessageState } from '../queue/message.js';
import type {
  RecoveryReport,
  RepairReport,
  Store,
  StoreCounts,
  StoredMessage,
} from '../queue/store.js';
import { MessageCounts, TopicNames } from './counts.js';
import { readF64, writeUtf8 } from './bytes.js';
import { IdTable, hashHigh, hashId, hashIdBytes, hashLow, type IdTableArrays } from './id-table.js';
import { lockDirectory, type DirectoryLock } from './lock.js';
import {
  LogError,
  MessageLog,
  RECORD_HEADER_BYTES,
  RECORD_MAGIC,
  SEGMENT_SPAN,
  type FsyncPolicy,
  type LogIo,
  type RecordSlot,
  type ReplayOptions,
  type ReplayReport,
} from './log/index.js';
import {
  BURY,
  FINISH,
  MOVE,
  OUTCOME_ACKED,
  OUTCOME_CANCELLED,
  SCHEDULE,
  decodeMove,
  decodeSchedule,
  encodeFinish,
  finishLength,
  idLength,
  idStart,
  moveWithReasonRoom,
  payloadPositionOf,
  previousDeliverAt,
  recordDeliverAt,
  recordId,
  scheduleLength,
  topicLength,
  topicStart,
  writeFinish,
  writeMoveWithReason,
  writeScheduleHead,
} from './records.js';
import {
  SnapshotRejected,
  readSnapshot,
  removeSnapshot,
  removeSnapshotTemp,
  snapshotsSupported,
  writeSnapshot,
  type StoreSnapshot,
} from './snapshot.js';
import { WindowIndex } from './window-index.js';

export interface FileStoreOptions {
  dir: string;
  /** 'batch' (default): group commit; 'always': one fsync per change; 'never': no fsync. */
  fsync?: FsyncPolicy;
  /** Log segment size. Default 64 MiB. */
  segmentBytes?: number;
  /** Width of one schedule-index window. Default 60,000 ms. */
  windowMs?: number;
  /** How often index files are synced and a checkpoint written. Default 5,000 ms. */
  checkpointIntervalMs?: number;
  /**
   * A checkpoint also writes a snapshot of the tables once the log has grown by this many
   * bytes since the last one, or by the last snapshot's size if that is larger; close()
   * writes one whenever the log grew. Default 64 MiB. Infinity: never (recovery then replays
   * the whole log).
   */
  snapshotBytes?: number;
  /**
   * Open a data directory whose log is damaged where it had been made durable by dropping what
   * cannot be read, and report exactly what (`recovery.repair`, and `repair.json` in the
   * directory), instead of refusing with ERR_TICKWHEEL_CORRUPT. See docs/storage.md, Recovery.
   */
  repair?: boolean;
  /** @internal Test hook: replaces the log writer's file operations (see MessageLog). */
  logIo?: Partial<LogIo>;
}

/** 'plan': a repair that changes nothing and only reports (FileStore.planRepair). */
type OpenMode = 'open' | 'repair' | 'plan';

/** The on-disk format this code writes and reads (format.json). 1: records without topics. */
export const STORE_FORMAT = 2;

const EMPTY_PAYLOAD = new Uint8Array(0);
const REPAIR_FILE = 'repair.json';
/** recovery.repair, when read back at a later open, names at most this many messages. */
const REPAIR_NAMES_SHOWN = 100;
/** A repair reads at most this much of a damaged record to name the message it held. */
const DAMAGED_READ_BYTES = 64 * 1024;
/** A snapshot copies the IdTable this many slots (16 bytes each) per turn of the event loop. */
const COPY_SLOTS = 256 * 1024;
/** ...and moves the entries of this many slots of a growth in progress (random writes). */
const GROW_SLOTS = 32 * 1024;
const FORMAT_FILE = 'format.json';

/** Where the latest record of an id whose hash another live id already owns is. */
interface CollidedId {
  position: number;
  deliverAt: number;
}

/** A message that used up its attempts. */
interface DeadMessage {
  /** Its BURY record. */
  position: number;
  /** Its SCHEDULE record, which keeps its segment. */
  payloadPosition: number;
  topic: string;
}

type SnapshotWhen = 'auto' | 'always' | 'never';

/** statesAt: records asked of MessageLog.readMany at once. */
const STATES_PER_READ = 8192;
const DEFAULT_SNAPSHOT_BYTES = 64 * 1024 * 1024;
/**
 * Loaded index windows kept on disk for the snapshot (see retire) beyond which a checkpoint
 * writes a snapshot even if the log has not grown much: one file a window adds up when
 * traffic is low and windows are short.
 */
const KEPT_WINDOWS_LIMIT = 1024;

function segmentOf(position: number): number {
  return Math.floor(position / SEGMENT_SPAN);
}

function where(position: number): string {
  return `log segment ${segmentOf(position)} at byte ${position % SEGMENT_SPAN}`;
}

/** A record that cannot be read back: damaged on disk, or in a part of the log that is gone. */
function isDamage(err: unknown): err is LogError {
  return (
    err instanceof LogError &&
    (err.code === 'ERR_TICKWHEEL_CORRUPT' || err.code === 'ERR_TICKWHEEL_INVALID_POSITION')
  );
}

export class FileStore implements Store {
  readonly dir: string;
  private readonly log: MessageLog;
  private readonly index: WindowIndex;
  private readonly lock: DirectoryLock;
  private readonly checkpointIntervalMs: number;
  private readonly snapshotBytes: number;
  private readonly ids = new IdTable();
  private readonly collisions = new Map<string, CollidedId>();
  private readonly deadIds = new Map<string, DeadMessage>();
  /**
   * The low hash half of every id put in deadIds or collisions since both were last empty: a
   * superset of those ids' hashes, so apply() makes an id string (and looks it up by string)
   * only for records that may be theirs, not for every record while any message is dead.
   */
  private readonly exactLows = new Set<number>();
  /** Live messages whose payload (SCHEDULE record) is in each segment. */
  private readonly segmentLive = new Map<number, number>();
  private readonly tally = new MessageCounts();
  private readonly topicNames = new TopicNames();
  /**
   * Latest-record positions of the live messages handed to the queue (due before the
   * frontier): they have no index entry to find them by, so a snapshot lists them.
   */
  private near = new Set<number>();
  /**
   * Index windows whose entries were handed to the queue but whose files are kept, because
   * the snapshot on disk (or the one being written) was taken before: recovery from it reads
   * them again. The next snapshot lets them go.
   */
  private readonly loaded = new Set<number>();
  /** Every live message due before this has been handed to the queue. */
  private frontier = -Infinity;
  /**
   * While recovery replays the log after a snapshot: the tail records due before the frontier,
   * flat, four numbers each (deliverAt, position, id hash low, id hash high).
   */
  private tailDue: number[] | undefined;
  private checkpointTimer: ReturnType<typeof setInterval> | undefined;
  /** Messages added by each pending write (keyed by its promise), undone if the write fails. */
  private readonly addsByWrite = new Map<Promise<void>, MessageState[]>();
  private checkpointing: Promise<void> | undefined;
  private closed = false;
  /** Whether recover() got through the log; no checkpoint may be written before. */
  private replayed = false;
  /** Log position of the snapshot on disk, or -1. */
  private snapshotPosition = -1;
  private snapshotting = false;
  private lastSnapshotBytes = 0;
  /** Bytes appended to the log that the snapshot on disk does not cover. */
  private uncoveredBytes = 0;
  /** uncoveredBytes at which a snapshot is due (Infinity: none will be written). */
  private snapshotDue = Infinity;
  private snapshotStats = { written: 0, captureMsMax: 0, writeMsLast: 0 };
  private damagedSkipped = 0;
  private readonly mode: OpenMode;
  /** While a repair replays the log: what it learns of messages whose schedule it did not read. */
  private untraced: Untraced | undefined;
  /**
   * While the whole log is replayed next to a snapshot that could not be used: finishes, at or
   * after its position, of messages whose schedule was not read, by the segment of the payload.
   */
  private lateFinishes: { from: number; bySegment: Map<number, number> } | undefined;

  private constructor(
    dir: string,
    log: MessageLog,
    index: WindowIndex,
    lock: DirectoryLock,
    checkpointIntervalMs: number,
    snapshotBytes: number,
    mode: OpenMode,
  ) {
    this.dir = dir;
    this.log = log;
    this.index = index;
    this.lock = lock;
    this.checkpointIntervalMs = checkpointIntervalMs;
    this.snapshotBytes = snapshotBytes;
    this.mode = mode;
  }

  static open(options: FileStoreOptions): Promise<FileStore> {
    return FileStore.openAs(options, options?.repair === true ? 'repair' : 'open');
  }

  /**
   * What `repair: true` would find and drop in a data directory, changing nothing there (the
   * dry run of `tickwheel repair`). Holds the directory's lock while it reads the whole log.
   */
  static async planRepair(options: Omit<FileStoreOptions, 'repair'>): Promise<RepairReport> {
    const store = await FileStore.openAs(options, 'plan');
    try {
      const recovery = await store.recover(Date.now(), () => {});
      return recovery.repair as RepairReport;
    } finally {
      await store.close();
    }
  }

  private static async openAs(options: FileStoreOptions, mode: OpenMode): Promise<FileStore> {
    if (typeof options?.dir !== 'string' || options.dir.length === 0) {
      throw new TickwheelTypeError('ERR_TICKWHEEL_INVALID_OPTION', 'dir must be a directory path');
    }
    const fsync = options.fsync ?? 'batch';
    if (fsync !== 'batch' && fsync !== 'always' && fsync !== 'never') {
      throw new TickwheelTypeError(
        'ERR_TICKWHEEL_INVALID_OPTION',
        `fsync must be 'batch', 'always' or 'never', got ${String(fsync)}`,
      );
    }
    const windowMs = checkOption(options.windowMs ?? 60_000, 'windowMs', 1, 86_400_000, true);
    const interval = checkOption(options.checkpointIntervalMs ?? 5000, 'checkpointIntervalMs', 10);
    const snapshotBytes = checkOption(
      options.snapshotBytes ?? DEFAULT_SNAPSHOT_BYTES,
      'snapshotBytes',
      0,
      Infinity,
    );
    await mkdir(options.dir, { recursive: true });
    const lock = await lockDirectory(options.dir);
    try {
      await checkFormat(options.dir);
      const log = await MessageLog.open({
        dir: join(options.dir, 'log'),
        fsync,
        ...(options.segmentBytes === undefined ? {} : { segmentBytes: options.segmentBytes }),
        ...(options.logIo === undefined ? {} : { io: options.logIo }),
      });
      const index = await WindowIndex.open(join(options.dir, 'index'), windowMs);
      return new FileStore(options.dir, log, index, lock, interval, snapshotBytes, mode);
    } catch (err) {
      await lock.release();
      throw err;
    }
  }

  /** The first window boundary at or after `until`: the store loads whole windows. */
  horizonEnd(until: number): number {
    const window = this.index.windowOf(until);
    return window === until ? until : window + this.index.windowMs;
  }

  async recover(horizon: number, onDue: (message: MessageState) => void): Promise<RecoveryReport> {
    const started = performance.now();
    const checkpoint = await this.readCheckpoint();
    const repairs = await readRepairs(this.dir);
    const frontier = this.horizonEnd(horizon);
    this.frontier = frontier;
    let verdict: RecoveryReport['snapshot'] = 'none';
    // The snapshot's tables if its file reads; `usable` if recovery can start from them.
    let found: { snapshot: StoreSnapshot; bytes: number } | undefined;
    let usable = false;
    try {
      if (this.mode !== 'plan') await removeSnapshotTemp(this.dir);
      found = await readSnapshot(this.dir);
      const problem = found && this.snapshotProblem(found.snapshot, checkpoint, frontier);
      if (problem) throw new SnapshotRejected(problem);
      usable = found !== undefined;
    } catch (err) {
      verdict = `rejected: ${err instanceof SnapshotRejected ? err.reason : String(err)}`;
    }
    const durable = durableExtent(checkpoint, found?.snapshot);
    const accepted = repairs.accepted;
    // Before anything is read or changed: what the durable extent says must be there.
    const missing = this.missingOrShort(durable, accepted);
    const context: RecoveryContext = { started, checkpoint, durable, accepted, missing };
    if (this.mode !== 'open')
      return this.recoverWithRepair(context, found?.snapshot, repairs, onDue);
    if (missing.length > 0) throw corruptionError(this.dir, missing);

    const corrupt: RecoveryReport['corrupt'] = [];
    const damaged = (position: number, err: LogError) =>
      corrupt.push({ where: where(position), reason: err.message });
    const replay: ReplayOptions = durable === undefined ? {} : { durable: durable.bytes };
    let truncatedBytes: number;
    let replayedBytes: number;
    if (usable && found !== undefined) {
      verdict = 'used';
      const { snapshot, bytes } = found;
      found = undefined; // its arrays now belong to the tables
      const report = await this.replayTail(snapshot, checkpoint.indexedUntil, replay);
      this.refuseDamage(report, accepted, this.payloadsGone(this.segmentLive));
      for (const c of skipped(report, accepted)) corrupt.push(c);
      truncatedBytes = report.truncatedBytes;
      replayedBytes = this.bytesFrom(snapshot.position);
      const due = await this.dueAfterSnapshot(frontier);
      await this.handOver(due, onDue, damaged);
      this.snapshotPosition = snapshot.position;
      this.lastSnapshotBytes = bytes;
      this.uncoveredBytes = replayedBytes;
      if (this.snapshotBytes === Infinity) await this.dropSnapshot();
    } else {
      // A snapshot that reads but cannot be used still says which segments held live payloads.
      const rejected = found?.snapshot;
      found = undefined;
      const late =
        rejected === undefined
          ? undefined
          : { from: rejected.position, bySegment: new Map<number, number>() };
      this.lateFinishes = late;
      const from = (durable?.first ?? 0) * SEGMENT_SPAN;
      let report: ReplayReport;
      try {
        report = await this.replayAll(checkpoint, { from, replay, index: true });
      } finally {
        this.lateFinishes = undefined;
      }
      // (Segments before the first one the checkpoint needs were all finished by then.)
      const gone =
        rejected === undefined
          ? []
          : this.payloadsGone(
              rejected.segmentLive.filter(([segment]) => segment >= (durable?.first ?? 0)),
              late,
            );
      this.refuseDamage(report, accepted, gone);
      // Only now: a refused open leaves the snapshot for a repair to compare with. (Windows it
      // relies on that replayAll deleted make the checkpoint reject it, should this crash.)
      await removeSnapshot(this.dir);
      for (const c of skipped(report, accepted)) corrupt.push(c);
      truncatedBytes = report.truncatedBytes;
      replayedBytes = this.bytesFrom(from);
      this.uncoveredBytes = replayedBytes;
      await this.handOver(this.dueAfterReplay(frontier), onDue, damaged);
    }
    const last = repairs.reports[repairs.reports.length - 1];
    return this.recovered(context, {
      live: 0,
      corrupt,
      truncatedBytes,
      snapshot: verdict,
      replayedBytes,
      durationMs: 0,
      ...(last === undefined ? {} : { repair: shortened(last) }),
    });
  }

  /** The end every recovery shares: hands over windows, writes a checkpoint, starts the timer. */
  private async recovered(
    context: RecoveryContext,
    report: RecoveryReport,
  ): Promise<RecoveryReport> {
    for (const window of this.index.windows()) {
      if (window < this.frontier) await this.retire(window);
    }
    await this.checkpoint('never');
    this.updateSnapshotDue();
    this.checkpointTimer = setInterval(
      () => void this.checkpoint().catch(warn),
      this.checkpointIntervalMs,
    );
    this.checkpointTimer.unref();
    report.live = this.ids.size + this.collisions.size;
    report.durationMs = performance.now() - context.started;
    return report;
  }

  /**
   * Throws TickwheelCorruptError if the replay found damage in bytes that had been made durable
   * (and no repair accepted it), or `more` is not empty. The log and the snapshot are then as
   * they were found (the replay cut at most a torn tail), and no checkpoint is written.
   */
  private refuseDamage(report: ReplayReport, accepted: StoreDamage[], more: StoreDamage[]): void {
    const damage = [...more];
    for (const c of report.corrupt) {
      if (c.durable && !isAccepted(accepted, c.segment, c.position % SEGMENT_SPAN)) {
        damage.push(damageOf(c));
      }
    }
    if (damage.length === 0) return;
    this.replayed = false;
    throw corruptionError(this.dir, damage);
  }

  /**
   * Segments holding the payload of a live message that are not in the log: retention never
   * deletes such a segment, so they were lost. `live`: live payloads per segment, now (a
   * snapshot's tables after its tail) or at a snapshot's position, less `finished` since.
   */
  private payloadsGone(
    live: Iterable<[number, number]>,
    finished?: { bySegment: Map<number, number> },
  ): StoreDamage[] {
    const gone: StoreDamage[] = [];
    for (const [segment, count] of live) {
      const left = count - (finished?.bySegment.get(segment) ?? 0);
      if (left > 0 && this.log.segmentSize(segment) === undefined) {
        gone.push({ segment, from: 0, reason: 'missing', messages: left });
      }
    }
    return gone.sort((a, b) => a.segment - b.segment);
  }

  /**
   * What the durable extent (the last checkpoint's, or the snapshot's position) says must be in
   * the log and is not: segments missing or shorter than recorded, and segments missing between
   * two that are there (retention only ever deletes the oldest), less what a repair accepted.
   */
  private missingOrShort(durable: Durable | undefined, accepted: StoreDamage[]): StoreDamage[] {
    const damage: StoreDamage[] = [];
    const listed = new Set<number>();
    for (const [segment, bytes] of durable?.bytes ?? []) {
      listed.add(segment);
      const size = this.log.segmentSize(segment);
      if (size === undefined) {
        if (isAccepted(accepted, segment, 0)) continue;
        const live = durable?.live.get(segment);
        damage.push({
          segment,
          from: 0,
          to: bytes,
          reason: 'missing',
          ...(live === undefined ? {} : { messages: live }),
        });
      } else if (size < bytes && !isAccepted(accepted, segment, size)) {
        damage.push({
          segment,
          from: size,
          to: bytes,
          reason: `cut short: the file ends at byte ${size}, and ${bytes} bytes of it had been made durable`,
        });
      }
    }
    const present = this.log.segments();
    const first = durable?.first ?? present[0];
    const kept = present.filter((segment) => segment >= first);
    for (let i = 1; i < kept.length; i++) {
      for (let segment = kept[i - 1] + 1; segment < kept[i]; segment++) {
        if (listed.has(segment) || isAccepted(accepted, segment, 0)) continue;
        damage.push({ segment, from: 0, reason: 'missing' });
      }
    }
    return damage.sort((a, b) => a.segment - b.segment || a.from - b.from);
  }

  /**
   * Recovery for `repair: true` and for planRepair: whatever the snapshot, a replay of every
   * record that can be read, from the first segment the log needs. Then the messages the damage
   * took are named (or counted); a repair drops them for good, a plan only reports them.
   */
  private async recoverWithRepair(
    context: RecoveryContext,
    snapshot: StoreSnapshot | undefined,
    repairs: Repairs,
    onDue: (message: MessageState) => void,
  ): Promise<RecoveryReport> {
    const plan = this.mode === 'plan';
    const { checkpoint, durable, accepted } = context;
    const untraced = new Untraced(durable?.end ?? Infinity);
    this.untraced = untraced;
    const from = (durable?.first ?? 0) * SEGMENT_SPAN;
    let report: ReplayReport;
    try {
      report = await this.replayAll(checkpoint, {
        from,
        replay: {
          ...(durable === undefined ? {} : { durable: durable.bytes }),
          readOnly: plan,
          cutDurable: !plan,
        },
        index: !plan,
      });
    } finally {
      this.untraced = undefined;
    }
    untraced.capture(this.segmentLive);
    const found = report.corrupt.filter(
      (c) => !isAccepted(accepted, c.segment, c.position % SEGMENT_SPAN),
    );
    const damage = mergeDamage([...context.missing, ...found.map(damageOf)]);
    const repair: RepairReport = {
      at: new Date().toISOString(),
      applied: false,
      damage,
      lost: 0,
      dropped: [],
      unnamed: 0,
      exact: true,
      notes: [],
    };
    let finish: MessageState[] = [];
    if (damage.length > 0) {
      const lost = await this.lostMessages(damage, accepted, found, untraced, snapshot, durable);
      repair.dropped = lost.dropped;
      repair.unnamed = lost.unnamed;
      repair.lost = lost.dropped.length + lost.unnamed;
      repair.exact = lost.exact;
      repair.notes = lost.notes;
      finish = lost.finish;
    }
    const recovery: RecoveryReport = {
      live: this.ids.size + this.collisions.size - finish.length,
      corrupt: found.map((c) => ({ where: where(c.position), reason: c.reason })),
      truncatedBytes: report.truncatedBytes,
      snapshot: snapshot === undefined ? 'none' : 'rejected: a repair replays the whole log',
      replayedBytes: this.bytesFrom(from),
      durationMs: performance.now() - context.started,
      repair,
    };
    if (plan) {
      this.replayed = false; // close() must write nothing
      return recovery;
    }
    if (damage.length > 0) {
      // First the records that make the drops durable, then the snapshot goes (its tables
      // still hold the lost messages), then what was accepted as lost is recorded.
      await Promise.all(finish.map((message) => this.finish(message, 'cancelled')));
      await removeSnapshot(this.dir);
      repair.applied = true;
      await writeRepairs(this.dir, {
        accepted: [...accepted, ...damage],
        reports: [...repairs.reports, repair],
      });
    } else {
      await removeSnapshot(this.dir);
    }
    this.uncoveredBytes = recovery.replayedBytes;
    const damaged = (position: number, err: LogError) =>
      recovery.corrupt.push({ where: where(position), reason: err.message });
    await this.handOver(this.dueAfterReplay(this.frontier), onDue, damaged);
    return this.recovered(context, recovery);
  }

  /**
   * The messages that `damage` (new) took: named where their id can be read anywhere, counted
   * where it cannot, and those whose state in the tables cannot be trusted (to be finished).
   *
   *   - a message moved or buried by a readable record whose schedule (the payload) was not
   *     read: named from that record;
   *   - with a snapshot taken after the damage, whose tables are the truth up to its position:
   *     every message whose latest record by the snapshot is unreadable; a readable message
   *     whose latest change by the snapshot was lost (stale); a message the snapshot says was
   *     finished that the readable log brings back;
   *   - without one: the live messages per segment the last checkpoint counted, against those
   *     the readable log knows of;
   *   - what is left of a damaged record, when it names a message that the snapshot or an index
   *     entry confirms.
   */
  private async lostMessages(
    damage: StoreDamage[],
    accepted: StoreDamage[],
    found: ReplayReport['corrupt'],
    untraced: Untraced,
    snapshot: StoreSnapshot | undefined,
    durable: Durable | undefined,
  ) {
    const unreadable = (position: number) =>
      isAccepted(damage, segmentOf(position), position % SEGMENT_SPAN) ||
      isAccepted(accepted, segmentOf(position), position % SEGMENT_SPAN);
    const dropped = new Map<string, RepairReport['dropped'][number]>();
    const drop = (id: string, topic: string, reason: string) => {
      if (!dropped.has(id)) dropped.set(id, { id, topic, reason });
    };
    const finish: MessageState[] = [];
    const notes: string[] = [];
    const finishing = new Set<number>();
    const finishAt = async (positions: number[], why: (i: number) => string) => {
      const states = await this.statesAt(positions, () => {});
      for (let i = 0; i < states.length; i++) {
        const state = states[i];
        if (state === undefined || finishing.has(positions[i])) continue;
        finishing.add(positions[i]);
        drop(state.id, state.topic, why(i));
        finish.push(state);
      }
    };

    const orphanHashes = new IdTable();
    for (const [id, orphan] of untraced.orphans) {
      drop(
        id,
        orphan.topic,
        `its schedule record, which holds the payload, cannot be read (${where(orphan.payloadPosition)})`,
      );
      hashId(id);
      orphanHashes.set(hashLow, hashHigh, orphan.position);
    }
    const remains = await this.damagedRecords(found);
    const indexed = await this.indexEntriesIn(unreadable);
    const named = new Set<DamagedRecord>();
    const kinds = ['', 'schedule', 'reschedule', 'finish', 'dead-letter'];
    const damagedReason = (r: DamagedRecord) =>
      `its ${kinds[r.type]} record is damaged (${where(r.position)}: ${r.reason})`;
    let unnamed = 0;
    let exact: boolean;

    if (snapshot !== undefined) {
      const end = snapshot.position;
      const before = new IdTable();
      before.adoptArrays(snapshot.ids);
      const stale: number[] = [];
      const staleFrom: number[] = [];
      const gone: Array<{ low: number; high: number; position: number }> = [];
      before.forEach((low, high, was) => {
        if (was >= end) return;
        const now = this.ids.get(low, high);
        if (now === was || now >= end || now > was) return;
        if (now >= 0) {
          stale.push(now);
          staleFrom.push(was);
        } else if (
          unreadable(was) &&
          untraced.finished.get(low, high) < 0 &&
          orphanHashes.get(low, high) < 0
        ) {
          gone.push({ low, high, position: was });
        }
      });
      const back: number[] = [];
      this.ids.forEach((low, high, now) => {
        if (now < end && before.get(low, high) < 0) back.push(now);
      });
      const collided = new Map(snapshot.collisions.map(([id, position]) => [id, position]));
      for (const [id, { position }] of this.collisions) {
        if (position >= end || collided.has(id)) continue;
        hashId(id);
        if (before.get(hashLow, hashHigh) !== position) back.push(position);
      }
      await finishAt(stale, (i) => `its latest change cannot be read (${where(staleFrom[i])})`);
      await finishAt(
        back,
        () =>
          `it had been finished before ${where(end)} (by the snapshot), but the record that finished it cannot be read`,
      );
      for (const r of remains) {
        const at = gone.findIndex(
          (g) => g.position === r.position && g.low === r.low && g.high === r.high,
        );
        if (at < 0) continue;
        gone.splice(at, 1);
        drop(r.id, r.topic, damagedReason(r));
        named.add(r);
      }
      unnamed = gone.length;
      exact = damage.every((d) => endOf(d) <= end);
    } else {
      const namedIn = new Map<number, number>();
      const stale: number[] = [];
      const staleFrom: DamagedRecord[] = [];
      for (const r of remains) {
        const entry = indexed.get(r.position);
        if (entry === undefined || entry[0] !== r.low || entry[1] !== r.high) continue;
        const now = this.latest(r.id);
        if (r.type === SCHEDULE && now < 0) {
          drop(r.id, r.topic, damagedReason(r));
          named.add(r);
          const segment = segmentOf(r.position);
          namedIn.set(segment, (namedIn.get(segment) ?? 0) + 1);
        } else if (r.type !== SCHEDULE && now >= 0 && now < r.position) {
          stale.push(now);
          staleFrom.push(r);
          named.add(r);
        }
      }
      await finishAt(stale, (i) => damagedReason(staleFrom[i]));
      // The last checkpoint counted the live payloads of every segment: a damaged one now
      // short of messages lost that many; any segment over its count holds messages whose
      // finish was lost (they came back).
      const damaged = new Set(damage.map((d) => d.segment));
      const counted = [...damaged].every((segment) => durable?.live.has(segment) === true);
      let back = false;
      for (const [segment, live] of durable?.live ?? []) {
        const traced =
          (untraced.atDurable?.get(segment) ?? 0) + (untraced.finishedAfter.get(segment) ?? 0);
        const lost = live - traced;
        if (lost < 0) {
          back = true;
          notes.push(
            `${-lost} messages with their payload in log segment ${segment} are live again ` +
              'although they had been finished: the record that finished them cannot be read, ' +
              'and without a snapshot taken after it, which ones cannot be told',
          );
        } else if (damaged.has(segment)) {
          unnamed += Math.max(0, lost - (namedIn.get(segment) ?? 0));
        }
      }
      if (!counted) {
        notes.push(
          'how many messages had every record in the damaged bytes is not known: no checkpoint ' +
            'counted the live messages of those segments',
        );
      }
      // A damaged stretch before every readable record, or one that is exactly one record
      // whose message is named, hid no change of any other message.
      const accounted = (d: StoreDamage) =>
        d.segment * SEGMENT_SPAN + d.from < untraced.firstRead ||
        [...named].some(
          (r) =>
            r.whole && segmentOf(r.position) === d.segment && r.position % SEGMENT_SPAN === d.from,
        );
      exact = counted && !back && damage.every(accounted);
    }
    for (const r of remains) {
      if (named.has(r) || dropped.has(r.id)) continue;
      notes.push(
        `the damaged record at ${where(r.position)} may have been the ${kinds[r.type]} record ` +
          `of message ${r.id} (topic ${r.topic}), read from the damaged bytes and not confirmed`,
      );
    }
    if (!exact) {
      notes.push(
        'the damaged bytes may also have held changes (a cancel, an ack, a reschedule, a retry) ' +
          'of messages whose earlier records are intact: those keep their last readable state',
      );
    }
    return { dropped: [...dropped.values()], unnamed, exact, notes, finish };
  }

  /** What is left of each damaged record, where it still names a message and topic. */
  private async damagedRecords(found: ReplayReport['corrupt']): Promise<DamagedRecord[]> {
    const remains: DamagedRecord[] = [];
    for (const c of found) {
      const raw = await this.log.readRaw(
        c.segment,
        c.position % SEGMENT_SPAN,
        Math.min(c.bytes, DAMAGED_READ_BYTES),
      );
      const record = readDamaged(raw);
      if (record === undefined) continue;
      hashId(record.id);
      remains.push({
        ...record,
        position: c.position,
        reason: c.reason,
        low: hashLow,
        high: hashHigh,
        whole: RECORD_HEADER_BYTES + raw.readUInt32LE(2) === c.bytes,
      });
    }
    return remains;
  }

  /** Index entries that point into unreadable bytes: position -> [hash low, hash high]. */
  private async indexEntriesIn(unreadable: (position: number) => boolean) {
    const entries = new Map<number, [number, number]>();
    for (const window of this.index.windows()) {
      const read = await this.index.read(window);
      for (let i = 0; i < read.count; i++) {
        if (unreadable(read.position[i])) {
          entries.set(read.position[i], [read.low[i], read.high[i]]);
        }
      }
    }
    return entries;
  }

  async lookup(id: string): Promise<StoredMessage | undefined> {
    const position = this.latest(id);
    if (position < 0) return undefined;
    let message: MessageState;
    try {
      [message] = (await this.statesAt([position])) as MessageState[];
    } catch (err) {
      throw this.unreadable(err, `message ${id}`);
    }
    if (message.id !== id) return undefined; // another id with the same 64-bit hash
    message.payload = undefined;
    const dead = this.deadIds.get(id)?.position === position;
    return { ...message, status: dead ? 'dead' : 'scheduled' };
  }

  // add, move, finish and bury change the tables at once and return the log's own promise:
  // under group commit every record of one write shares it, so a batch of calls costs one
  // promise, not one each. A synchronous failure (a closed log) comes back as a rejection.

  add(message: MessageState, _inHorizon: boolean): Promise<void> {
    let position: number;
    let durable: Promise<void>;
    let slot: RecordSlot | undefined;
    try {
      this.checkWritable();
      // Encoded straight into the log's staging buffer: no buffer of its own, no copy. A JSON
      // payload still held as text is encoded there too (room for its longest UTF-8 form).
      const text = message.payloadText;
      const payload = message.payload ?? EMPTY_PAYLOAD;
      const room = text === undefined ? payload.byteLength : text.length * 3;
      slot = this.log.reserve(SCHEDULE, scheduleLength(message, room));
      const { buf, at } = slot;
      const payloadAt = writeScheduleHead(buf, at, message);
      let end: number;
      if (text !== undefined) end = writeUtf8(buf, payloadAt, text);
      else if (payload.byteLength <= 64) {
        for (let i = 0; i < payload.byteLength; i++) buf[payloadAt + i] = payload[i];
        end = payloadAt + payload.byteLength;
      } else {
        buf.set(payload, payloadAt);
        end = payloadAt + payload.byteLength;
      }
      const reindex = message.deliverAt >= this.frontier;
      position = this.commit(slot, SCHEDULE, end - at, reindex);
      durable = slot.durable;
    } catch (err) {
      slot?.abort();
      return Promise.reject(err as Error);
    }
    message.ref = position;
    const pending = this.addsByWrite.get(durable);
    if (pending !== undefined) pending.push(message);
    else {
      const added = [message];
      this.addsByWrite.set(durable, added);
      const settled = () => this.addsByWrite.delete(durable);
      durable.then(settled, () => {
        settled();
        // Never acknowledged: take them out again, as if they had not been sent.
        for (const each of added) this.forget(each, each.ref);
      });
    }
    return durable;
  }

  move(message: MessageState, _inHorizon: boolean, previousDeliverAt: number): Promise<void> {
    return this.writeMoveRecord(
      MOVE,
      message,
      previousDeliverAt,
      message.deliverAt >= this.frontier,
    );
  }

  finish(message: MessageState, outcome: 'acked' | 'cancelled'): Promise<void> {
    let slot: RecordSlot | undefined;
    try {
      this.checkWritable();
      const length = finishLength(message);
      slot = this.log.reserve(FINISH, length);
      writeFinish(
        slot.buf,
        slot.at,
        message,
        outcome === 'acked' ? OUTCOME_ACKED : OUTCOME_CANCELLED,
      );
      this.commit(slot, FINISH, length, false);
      return slot.durable;
    } catch (err) {
      slot?.abort();
      return Promise.reject(err as Error);
    }
  }

  bury(message: MessageState): Promise<void> {
    // Burying does not change the due time: the previous one is the current one.
    return this.writeMoveRecord(BURY, message, message.deliverAt, false);
  }

  private writeMoveRecord(
    type: number,
    message: MessageState,
    previousDeliverAt: number,
    reindex: boolean,
  ): Promise<void> {
    let slot: RecordSlot | undefined;
    try {
      this.checkWritable();
      slot = this.log.reserve(type, moveWithReasonRoom(message));
      const end = writeMoveWithReason(slot.buf, slot.at, message, previousDeliverAt);
      this.commit(slot, type, end - slot.at, reindex);
      return slot.durable;
    } catch (err) {
      slot?.abort();
      return Promise.reject(err as Error);
    }
  }

  async loadUntil(until: number, onDue: (message: MessageState) => void): Promise<void> {
    // Every window file before the frontier is loaded, not only the newly covered ones: a
    // window whose load failed earlier is still on disk and is tried again here.
    const frontier = Math.max(this.frontier, this.horizonEnd(until));
    this.frontier = frontier;
    for (const window of this.index.windows()) {
      if (window >= frontier) break;
      if (this.loaded.has(window)) continue;
      const entries = await this.index.read(window);
      // An entry is current if its id's latest record is the one it points at (a dead
      // message's latest record is its BURY, which no entry points at).
      const collided = this.collidedPositions();
      const due = new Map<number, number>();
      for (let i = 0; i < entries.count; i++) {
        const position = entries.position[i];
        const current = this.ids.get(entries.low[i], entries.high[i]);
        if (current !== position && !collided.has(position)) continue; // moved or finished since
        due.set(position, entries.deliverAt[i]);
        this.near.add(position);
      }
      await this.handOver(due, onDue, (position, err) => {
        this.damagedSkipped++;
        warn(
          new Error(
            `skipped the message at ${where(position)}, which cannot be read: ${err.message}`,
          ),
        );
      });
      await this.retire(window);
    }
  }

  async payloadOf(message: MessageState): Promise<Uint8Array> {
    let record: { type: number; body: Buffer };
    try {
      record = await this.log.read(message.ref);
    } catch (err) {
      throw this.unreadable(err, `the payload of message ${message.id}`);
    }
    if (record.type !== SCHEDULE) {
      throw this.unreadable(
        new LogError('ERR_TICKWHEEL_CORRUPT', `${where(message.ref)} holds no schedule record`),
        `the payload of message ${message.id}`,
      );
    }
    return decodeSchedule(record.body).payload;
  }

  /**
   * A read of a record the tables point at failed because it is damaged or gone (found only
   * now: behind a snapshot, recovery does not read it): a TickwheelCorruptError that says so
   * and how to repair. Other errors (I/O, a closed log) are returned as they are.
   */
  private unreadable(err: unknown, what: string): unknown {
    if (!isDamage(err)) return err;
    return new TickwheelCorruptError(
      `${what} cannot be read: ${err.message}. The data directory ${this.dir} is damaged: ` +
        `close the queue and run \`tickwheel repair --dir ${this.dir}\` (see docs/storage.md, ` +
        'Recovery)',
      [],
      { cause: err },
    );
  }

  async dead(topic: string, limit: number): Promise<StoredMessage[]> {
    const positions = [...this.deadIds.values()]
      .filter((dead) => dead.topic === topic)
      .map((dead) => dead.position)
      .sort((a, b) => a - b)
      .slice(0, limit);
    const found: StoredMessage[] = [];
    for (const message of await this.statesAt(positions, () => this.damagedSkipped++)) {
      if (message === undefined) continue;
      message.payload = undefined;
      found.push({ ...message, status: 'dead' });
    }
    return found;
  }

  counts(): StoreCounts {
    return this.tally.read();
  }

  stats(): Record<string, number> {
    const log = this.log.stats();
    return {
      live: this.ids.size + this.collisions.size,
      dead: this.deadIds.size,
      idTableBytes: this.ids.bytes,
      indexWindows: this.index.windows().length,
      segments: log.segments,
      logBytes: log.bytes,
      fsyncs: log.fsyncs,
      fsyncMsMax: log.fsyncMsMax,
      fsyncMsAvg: log.fsyncs === 0 ? 0 : log.fsyncMsTotal / log.fsyncs,
      snapshots: this.snapshotStats.written,
      snapshotBytes: this.lastSnapshotBytes,
      snapshotCaptureMsMax: this.snapshotStats.captureMsMax,
      snapshotWriteMsLast: this.snapshotStats.writeMsLast,
      uncoveredLogBytes: this.uncoveredBytes,
      damagedSkipped: this.damagedSkipped,
      /** 1 once a log write failed: the store takes no more changes until reopened. */
      stopped: this.log.firstFailure === undefined ? 0 : 1,
      /** 1 while a checkpoint (and maybe a snapshot, with its copy of the tables) is written. */
      checkpointing: this.checkpointing === undefined ? 0 : 1,
    };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.checkpointTimer !== undefined) clearInterval(this.checkpointTimer);
    try {
      while (this.checkpointing !== undefined) await this.checkpointing.catch(warn);
      await this.checkpoint('always');
    } finally {
      await this.log.close();
      await this.lock.release();
    }
  }

  /**
   * After a failed log write the store takes no more changes (fail-stop): the tables were
   * changed by records the log then lost (every record of the failed write and those staged
   * after it), and the log reuses their positions, so the tables are no longer those of the
   * log. Every change whose promise resolved is on disk; recovery, at the next open, rebuilds
   * the tables from the log. Checkpoints stop too (retention must not judge segments by such
   * tables).
   */
  private checkWritable(): void {
    const failure = this.log.firstFailure;
    if (failure === undefined) return;
    throw new LogError(
      'ERR_TICKWHEEL_IO',
      `the store takes no more changes since a log write failed (${failure.message}). ` +
        'Everything acknowledged before it is on disk: close the queue and open it again ' +
        'to recover and continue',
      { cause: failure },
    );
  }

  /**
   * Completes a record begun in the log (its body at `buf[at, at + length)`) and applies it in
   * the same turn, so that the tables are always those of every record before the log's end
   * (what a snapshot captures). Then, if a snapshot is due, starts a checkpoint at once rather
   * than at the next periodic one: the log that recovery replays stays close to the threshold
   * instead of growing a checkpoint interval's worth beyond it. Returns the record's position.
   */
  private commit(slot: RecordSlot, type: number, length: number, reindex: boolean): number {
    const position = slot.commit(length);
    this.apply(type, slot.buf, slot.at, position, reindex);
    this.uncoveredBytes += RECORD_HEADER_BYTES + length;
    if (this.uncoveredBytes >= this.snapshotDue && !this.checkpointing && !this.closed) {
      void this.checkpoint().catch(warn);
    }
    return position;
  }

  private updateSnapshotDue(): void {
    this.snapshotDue =
      this.snapshotBytes === Infinity || !snapshotsSupported || this.log.stats().failures > 0
        ? Infinity
        : Math.max(this.snapshotBytes, this.lastSnapshotBytes);
  }

  // ---- state transitions: the only place the tables change ------------------------------

  /**
   * Applies one record to the tables, live or in replay; its body is at `body[at...]`.
   * `reindex`: also add a schedule-index entry (when the message's due time is beyond what is
   * loaded into memory).
   */
  private apply(type: number, body: Buffer, at: number, position: number, reindex: boolean) {
    hashIdBytes(body, at + idStart(type), idLength(type, body, at));
    const low = hashLow;
    const high = hashHigh;
    // The id as a string is needed only when an exact-id table is in use (rare): replay of
    // millions of records makes no strings.
    if (this.exactLows.size > 0 && this.collisions.size === 0 && this.deadIds.size === 0) {
      this.exactLows.clear(); // (clear() is not free even on an empty set: test first)
    }
    const exact = this.exactLows.size > 0 && this.exactLows.has(low);
    const id = exact ? recordId(type, body, at) : '';
    const topic = this.topicNames.name(
      body,
      at + topicStart(type, body, at),
      topicLength(type, body, at),
    );
    if (type === SCHEDULE) {
      const deliverAt = readF64(body, at);
      const replaced = exact ? this.deadIds.get(id) : undefined;
      if (replaced !== undefined) {
        // The same id scheduled again after it died: the dead message is replaced.
        this.release(segmentOf(replaced.payloadPosition));
        this.deadIds.delete(id);
        this.tally.finishDead(replaced.topic);
        this.unlink(id, low, high);
      }
      if (this.untraced !== undefined && this.untraced.orphans.size > 0) {
        this.untraced.orphans.delete(recordId(type, body, at));
      }
      // A live id is never scheduled again (the queue deduplicates), so a taken slot means
      // another id with the same 64-bit hash: this one is kept apart, by its exact id.
      if (!this.ids.add(low, high, position, deliverAt)) {
        this.collisions.set(recordId(type, body, at), { position, deliverAt });
        this.exactLows.add(low);
      }
      const segment = segmentOf(position);
      this.segmentLive.set(segment, (this.segmentLive.get(segment) ?? 0) + 1);
      this.tally.add(topic, deliverAt);
      this.placed(deliverAt, position, low, high, reindex);
      return;
    }
    const collided = exact ? this.collisions.get(id) : undefined;
    const previous = collided !== undefined ? collided.position : this.ids.get(low, high);
    // Its message finished before this log begins: nothing to do (a repair takes note).
    if (previous < 0) {
      if (this.untraced !== undefined) {
        this.untraced.changed(type, body, at, position, low, high);
      } else if (this.lateFinishes !== undefined && type === FINISH) {
        const late = this.lateFinishes;
        if (position >= late.from) {
          const segment = segmentOf(payloadPositionOf(FINISH, body, at));
          late.bySegment.set(segment, (late.bySegment.get(segment) ?? 0) + 1);
        }
      }
      return;
    }
    this.near.delete(previous);
    const dead = exact ? this.deadIds.get(id) : undefined;
    if (type === FINISH) {
      this.untraced?.finished.set(low, high, position);
      this.unlink(id, low, high);
      if (dead !== undefined) {
        this.deadIds.delete(id);
        this.tally.finishDead(dead.topic);
      } else {
        this.tally.finish(topic, recordDeliverAt(FINISH, body, at));
      }
      this.release(segmentOf(payloadPositionOf(FINISH, body, at)));
      return;
    }
    const deliverAt = readF64(body, at);
    this.link(id, low, high, position, deliverAt);
    if (type === BURY) {
      if (dead === undefined) this.tally.bury(topic, previousDeliverAt(body, at));
      this.exactLows.add(low);
      this.deadIds.set(id === '' ? recordId(type, body, at) : id, {
        position,
        payloadPosition: payloadPositionOf(BURY, body, at),
        topic,
      });
      return;
    }
    if (dead !== undefined) {
      this.deadIds.delete(id);
      this.tally.revive(topic, deliverAt);
    } else {
      this.tally.move(previousDeliverAt(body, at), deliverAt);
    }
    this.placed(deliverAt, position, low, high, reindex);
  }

  /** A SCHEDULE or MOVE gave its message a due time: where the message is found from now. */
  private placed(deliverAt: number, position: number, low: number, high: number, reindex: boolean) {
    if (reindex) this.index.append(deliverAt, position, low, high);
    // Live, not indexed: due before the frontier, so the queue takes it into memory.
    else if (this.replayed) this.near.add(position);
    if (this.tailDue !== undefined && deliverAt < this.frontier) {
      this.tailDue.push(deliverAt, position, low, high);
    }
  }

  private latest(id: string): number {
    const collided = this.collisions.get(id);
    if (collided !== undefined) return collided.position;
    hashId(id);
    return this.ids.get(hashLow, hashHigh);
  }

  private link(id: string, low: number, high: number, position: number, deliverAt: number): void {
    const collided = this.collisions.size === 0 ? undefined : this.collisions.get(id);
    if (collided !== undefined) {
      collided.position = position;
      collided.deliverAt = deliverAt;
    } else {
      this.ids.set(low, high, position, deliverAt);
    }
  }

  private unlink(id: string, low: number, high: number): void {
    if (this.collisions.size === 0 || !this.collisions.delete(id)) this.ids.delete(low, high);
  }

  private release(segment: number): void {
    if (segment < 0) return;
    const live = (this.segmentLive.get(segment) ?? 0) - 1;
    if (live > 0) this.segmentLive.set(segment, live);
    else this.segmentLive.delete(segment);
  }

  /**
   * Undoes a SCHEDULE whose write failed, by applying the FINISH that ends it (a record that
   * is never written).
   */
  private forget(message: MessageState, position: number): void {
    if (this.latest(message.id) !== position) return;
    this.apply(FINISH, encodeFinish(message, OUTCOME_CANCELLED), 0, position, false);
  }

  /** Replaces the tables with a snapshot's. */
  private adopt(snapshot: StoreSnapshot): void {
    this.ids.adoptArrays(snapshot.ids);
    for (const [id, position, deliverAt] of snapshot.collisions) {
      this.collisions.set(id, { position, deliverAt });
      hashId(id);
      this.exactLows.add(hashLow);
    }
    for (const [id, position, payloadPosition, topic] of snapshot.dead) {
      this.deadIds.set(id, { position, payloadPosition, topic });
      hashId(id);
      this.exactLows.add(hashLow);
    }
    for (const [segment, live] of snapshot.segmentLive) this.segmentLive.set(segment, live);
    this.tally.load(snapshot.counts);
    this.near = new Set(snapshot.near);
  }

  /**
   * A copy of the tables as they are now, after every record before log.end; `ids` is the
   * IdTable's, copied by the caller (see copyIdsGradually).
   */
  private capture(ids: IdTableArrays): StoreSnapshot {
    return {
      position: this.log.end,
      frontier: this.frontier,
      windowMs: this.index.windowMs,
      ids,
      collisions: [...this.collisions].map(([id, c]) => [id, c.position, c.deliverAt]),
      dead: [...this.deadIds].map(([id, d]) => [id, d.position, d.payloadPosition, d.topic]),
      segmentLive: [...this.segmentLive],
      counts: this.tally.entries(),
      near: Float64Array.from(this.near),
      loaded: [...this.loaded],
    };
  }

  // ---- recovery --------------------------------------------------------------------------

  /**
   * Whole-log replay, from `from` (the first segment the log needs): every record through
   * apply, due times kept while it runs. Without `index` (a plan) the schedule index is left
   * as it is: nothing deleted, nothing added.
   */
  private async replayAll(
    checkpoint: Checkpoint,
    options: { from: number; replay: ReplayOptions; index: boolean },
  ) {
    const frontier = this.frontier;
    // The index on disk covers the log up to checkpoint.indexedUntil only if nothing removed
    // entries from it since (a truncated or deleted file: disk trouble, an operator) and the
    // frontier did not move back (a smaller horizonMs than last time, the clock set back):
    // records of messages that were due before the old frontier have no entry, and windows
    // loaded into memory since the checkpoint are deleted. Windows wholly before the frontier
    // do not matter: recovery hands their messages over from the replay. If in doubt, rebuild
    // the index from the log, which is the truth.
    const sizes = this.index.sizes();
    const trusted =
      checkpoint.frontier <= frontier &&
      Object.entries(checkpoint.windows).every(
        ([window, bytes]) =>
          Number(window) + this.index.windowMs <= frontier ||
          (sizes.get(Number(window)) ?? 0) >= bytes,
      );
    if (!trusted && options.index) {
      for (const window of this.index.windows()) await this.index.delete(window);
    }
    const indexedUntil = !options.index ? Infinity : trusted ? checkpoint.indexedUntil : 0;
    this.ids.useAux(true);
    // Room for about as many messages as the log could hold, so replay does not keep growing it.
    this.ids.reserve(Math.min(50_000_000, Math.floor(this.log.stats().bytes / 120)));
    const untraced = this.untraced;
    const report = await this.log.replay(
      untraced === undefined
        ? (type, body, position) =>
            this.apply(type, body, 0, position, this.reindexes(type, body, position, indexedUntil))
        : (type, body, position) => {
            untraced.read(position, this.segmentLive);
            this.apply(type, body, 0, position, this.reindexes(type, body, position, indexedUntil));
          },
      options.from,
      options.replay,
    );
    this.replayed = true;
    return report;
  }

  /** Live, not dead, due before the frontier, after a whole-log replay: position -> due. */
  private dueAfterReplay(frontier: number): Map<number, number> {
    const due = new Map<number, number>();
    const deadPositions = new Set<number>();
    for (const dead of this.deadIds.values()) deadPositions.add(dead.position);
    this.ids.forEach((_low, _high, position, deliverAt) => {
      if (deliverAt < frontier && !deadPositions.has(position)) due.set(position, deliverAt);
    });
    for (const { position, deliverAt } of this.collisions.values()) {
      if (deliverAt < frontier && !deadPositions.has(position)) due.set(position, deliverAt);
    }
    this.ids.useAux(false);
    return due;
  }

  /** Loads a snapshot and replays the log from its position on. */
  private async replayTail(snapshot: StoreSnapshot, indexedUntil: number, options: ReplayOptions) {
    this.adopt(snapshot);
    this.tailDue = [];
    try {
      const report = await this.log.replay(
        (type, body, position) =>
          this.apply(type, body, 0, position, this.reindexes(type, body, position, indexedUntil)),
        snapshot.position,
        options,
      );
      this.replayed = true;
      return report;
    } catch (err) {
      this.tailDue = undefined;
      throw err;
    }
  }

  /**
   * After a snapshot and its tail: what is due before the new frontier comes from three
   * places, which may overlap (hence a map by position):
   *   - the messages the queue held when the snapshot was taken (its near positions), less
   *     those the tail moved or finished;
   *   - tail records whose message is due before the frontier (tracked while replaying);
   *   - index windows before the frontier still on disk: every window handed over after the
   *     snapshot was taken, and any not yet handed over.
   * Entries that are no longer their message's latest record are dropped here (index and
   * tail) or once read (near positions).
   */
  private async dueAfterSnapshot(frontier: number) {
    const due = new Map<number, number>();
    // The snapshot's near positions, less those the tail moved or finished.
    for (const position of this.near) due.set(position, NaN);
    this.near = new Set();
    const tail = this.tailDue ?? [];
    this.tailDue = undefined;
    const collided = this.collidedPositions();
    const current = (low: number, high: number, position: number) =>
      this.ids.get(low, high) === position || collided.has(position);
    for (let i = 0; i < tail.length; i += 4) {
      if (current(tail[i + 2], tail[i + 3], tail[i + 1])) due.set(tail[i + 1], tail[i]);
    }
    for (const window of this.index.windows()) {
      if (window >= frontier) break;
      const entries = await this.index.read(window);
      for (let i = 0; i < entries.count; i++) {
        if (current(entries.low[i], entries.high[i], entries.position[i])) {
          due.set(entries.position[i], entries.deliverAt[i]);
        }
      }
    }
    return due;
  }

  /**
   * Reads the messages at `due`'s positions and hands those still live and not dead to the
   * queue in (due time, position) order; they are the queue's from now on.
   */
  private async handOver(
    due: Map<number, number>,
    onDue: (message: MessageState) => void,
    damaged: (position: number, err: LogError) => void,
  ): Promise<void> {
    const positions = [...due.keys()];
    const states = await this.statesAt(positions, damaged);
    const order: Array<[number, number, MessageState]> = [];
    for (let i = 0; i < positions.length; i++) {
      const state = states[i];
      const position = positions[i];
      if (state === undefined) {
        this.near.delete(position);
        continue;
      }
      if (this.latest(state.id) !== position || this.deadIds.get(state.id)?.position === position) {
        this.near.delete(position);
        continue;
      }
      order.push([state.deliverAt, position, state]);
    }
    order.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    for (const [, position, state] of order) {
      this.near.add(position);
      onDue(state);
    }
  }

  private reindexes(type: number, body: Buffer, position: number, indexedUntil: number): boolean {
    return (
      position >= indexedUntil &&
      (type === SCHEDULE || type === MOVE) &&
      readF64(body, 0) >= this.frontier
    );
  }

  /**
   * Why a snapshot cannot be used with this log, index and checkpoint, or undefined if it can.
   * It can when the log still holds everything from its position on, and the schedule index
   * holds every entry it relies on: those of records before its position (the checkpoint must
   * cover that position, and every window it lists must be whole, except windows the
   * snapshot's near positions stand in for), with a frontier that did not move back.
   */
  private snapshotProblem(
    snapshot: StoreSnapshot,
    checkpoint: Checkpoint,
    frontier: number,
  ): string | undefined {
    if (snapshot.windowMs !== this.index.windowMs) {
      return `written with windowMs ${snapshot.windowMs}, opened with ${this.index.windowMs}`;
    }
    const segment = segmentOf(snapshot.position);
    const size = this.log.segmentSize(segment);
    if (size === undefined) return `log segment ${segment}, where it continues, is gone`;
    const offset = snapshot.position - segment * SEGMENT_SPAN;
    if (offset > size) {
      return `it continues at byte ${offset} of log segment ${segment}, which has ${size} bytes`;
    }
    const segments = this.log.segments();
    for (let k = segments.indexOf(segment) + 1; k < segments.length; k++) {
      if (segments[k] !== segments[k - 1] + 1) return `log segment ${segments[k - 1] + 1} is gone`;
    }
    if (checkpoint.indexedUntil < snapshot.position) {
      return 'the checkpoint does not cover it (the schedule index may lack entries)';
    }
    if (checkpoint.frontier > frontier || snapshot.frontier > frontier) {
      return 'the horizon is nearer than when it was written';
    }
    const sizes = this.index.sizes();
    const handedOver = new Set(snapshot.loaded);
    for (const [window, bytes] of Object.entries(checkpoint.windows)) {
      if (!handedOver.has(Number(window)) && (sizes.get(Number(window)) ?? 0) < bytes) {
        return `index window ${window} is shorter than the checkpoint says`;
      }
    }
    return undefined;
  }

  /** Bytes of the log from a position to its end. */
  private bytesFrom(position: number): number {
    const first = segmentOf(position);
    let bytes = -(position - first * SEGMENT_SPAN);
    for (const segment of this.log.segments()) {
      if (segment >= first) bytes += this.log.segmentSize(segment) ?? 0;
    }
    return Math.max(0, bytes);
  }

  private collidedPositions(): Set<number> {
    const positions = new Set<number>();
    for (const collided of this.collisions.values()) positions.add(collided.position);
    return positions;
  }

  /**
   * Reads full message states for record positions, in the order given. With `damaged`, a
   * record that cannot be read back (damaged, or in a part of the log that is gone) is
   * reported there and left undefined; without, it throws.
   */
  /**
   * Reads full message states for record positions, in the order given (undefined where a
   * damaged record was skipped: `damaged` is told; without it, damage throws). Records near
   * each other on disk share reads (MessageLog.readMany): a window of messages scheduled
   * together loads in a few large reads, not one read per message.
   */
  private async statesAt(
    positions: number[],
    damaged?: (position: number, err: LogError) => void,
  ): Promise<Array<MessageState | undefined>> {
    const states: Array<MessageState | undefined> = new Array(positions.length);
    const check = (position: number, result: { type: number; body: Buffer } | LogError) => {
      if (!(result instanceof LogError)) return result;
      if (damaged === undefined || !isDamage(result)) throw result;
      damaged(position, result);
      return undefined;
    };
    const moved: Array<{ at: number; move: ReturnType<typeof decodeMove> }> = [];
    for (let start = 0; start < positions.length; start += STATES_PER_READ) {
      const chunk = positions.slice(start, start + STATES_PER_READ);
      const records = await this.log.readMany(chunk);
      for (let i = 0; i < chunk.length; i++) {
        const record = check(chunk[i], records[i]);
        if (record === undefined) continue;
        if (record.type === SCHEDULE) {
          const decoded = decodeSchedule(record.body);
          states[start + i] = { ...decoded, payload: decoded.payload, ref: chunk[i] };
        } else moved.push({ at: start + i, move: decodeMove(record.body) });
      }
    }
    // A moved message's latest record points back at its SCHEDULE, which holds the payload.
    for (let start = 0; start < moved.length; start += STATES_PER_READ) {
      const chunk = moved.slice(start, start + STATES_PER_READ);
      const origins = await this.log.readMany(chunk.map(({ move }) => move.payloadPosition));
      for (let i = 0; i < chunk.length; i++) {
        const { at, move } = chunk[i];
        const origin = check(move.payloadPosition, origins[i]);
        if (origin === undefined) continue;
        const record = decodeSchedule(origin.body);
        states[at] = {
          ...record,
          deliverAt: move.deliverAt,
          attempts: move.attempts,
          ref: move.payloadPosition,
          lastError: move.lastError,
        };
      }
    }
    return states;
  }

  // ---- checkpoints, snapshots and retention ----------------------------------------------

  private async readCheckpoint(): Promise<Checkpoint> {
    try {
      const text = await readFile(join(this.dir, 'checkpoint.json'), 'utf8');
      const { indexedUntil, frontier, windows, log } = JSON.parse(text) as Record<string, unknown>;
      if (typeof frontier !== 'number' || typeof windows !== 'object' || windows === null) {
        throw new Error('a checkpoint without frontier and windows: rebuild the index');
      }
      const until = typeof indexedUntil === 'number' && indexedUntil >= 0 ? indexedUntil : 0;
      return {
        indexedUntil: until,
        frontier,
        windows: windows as Record<string, number>,
        // Written before tickwheel recorded it, or unreadable: no durable extent to hold to.
        log: isExtent(log) && until > 0 ? log : undefined,
      };
    } catch {
      return { indexedUntil: 0, frontier: Infinity, windows: {}, log: undefined };
    }
  }

  /**
   * Syncs the index, records how far it covers the log, writes a snapshot if the log has grown
   * enough since the last one (`when`), and deletes finished segments.
   */
  checkpoint(when: SnapshotWhen = 'auto'): Promise<void> {
    // After a failed recovery (close() on the way out of a failed open) the tables are partial:
    // a checkpoint would claim the index covers records never replayed, and retention would
    // delete segments it knows nothing about.
    if (!this.replayed) return Promise.resolve();
    // After a failed write the tables may hold changes the log does not (see checkWritable).
    if (this.log.firstFailure !== undefined) return Promise.resolve();
    this.checkpointing ??= this.writeCheckpoint(when).finally(
      () => (this.checkpointing = undefined),
    );
    return this.checkpointing;
  }

  private wantsSnapshot(when: SnapshotWhen): boolean {
    // After a failed write the tables may hold changes the log does not (a failed MOVE or
    // FINISH is not undone): only the log is to be trusted until the next recovery.
    this.updateSnapshotDue();
    if (when === 'never' || this.snapshotDue === Infinity) return false;
    if (when === 'always') return this.uncoveredBytes > 0;
    return this.uncoveredBytes >= this.snapshotDue || this.loaded.size > KEPT_WINDOWS_LIMIT;
  }

  private async writeCheckpoint(when: SnapshotWhen): Promise<void> {
    // A snapshot's biggest part, the IdTable, is copied a piece at a time first, with the
    // event loop running between pieces (at 10 million messages one copy would pause it for
    // ~150 ms); slots that change meanwhile are copied again when it ends, below.
    const capturing = this.wantsSnapshot(when);
    if (capturing) {
      this.snapshotting = true;
      await this.copyIdsGradually();
      // A log write failed meanwhile: the tables are not the log's any more (checkWritable).
      if (this.log.firstFailure !== undefined) {
        this.ids.endCopy();
        this.snapshotting = false;
        return;
      }
    }
    // From here to the first await is one turn: the checkpoint's position, the segments that
    // may go and the snapshot's tables are all those after every record before that position.
    const indexedUntil = this.log.end;
    const frontier = this.frontier;
    // Segments that may go, judged by the tables as they are now: once the flush below has
    // made every record so far durable, no crash can bring back a message they hold. (Judged
    // after the flush instead, a FINISH appended meanwhile and lost in a crash could leave a
    // live message whose payload is gone.) A closed segment never gains live messages.
    const segments = this.log.segments();
    const finished: number[] = [];
    for (let i = 0; i < segments.length - 1; i++) {
      if ((this.segmentLive.get(segments[i]) ?? 0) > 0) break;
      finished.push(segments[i]);
    }
    // The log's durable extent once the sync below is done: each segment it still needs (the
    // finished ones may go), its size and its live payloads. Recovery holds the log to it.
    const extent: LogExtent = segments
      .slice(finished.length)
      .map((segment) => [
        segment,
        this.log.segmentSize(segment) ?? 0,
        this.segmentLive.get(segment) ?? 0,
      ]);
    let snapshot: StoreSnapshot | undefined;
    let covered = 0;
    if (capturing) {
      const started = performance.now();
      const ids = this.ids.endCopy();
      // A rehash (the table grew) during the copy voids it: no snapshot this time.
      if (ids !== undefined) {
        snapshot = this.capture(ids);
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
      await this.index.sync();
      const windows = Object.fromEntries(this.index.sizes());
      const file = join(this.dir, 'checkpoint.json');
      const handle = await open(`${file}.tmp`, 'w');
      try {
        await handle.writeFile(
          JSON.stringify({ version: 1, indexedUntil, frontier, windows, log: extent }),
        );
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(`${file}.tmp`, file);
      // Before any segment is deleted below: an older checkpoint would still list it.
      await syncDirectory(this.dir);
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

  /**
   * Copies the IdTable in pieces of COPY_SLOTS slots, yielding to the event loop between. A
   * growth that starts meanwhile voids the copy (endCopy says so).
   */
  private async copyIdsGradually(): Promise<void> {
    // A growth of the table still moving entries is finished first, in pieces too.
    await this.inPieces(() => this.ids.growStep(GROW_SLOTS));
    this.ids.beginCopy();
    await this.inPieces(() => this.ids.copyStep(COPY_SLOTS));
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
      warn(err);
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

  /**
   * A window whose entries were all handed to the queue: deleted, unless a snapshot taken
   * before (on disk or being written) still needs it to find those messages after a crash.
   */
  private async retire(window: number): Promise<void> {
    if (this.snapshotPosition >= 0 || this.snapshotting) this.loaded.add(window);
    else await this.index.delete(window);
  }

  /** Deletes the snapshot, and the index windows only it needed. */
  private async dropSnapshot(): Promise<void> {
    await removeSnapshot(this.dir);
    this.snapshotPosition = -1;
    for (const window of this.loaded) await this.index.delete(window);
    this.loaded.clear();
  }
}

interface Checkpoint {
  indexedUntil: number;
  frontier: number;
  windows: Record<string, number>;
  /** The log's durable extent (absent in checkpoints of older versions). */
  log: LogExtent | undefined;
}

/** [segment, bytes made durable, live payloads] for each segment the log needs, ascending. */
type LogExtent = Array<[segment: number, bytes: number, live: number]>;

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

/** What the log is held to at recovery: what the last checkpoint (or the snapshot) made durable. */
interface Durable {
  /** Bytes at the start of each segment that were durable. */
  bytes: Map<number, number>;
  /** Live payloads per segment then (from the checkpoint only). */
  live: Map<number, number>;
  /** The first segment the log needs (every one before held nothing live); absent: unknown. */
  first?: number;
  /** The log position before which everything was durable. */
  end: number;
}

function durableExtent(
  checkpoint: Checkpoint,
  snapshot: StoreSnapshot | undefined,
): Durable | undefined {
  let durable: Durable | undefined;
  if (checkpoint.log !== undefined) {
    durable = {
      bytes: new Map(),
      live: new Map(),
      first: checkpoint.log[0][0],
      end: checkpoint.indexedUntil,
    };
    for (const [segment, bytes, live] of checkpoint.log) {
      durable.bytes.set(segment, bytes);
      durable.live.set(segment, live);
    }
  }
  // A snapshot is written only once the log up to its position is durable.
  if (snapshot !== undefined) {
    const segment = segmentOf(snapshot.position);
    const offset = snapshot.position - segment * SEGMENT_SPAN;
    if (durable === undefined) {
      durable = { bytes: new Map([[segment, offset]]), live: new Map(), end: snapshot.position };
    } else if (segment >= (durable.first ?? 0)) {
      durable.bytes.set(segment, Math.max(durable.bytes.get(segment) ?? 0, offset));
      durable.end = Math.max(durable.end, snapshot.position);
    }
  }
  return durable;
}

interface RecoveryContext {
  started: number;
  checkpoint: Checkpoint;
  durable: Durable | undefined;
  /** Damage earlier repairs accepted as lost. */
  accepted: StoreDamage[];
  /** Segments missing or cut short, by the durable extent. */
  missing: StoreDamage[];
}

/** What is left of a damaged record that names its message. */
interface DamagedRecord {
  type: number;
  id: string;
  topic: string;
  position: number;
  reason: string;
  low: number;
  high: number;
  /** The damaged stretch is exactly this one record. */
  whole: boolean;
}

/**
 * What a repair's replay learns of messages whose schedule record it did not read (their
 * MOVE, BURY and FINISH records name them), and what the tables were at the durable position.
 */
class Untraced {
  /** Moved or buried, and not finished after: live, but their payload cannot be read. */
  readonly orphans = new Map<
    string,
    { topic: string; payloadPosition: number; position: number }
  >();
  /** Id hashes finished by a record read (of such a message or any other). */
  readonly finished = new IdTable();
  /** Such finishes at or after the durable position, by the segment of their payload. */
  readonly finishedAfter = new Map<number, number>();
  /** Live payloads per segment (orphans included) when the replay reached the durable position. */
  atDurable: Map<number, number> | undefined;
  /** The first position the replay read. */
  firstRead = Infinity;

  constructor(private readonly durableEnd: number) {}

  read(position: number, segmentLive: ReadonlyMap<number, number>): void {
    if (position < this.firstRead) this.firstRead = position;
    if (position >= this.durableEnd) this.capture(segmentLive);
  }

  capture(segmentLive: ReadonlyMap<number, number>): void {
    if (this.atDurable !== undefined) return;
    const live = new Map(segmentLive);
    for (const { payloadPosition } of this.orphans.values()) {
      const segment = segmentOf(payloadPosition);
      live.set(segment, (live.get(segment) ?? 0) + 1);
    }
    this.atDurable = live;
  }

  changed(type: number, body: Buffer, at: number, position: number, low: number, high: number) {
    const id = recordId(type, body, at);
    if (type === FINISH) {
      this.finished.set(low, high, position);
      if (this.orphans.delete(id)) return;
      if (position >= this.durableEnd) {
        const segment = segmentOf(payloadPositionOf(FINISH, body, at));
        this.finishedAfter.set(segment, (this.finishedAfter.get(segment) ?? 0) + 1);
      }
      return;
    }
    const topicAt = at + topicStart(type, body, at);
    this.orphans.set(id, {
      topic: body.toString('latin1', topicAt, topicAt + topicLength(type, body, at)),
      payloadPosition: payloadPositionOf(type, body, at),
      position,
    });
  }
}

/** The id and topic left in a damaged record, if its header and those fields are intact. */
function readDamaged(raw: Buffer): { type: number; id: string; topic: string } | undefined {
  if (raw.length < RECORD_HEADER_BYTES || raw[0] !== RECORD_MAGIC) return undefined;
  const type = raw[1];
  if (type !== SCHEDULE && type !== MOVE && type !== FINISH && type !== BURY) return undefined;
  const body = raw.subarray(RECORD_HEADER_BYTES);
  if (body.length < idStart(type)) return undefined;
  const topicAt = topicStart(type, body);
  const end = topicAt + topicLength(type, body);
  if (end > body.length) return undefined;
  const id = recordId(type, body);
  const topic = body.toString('latin1', topicAt, end);
  try {
    checkId(id);
    checkTopic(topic);
  } catch {
    return undefined;
  }
  return { type, id, topic };
}

/** Whether a repair accepted the damage at this byte of a segment as lost. */
function isAccepted(accepted: readonly StoreDamage[], segment: number, offset: number): boolean {
  return accepted.some(
    (d) =>
      d.segment === segment &&
      (d.reason === 'missing' || (d.from <= offset && (d.to === undefined || offset < d.to))),
  );
}

function damageOf(c: ReplayReport['corrupt'][number]): StoreDamage {
  const from = c.position % SEGMENT_SPAN;
  return { segment: c.segment, from, to: from + c.bytes, reason: `damaged: ${c.reason}` };
}

/** Position after the damage (for a missing segment of unknown size: the end of its span). */
function endOf(d: StoreDamage): number {
  return d.to === undefined ? (d.segment + 1) * SEGMENT_SPAN : d.segment * SEGMENT_SPAN + d.to;
}

/** In order; a damaged end of a segment and its cut-short rest, back to back, are one. */
function mergeDamage(damage: StoreDamage[]): StoreDamage[] {
  const sorted = [...damage].sort((a, b) => a.segment - b.segment || a.from - b.from);
  const merged: StoreDamage[] = [];
  for (const d of sorted) {
    const last = merged[merged.length - 1];
    if (last !== undefined && last.segment === d.segment && last.to === d.from) {
      const cut = [last, d].find((x) => x.reason.startsWith('cut short'));
      merged[merged.length - 1] = { ...last, to: d.to, reason: (cut ?? last).reason };
    } else merged.push({ ...d });
  }
  return merged;
}

/** The replay's skipped records that are news: neither durable (refused) nor accepted. */
function skipped(report: ReplayReport, accepted: StoreDamage[]): RecoveryReport['corrupt'] {
  return report.corrupt
    .filter((c) => !isAccepted(accepted, c.segment, c.position % SEGMENT_SPAN))
    .map((c) => ({ where: where(c.position), reason: c.reason }));
}

/** One line for a damaged stretch: which segment, which bytes, what is wrong, what it held. */
export function describeDamage(d: StoreDamage): string {
  const bytes = d.to === undefined ? '' : ` (bytes ${d.from} to ${d.to})`;
  const messages =
    d.messages === undefined
      ? ''
      : `; ${d.messages} live messages had their payload there at the last checkpoint`;
  return `log segment ${d.segment}${bytes} is ${d.reason}${messages}`;
}

function corruptionError(dir: string, damage: StoreDamage[]): TickwheelCorruptError {
  return new TickwheelCorruptError(
    `${dir} will not be opened: its message log is damaged where it had been made durable ` +
      `(not the torn tail a crash leaves):\n${damage.map((d) => `  - ${describeDamage(d)}`).join('\n')}\n` +
      `Nothing was changed. \`tickwheel repair --dir ${dir}\` lists the messages that cannot be ` +
      `recovered; \`tickwheel repair --dir ${dir} --yes\` (or DelayQueue.open({ dir, repair: ` +
      'true })) drops them, keeps every other message, and reports what it dropped.',
    damage,
  );
}

interface Repairs {
  accepted: StoreDamage[];
  reports: RepairReport[];
}

async function readRepairs(dir: string): Promise<Repairs> {
  let text: string;
  try {
    text = await readFile(join(dir, REPAIR_FILE), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { accepted: [], reports: [] };
    throw err;
  }
  try {
    const { accepted, reports } = JSON.parse(text) as Partial<Repairs>;
    if (Array.isArray(accepted) && Array.isArray(reports)) return { accepted, reports };
  } catch {
    // An unreadable file accepts nothing: the damage is refused again, and can be repaired again.
  }
  return { accepted: [], reports: [] };
}

async function writeRepairs(dir: string, repairs: Repairs): Promise<void> {
  const file = join(dir, REPAIR_FILE);
  const handle = await open(`${file}.tmp`, 'w');
  try {
    await handle.writeFile(`${JSON.stringify({ version: 1, ...repairs }, null, 1)}\n`);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(`${file}.tmp`, file);
  await syncDirectory(dir);
}

/** A repair report as later opens show it: the first names, and the count of all. */
function shortened(report: RepairReport): RepairReport {
  if (report.dropped.length <= REPAIR_NAMES_SHOWN) return report;
  return {
    ...report,
    dropped: report.dropped.slice(0, REPAIR_NAMES_SHOWN),
    notes: [
      ...report.notes,
      `${report.dropped.length - REPAIR_NAMES_SHOWN} more dropped messages are named in ${REPAIR_FILE}`,
    ],
  };
}

async function syncDirectory(dir: string): Promise<void> {
  // Windows cannot open a directory to fsync it; NTFS journals the entry itself.
  if (process.platform === 'win32') return;
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Refuses a directory written in another on-disk format, and records the format in a new one.
 * A directory without format.json but with log records was written by tickwheel before the
 * format was recorded (format 1), whose records this code would misread.
 */
async function checkFormat(dir: string): Promise<void> {
  const file = join(dir, FORMAT_FILE);
  let text: string | undefined;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  if (text !== undefined) {
    let format: unknown;
    try {
      format = (JSON.parse(text) as { format?: unknown }).format;
    } catch {
      format = undefined;
    }
    if (format === STORE_FORMAT) return;
    throw formatError(dir, `format ${String(format)}`);
  }
  if (await hasRecords(join(dir, 'log'))) throw formatError(dir, 'format 1');
  const handle = await open(`${file}.tmp`, 'w');
  try {
    await handle.writeFile(JSON.stringify({ format: STORE_FORMAT }));
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(`${file}.tmp`, file);
}

async function hasRecords(logDir: string): Promise<boolean> {
  let names: string[];
  try {
    names = await readdir(logDir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
  for (const name of names) {
    if (/^\d{10}\.seg$/.test(name) && (await stat(join(logDir, name))).size > 0) return true;
  }
  return false;
}

function formatError(dir: string, found: string): TickwheelStateError {
  return new TickwheelStateError(
    'ERR_TICKWHEEL_FORMAT',
    `${dir} holds data in on-disk ${found}; this version of tickwheel reads and writes format ` +
      `${STORE_FORMAT} only. Drain it with the version that wrote it, or start from an empty ` +
      'directory',
  );
}

function warn(err: unknown): void {
  process.emitWarning(err instanceof Error ? err : new Error(String(err)));
}
