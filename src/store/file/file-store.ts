/**
 * FileStore: the embedded, durable Store (src/queue/store.ts), holding together the modules of
 * this folder (each concern's module: docs/storage.md). Memory per live message beyond the
 * horizon: one IdTable slot, 20-30 bytes; payloads stay on disk until their message comes near.
 */

import { join } from 'node:path';
import { debugAssert } from '../../assert.js';
import { TickwheelCorruptError, TickwheelUnavailableError } from '../../errors.js';
import { checkFaultHandler } from '../../queue/faults.js';
import type { MessageState } from '../../queue/message.js';
import type { KeyedPart, ListQuery } from '../../queue/list.js';
import type { PayloadBudget } from '../../queue/payload-budget.js';
import type {
  RecoveryReport,
  RepairReport,
  Store,
  StoreCounts,
  StoreDeliveries,
  StoredMessage,
  StoreStats,
} from '../../queue/store.js';
import type { ScheduleRecord } from '../../queue/recurring.js';
import type { TopicSettings } from '../../queue/topics.js';
import { ScheduleLog } from './schedule-log.js';
import { writeUtf8 } from '../bytes.js';
import {
  MessageLog,
  RECORD_HEADER_BYTES,
  systemErrorsAsIo,
  type RecordSlot,
  where,
} from '../log/index.js';
import { Checkpoints, type SnapshotWhen } from './checkpoint.js';
import { Compaction } from './compaction.js';
import { unreadable } from './damage.js';
import {
  INDEX_DIR,
  LOG_DIR,
  checkFormat,
  lastLogWrite,
  makeDataDirectory,
  readTopicSettings,
  writeTopicSettings,
} from './layout.js';
import { lockDirectory, type DirectoryLock } from './lock.js';
import { HandOuts } from './handouts.js';
import {
  BURY,
  FINISH,
  MOVE,
  OUTCOME_ACKED,
  OUTCOME_CANCELLED,
  SCHEDULE,
  decodeOrigin,
  finishLength,
  holdsPayload,
  moveWithReasonRoom,
  scheduleLength,
  writeFinish,
  writeMoveWithReason,
  writeScheduleHead,
} from './records.js';
import { StoreFaults } from './faults.js';
import { recover, type OpenMode } from './recovery.js';
import type { RecoveryParts } from './repair.js';
import { listWaiting } from './listing.js';
import { loadIndexFiles, statesAt } from './states.js';
import { Tables } from './table.js';
import { WindowIndex } from './window-index.js';
import { checkFileStoreOptions, type FileStoreOptions } from './options.js';

export type { FileStoreOptions };

const EMPTY_PAYLOAD = new Uint8Array(0);
const HORIZON_DISAGREES =
  'inHorizon disagrees with the store: it must be deliverAt < the horizon last given to ' +
  'recover() or loadUntil(), rounded by horizonEnd()';

export class FileStore implements Store {
  /** schedules.log, once the queue read or wrote a recurring schedule. */
  private scheduleLog: ScheduleLog | undefined;
  private readonly tables: Tables;
  private readonly checkpoints: Checkpoints;
  /**
   * The horizon, and its one source of truth: every live message due before it has been handed
   * to the queue; the others are found through the index. It moves only through recover() and
   * loadUntil(), rounded by horizonEnd(), never back. A change gets an index entry iff
   * deliverAt >= frontier (the rule replay follows, and checkpoint.json vouches for); the
   * queue's `inHorizon` is the same comparison, so debug runs only assert that it agrees.
   */
  private frontier = -Infinity;
  /** Messages added by each pending write (keyed by its promise), undone if the write fails. */
  private readonly addsByWrite = new Map<Promise<void>, MessageState[]>();
  private closed = false;
  private damagedSkipped = 0;
  private readonly handOuts: HandOuts;
  /** What recovery, loads and listings work with (the payload budget once the queue gives it). */
  private readonly parts: RecoveryParts;
  private readonly compaction: Compaction;

  private constructor(
    readonly dir: string,
    private readonly log: MessageLog,
    private readonly index: WindowIndex,
    private readonly faults: StoreFaults,
    private readonly lock: DirectoryLock,
    private readonly settings: ReturnType<typeof checkFileStoreOptions>,
    private readonly mode: OpenMode,
  ) {
    this.tables = new Tables(index);
    this.checkpoints = new Checkpoints(
      dir,
      log,
      index,
      this.tables,
      settings.interval,
      settings.snapshotBytes,
      () => this.frontier,
      faults,
      () => lock.check(),
    );
    this.parts = {
      dir,
      log,
      index,
      tables: this.tables,
      checkpoints: this.checkpoints,
      finish: (message: MessageState) => this.finish(message, 'cancelled'),
      bury: (message: MessageState) => this.bury(message),
    };
    this.compaction = new Compaction({
      log,
      tables: this.tables,
      frontier: () => this.frontier,
      writable: () => this.appending(),
      commit: (slot, type, length, reindex) => this.commit(slot, type, length, reindex),
      resting: (id) => this.handOuts.deliveries?.resting(id),
    });
    this.checkpoints.compact = (keepFrom) => this.compaction.pass(keepFrom);
    this.handOuts = new HandOuts(
      this.parts,
      () => this.frontier,
      () => this.appending(),
    );
  }

  static open(options: FileStoreOptions): Promise<FileStore> {
    return FileStore.openAs(options, options?.repair === true ? 'repair' : 'open');
  }

  /** What `repair: true` would drop, changing nothing (`tickwheel repair` without --yes). */
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
    const settings = checkFileStoreOptions(options);
    await makeDataDirectory(options.dir);
    const faults = new StoreFaults(options.dir, checkFaultHandler(options.onFault));
    // A system error (a file of the directory made a directory, no permission): ERR_TICKWHEEL_IO
    // naming the directory, not the bare EISDIR or EACCES.
    return systemErrorsAsIo(`opening the data directory ${options.dir}`, () =>
      FileStore.openLocked(options, mode, settings, faults),
    );
  }

  private static async openLocked(
    options: FileStoreOptions,
    mode: OpenMode,
    settings: ReturnType<typeof checkFileStoreOptions>,
    faults: StoreFaults,
  ): Promise<FileStore> {
    const lock = await lockDirectory(options.dir, faults);
    try {
      await checkFormat(options.dir);
      const log = await MessageLog.open({
        dir: join(options.dir, LOG_DIR),
        fsync: settings.fsync,
        // A new segment is a new file in a directory that may no longer be this process's.
        beforeNewSegment: () => lock.check(),
        ...(options.segmentBytes === undefined ? {} : { segmentBytes: options.segmentBytes }),
        ...(options.logIo === undefined ? {} : { io: options.logIo }),
      });
      const { windowMs } = settings;
      const index = await WindowIndex.open(join(options.dir, INDEX_DIR), windowMs, (err) => {
        if (err === undefined) faults.ok('index');
        else faults.fail('index', err);
      });
      return new FileStore(options.dir, log, index, faults, lock, settings, mode);
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

  lastWrittenAt(): Promise<number | undefined> {
    return lastLogWrite(this.dir);
  }

  recover(horizon: number, onDue: (message: MessageState) => void): Promise<RecoveryReport> {
    this.moveFrontier(this.horizonEnd(horizon));
    // A write of the recovery (its index, its checkpoint) refused by the system (a full disk):
    // ERR_TICKWHEEL_IO naming the directory, not the bare ENOSPC.
    return systemErrorsAsIo(`recovering the data directory ${this.dir}`, () =>
      recover(this.parts, this.mode, this.frontier, onDue),
    );
  }

  usePayloadBudget(budget: PayloadBudget): void {
    this.parts.budget = budget;
  }

  async lookup(id: string): Promise<StoredMessage | undefined> {
    let position: number;
    let message: MessageState;
    // Read again if a record of the id came meanwhile (compaction moves messages by itself).
    do {
      position = this.tables.latest(id);
      if (position < 0) return undefined;
      try {
        [message] = (await statesAt(this.log, [position])) as MessageState[];
      } catch (err) {
        throw unreadable(this.dir, err, `message ${id}`);
      }
    } while (this.tables.latest(id) !== position);
    if (message.id !== id) return undefined; // another id with the same 64-bit hash
    message.payload = undefined;
    const dead = this.tables.isDeadAt(id, position);
    return { ...message, status: dead ? 'dead' : 'scheduled' };
  }

  // add, move, finish and bury change the tables at once and return the log's own promise,
  // shared by every record of one group commit. A synchronous failure comes back as a rejection.

  add(message: MessageState, inHorizon: boolean): Promise<void> {
    debugAssert(inHorizon === message.deliverAt < this.frontier, HORIZON_DISAGREES);
    let position: number;
    let durable: Promise<void>;
    let slot: RecordSlot | undefined;
    try {
      this.checkWritable();
      // Encoded straight into the log's staging buffer, a payload still held as text too (room
      // for its longest UTF-8 form); a short one byte by byte, cheaper than set()'s call.
      const text = message.payloadText;
      const payload = message.payload ?? EMPTY_PAYLOAD;
      const room = text === undefined ? payload.byteLength : text.length * 3;
      slot = this.log.reserve(SCHEDULE, scheduleLength(message, room));
      const { buf, at } = slot;
      const payloadAt = writeScheduleHead(buf, at, message);
      let end = payloadAt + payload.byteLength;
      if (text !== undefined) end = writeUtf8(buf, payloadAt, text);
      else if (payload.byteLength > 64) buf.set(payload, payloadAt);
      else for (let i = 0; i < payload.byteLength; i++) buf[payloadAt + i] = payload[i];
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
        for (const each of added) this.tables.forget(each, each.ref);
      });
    }
    return durable;
  }

  move(message: MessageState, inHorizon: boolean, previousDeliverAt: number): Promise<void> {
    debugAssert(inHorizon === message.deliverAt < this.frontier, HORIZON_DISAGREES);
    this.fresh(message);
    const room = moveWithReasonRoom(message);
    const reindex = message.deliverAt >= this.frontier;
    return this.append(MOVE, room, writeMoveWithReason, message, previousDeliverAt, reindex);
  }

  finish(message: MessageState, outcome: 'acked' | 'cancelled'): Promise<void> {
    const code = outcome === 'acked' ? OUTCOME_ACKED : OUTCOME_CANCELLED;
    this.fresh(message);
    return this.append(FINISH, finishLength(message), writeFinish, message, code, false);
  }

  bury(message: MessageState): Promise<void> {
    // Burying does not change the due time: the previous one is the current one.
    this.fresh(message);
    const room = moveWithReasonRoom(message);
    return this.append(BURY, room, writeMoveWithReason, message, message.deliverAt, false);
  }

  /** Deliveries whose attempts count from now: HANDOUT records (handouts.ts). */
  handOut(messages: readonly MessageState[], count: number): void {
    if (this.appending()) this.handOuts.note(messages, count);
  }

  useDeliveries(deliveries: StoreDeliveries): void {
    this.handOuts.deliveries = deliveries;
  }

  private appending(): boolean {
    return !this.closed && this.lock.lost === undefined && this.log.firstFailure === undefined;
  }

  /**
   * Appends a record of at most `room` body bytes that `encode` writes (returning where it
   * ends) and applies it; the promise is the log's (see add).
   */
  private append<T>(
    type: number,
    room: number,
    encode: (buf: Buffer, at: number, message: MessageState, extra: T) => number,
    message: MessageState,
    extra: T,
    reindex: boolean,
  ): Promise<void> {
    let slot: RecordSlot | undefined;
    try {
      this.checkWritable();
      slot = this.log.reserve(type, room);
      const end = encode(slot.buf, slot.at, message, extra);
      this.commit(slot, type, end - slot.at, reindex);
      return slot.durable;
    } catch (err) {
      slot?.abort();
      return Promise.reject(err as Error);
    }
  }

  async loadUntil(until: number, onDue: (message: MessageState) => void): Promise<void> {
    const frontier = Math.max(this.frontier, this.horizonEnd(until));
    this.moveFrontier(frontier);
    await loadIndexFiles(this.parts, frontier, onDue, (position, err) => {
      this.damagedSkipped++;
      this.faults.report(
        new TickwheelCorruptError(
          `skipped the message at ${where(position)}, which cannot be read: ${err.message}`,
          [],
          { cause: err },
        ),
      );
    });
  }

  /** The one place the frontier moves; the index places entries by it. */
  private moveFrontier(frontier: number): void {
    this.frontier = frontier;
    this.index.advance(frontier);
  }

  /** Points a state read before compaction moved its message at where its payload is now. */
  private fresh(message: MessageState): void {
    if (this.compaction.moved.size === 0) return;
    message.ref = this.compaction.moved.get(message.ref) ?? message.ref;
  }

  async payloadOf(message: MessageState): Promise<Uint8Array> {
    this.fresh(message);
    let record: { type: number; body: Buffer } | undefined;
    while (record === undefined) {
      const ref = message.ref;
      try {
        record = await this.log.read(ref);
      } catch (err) {
        // Carried forward while it was read (compaction): read where it is now.
        if (message.ref !== ref) continue;
        throw unreadable(this.dir, err, `the payload of message ${message.id}`);
      }
    }
    if (!holdsPayload(record.type)) {
      throw unreadable(
        this.dir,
        new TickwheelCorruptError(`${where(message.ref)} holds no schedule record`),
        `the payload of message ${message.id}`,
      );
    }
    return decodeOrigin(record.type, record.body).payload;
  }

  listWaiting(query: ListQuery): Promise<KeyedPart<StoredMessage>> {
    const budget = this.settings.listScanRecords;
    return listWaiting(this.parts, query, () => this.damagedSkipped++, budget);
  }

  async dead(topic: string, limit: number): Promise<StoredMessage[]> {
    // Oldest death first: by rank (a RELOCATE keeps its message's), then read.
    const positions = [...this.tables.deadIds.values()]
      .filter((dead) => dead.topic === topic)
      .sort((a, b) => a.rank - b.rank)
      .slice(0, limit)
      .map((dead) => dead.position);
    const found: StoredMessage[] = [];
    for (const message of await statesAt(this.log, positions, () => this.damagedSkipped++)) {
      if (message === undefined) continue;
      message.payload = undefined;
      found.push({ ...message, status: 'dead' });
    }
    return found;
  }

  // Settings and schedules are written on a caller's request: a disk fault there is
  // ERR_TICKWHEEL_IO (503 over HTTP), like one in the log.
  readSchedules(): Promise<ScheduleRecord[]> {
    return systemErrorsAsIo('reading schedules.log', async () => {
      const { log, records } = await ScheduleLog.open(this.dir);
      await this.scheduleLog?.close();
      this.scheduleLog = log;
      return records;
    });
  }

  writeSchedules(records: readonly ScheduleRecord[], deleted: readonly string[]): Promise<void> {
    return systemErrorsAsIo('writing schedules.log', async () => {
      await this.lock.check();
      this.scheduleLog ??= (await ScheduleLog.open(this.dir)).log;
      await this.scheduleLog.write(records, deleted);
    });
  }

  readTopicSettings(): Promise<Map<string, TopicSettings>> {
    return systemErrorsAsIo('reading topic settings', () => readTopicSettings(this.dir));
  }

  writeTopicSettings(settings: ReadonlyMap<string, TopicSettings>): Promise<void> {
    return systemErrorsAsIo('writing topic settings', async () => {
      await this.lock.check();
      await writeTopicSettings(this.dir, settings);
    });
  }

  counts(): StoreCounts {
    return this.tables.tally.read();
  }

  dueMinutes(): ReadonlyMap<number, number> {
    return this.tables.tally.dueMinutes();
  }

  /**
   * A background write failing and retried (index, checkpoints), or the lock lost. A failed log
   * write is not one: it stops the store (stats().stopped).
   */
  problem(): string | undefined {
    const lost = this.lock.lost;
    if (lost !== undefined) return `${lost.message}; restart the queue`;
    return this.faults.problem();
  }

  stats(): StoreStats {
    const log = this.log.stats();
    return {
      live: this.tables.live,
      dead: this.tables.deadIds.size,
      idTableBytes: this.tables.ids.bytes,
      indexFiles: this.index.files().length,
      segments: log.segments,
      logBytes: log.bytes,
      fsyncs: log.fsyncs,
      fsyncMsMax: log.fsyncMsMax,
      fsyncMsAvg: log.fsyncs === 0 ? 0 : log.fsyncMsTotal / log.fsyncs,
      ...this.checkpoints.stats(),
      damagedSkipped: this.damagedSkipped,
      relocated: this.compaction.relocated,
      stopped: this.log.firstFailure === undefined ? 0 : 1,
      ...this.faults.stats(),
    };
  }

  /** Syncs the index, records its coverage, maybe snapshots (`when`), trims (checkpoint.ts). */
  checkpoint(when: SnapshotWhen = 'auto'): Promise<void> {
    return this.checkpoints.checkpoint(when);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    try {
      this.index.close();
      await this.scheduleLog?.close();
      await this.checkpoints.close();
    } finally {
      await this.log.close();
      await this.lock.release();
    }
  }

  /**
   * Fail-stop after a failed log write: the tables hold records the log lost (and whose
   * positions it reuses). Every change whose promise resolved is on disk, and the next open
   * rebuilds the tables. After a lost lock another process may own the directory.
   */
  private checkWritable(): void {
    const refused = this.refusal();
    if (refused !== undefined) throw refused;
  }

  /** Why the store takes no more changes (a failed log write, a lost lock), or undefined. */
  refusal(): Error | undefined {
    if (this.lock.lost !== undefined) return this.lock.lost;
    const failure = this.log.firstFailure;
    if (failure === undefined) return undefined;
    const refused = new TickwheelUnavailableError(
      'ERR_TICKWHEEL_IO',
      `the store takes no more changes since a log write failed (${failure.message}). ` +
        'Everything acknowledged before it is on disk: close the queue and open it again ' +
        'to recover and continue',
      { cause: failure },
    );
    // Refused before anything was written: a definite failure (errors.ts, WriteOutcome).
    refused.outcome = 'none';
    return refused;
  }

  /**
   * Commits the reserved record and applies it in the same turn, so the tables are always those
   * of every record before the log's end (hand-outs aside: handouts.ts). Returns its position.
   */
  private commit(slot: RecordSlot, type: number, length: number, reindex: boolean): number {
    const position = slot.commit(length);
    this.tables.apply(type, slot.buf, slot.at, position, reindex);
    this.checkpoints.appended(RECORD_HEADER_BYTES + length);
    return position;
  }
}
