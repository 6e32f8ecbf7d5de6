/**
 * FileStore: the embedded, durable store. Layout of its directory:
 *
 *   LOCK               pid of the owning process (see lock.ts)
 *   log/*.seg          the message log: every change of every message, appended (log.ts)
 *   index/<t>.idx      the schedule index, one file per time window (window-index.ts)
 *   checkpoint.json    { indexedUntil, frontier, windows }: index entries of all records
 *                      before indexedUntil that were due at or after frontier are on disk,
 *                      in index files of (at least) the sizes listed in windows
 *
 * Memory per live message beyond the horizon: one IdTable slot (id hash -> position of its
 * latest record), 20-30 bytes. Payloads stay on disk until their message comes near.
 *
 * Every change goes through `apply`, the same function that replays the log at recovery, so
 * the in-memory tables are by construction what a replay would rebuild.
 *
 * Retention: a segment can go once no live message keeps its payload there and every older
 * segment is gone (prefix deletion). The second rule keeps FINISH records at least as long as
 * the SCHEDULE records they finish, so a replay never resurrects a finished message.
 */

import { mkdir, open, readFile, rename } from 'node:fs/promises';
import { join } from 'node:path';
import { TickwheelTypeError, checkOption } from '../errors.js';
import type { MessageState } from '../queue/message.js';
import type { RecoveryReport, Store, StoredMessage } from '../queue/store.js';
import { IdTable, hashHigh, hashId, hashIdBytes, hashLow } from './id-table.js';
import { lockDirectory, type DirectoryLock } from './lock.js';
import { MessageLog, type FsyncPolicy } from './log.js';
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
  encodeMove,
  encodeSchedule,
  idSpan,
  recordId,
} from './records.js';
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
}

/** Where the latest record of an id whose hash another live id already owns is. */
interface CollidedId {
  position: number;
  deliverAt: number;
}

const READ_CONCURRENCY = 64;

function segmentOf(position: number): number {
  return Math.floor(position / 4294967296);
}

export class FileStore implements Store {
  readonly dir: string;
  private readonly log: MessageLog;
  private readonly index: WindowIndex;
  private readonly lock: DirectoryLock;
  private readonly checkpointIntervalMs: number;
  private readonly ids = new IdTable();
  private readonly collisions = new Map<string, CollidedId>();
  /** Dead messages: id -> position of their BURY record. */
  private readonly deadIds = new Map<string, number>();
  /** Live messages whose payload (SCHEDULE record) is in each segment. */
  private readonly segmentLive = new Map<number, number>();
  /** Every live message due before this has been handed to the queue. */
  private frontier = -Infinity;
  private checkpointTimer: ReturnType<typeof setInterval> | undefined;
  private checkpointing: Promise<void> | undefined;
  private closed = false;
  /** Whether recover() got through the whole log; no checkpoint may be written before. */
  private replayed = false;

  private constructor(
    dir: string,
    log: MessageLog,
    index: WindowIndex,
    lock: DirectoryLock,
    checkpointIntervalMs: number,
  ) {
    this.dir = dir;
    this.log = log;
    this.index = index;
    this.lock = lock;
    this.checkpointIntervalMs = checkpointIntervalMs;
  }

  static async open(options: FileStoreOptions): Promise<FileStore> {
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
    await mkdir(options.dir, { recursive: true });
    const lock = await lockDirectory(options.dir);
    try {
      const log = await MessageLog.open({
        dir: join(options.dir, 'log'),
        fsync,
        ...(options.segmentBytes === undefined ? {} : { segmentBytes: options.segmentBytes }),
      });
      const index = await WindowIndex.open(join(options.dir, 'index'), windowMs);
      return new FileStore(options.dir, log, index, lock, interval);
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
    const frontier = this.horizonEnd(horizon);
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
    if (!trusted) for (const window of this.index.windows()) await this.index.delete(window);
    const indexedUntil = trusted ? checkpoint.indexedUntil : 0;
    const reindex = (type: number, body: Buffer, position: number) =>
      position >= indexedUntil &&
      (type === SCHEDULE || type === MOVE) &&
      body.readDoubleLE(0) >= frontier;
    this.ids.useAux(true);
    // Room for about as many messages as the log could hold, so replay does not keep growing it.
    this.ids.reserve(Math.min(50_000_000, Math.floor(this.log.stats().bytes / 120)));
    const report = await this.log.replay((type, body, position) =>
      this.apply(type, body, position, reindex(type, body, position)),
    );
    this.replayed = true;
    this.frontier = frontier;
    const due: Array<[number, number]> = [];
    const deadPositions = new Set(this.deadIds.values());
    this.ids.forEach((_low, _high, position, deliverAt) => {
      if (deliverAt < this.frontier && !deadPositions.has(position))
        due.push([deliverAt, position]);
    });
    for (const { position, deliverAt } of this.collisions.values()) {
      if (deliverAt < this.frontier && !deadPositions.has(position))
        due.push([deliverAt, position]);
    }
    this.ids.useAux(false);
    due.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    for (const message of await this.statesAt(due.map(([, position]) => position))) onDue(message);
    for (const window of this.index.windows()) {
      if (window + this.index.windowMs <= this.frontier) await this.index.delete(window);
    }
    await this.checkpoint();
    this.checkpointTimer = setInterval(
      () => void this.checkpoint().catch(warn),
      this.checkpointIntervalMs,
    );
    this.checkpointTimer.unref();
    return {
      live: this.ids.size + this.collisions.size,
      corrupt: report.corrupt.map((c) => ({
        where: `log segment ${c.segment} at byte ${c.position % 4294967296}`,
        reason: c.reason,
      })),
      truncatedBytes: report.truncatedBytes,
      durationMs: performance.now() - started,
    };
  }

  async lookup(id: string): Promise<StoredMessage | undefined> {
    const position = this.latest(id);
    if (position < 0) return undefined;
    const [message] = await this.statesAt([position]);
    if (message.id !== id) return undefined; // another id with the same 64-bit hash
    message.payload = undefined;
    const dead = this.deadIds.get(id) === position;
    return { ...message, status: dead ? 'dead' : 'scheduled' };
  }

  async add(message: MessageState, _inHorizon: boolean): Promise<void> {
    const body = encodeSchedule(message, message.payload ?? new Uint8Array(0));
    const { position, durable } = this.log.append(SCHEDULE, body);
    message.ref = position;
    this.apply(SCHEDULE, body, position, message.deliverAt >= this.frontier);
    try {
      await durable;
    } catch (err) {
      // Never acknowledged: take it out again, as if it had not been sent.
      this.forget(message.id, position);
      throw err;
    }
  }

  async move(message: MessageState, _inHorizon: boolean): Promise<void> {
    const body = encodeMove(message);
    const { position, durable } = this.log.append(MOVE, body);
    this.apply(MOVE, body, position, message.deliverAt >= this.frontier);
    await durable;
  }

  async finish(message: MessageState, outcome: 'acked' | 'cancelled'): Promise<void> {
    const body = encodeFinish(message, outcome === 'acked' ? OUTCOME_ACKED : OUTCOME_CANCELLED);
    const { position, durable } = this.log.append(FINISH, body);
    this.apply(FINISH, body, position, false);
    await durable;
  }

  async bury(message: MessageState): Promise<void> {
    const body = encodeMove(message);
    const { position, durable } = this.log.append(BURY, body);
    this.apply(BURY, body, position, false);
    await durable;
  }

  async loadUntil(until: number, onDue: (message: MessageState) => void): Promise<void> {
    // Every window file before the frontier is loaded, not only the newly covered ones: a
    // window whose load failed earlier is still on disk and is tried again here.
    const frontier = Math.max(this.frontier, this.horizonEnd(until));
    this.frontier = frontier;
    const deadPositions = new Set(this.deadIds.values());
    const collided = new Set([...this.collisions.values()].map((c) => c.position));
    for (const window of this.index.windows()) {
      if (window >= frontier) break;
      const entries = await this.index.read(window);
      const seen = new Set<number>();
      const due: Array<[number, number]> = [];
      for (let i = 0; i < entries.count; i++) {
        const position = entries.position[i];
        if (seen.has(position) || deadPositions.has(position)) continue;
        const current = this.ids.get(entries.low[i], entries.high[i]);
        if (current !== position && !collided.has(position)) continue; // moved or finished since
        seen.add(position);
        due.push([entries.deliverAt[i], position]);
      }
      due.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
      for (const message of await this.statesAt(due.map(([, position]) => position)))
        onDue(message);
      await this.index.delete(window);
    }
  }

  async payloadOf(message: MessageState): Promise<Uint8Array> {
    const { type, body } = await this.log.read(message.ref);
    if (type !== SCHEDULE) throw new Error(`record at ${message.ref} is not a message's payload`);
    return decodeSchedule(body).payload;
  }

  async dead(topic: string, limit: number): Promise<StoredMessage[]> {
    const positions = [...this.deadIds.values()].sort((a, b) => a - b);
    const found: StoredMessage[] = [];
    for (const message of await this.statesAt(positions)) {
      if (message.topic !== topic) continue;
      message.payload = undefined;
      found.push({ ...message, status: 'dead' });
      if (found.length >= limit) break;
    }
    return found;
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
    };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.checkpointTimer !== undefined) clearInterval(this.checkpointTimer);
    try {
      await this.checkpoint();
    } finally {
      await this.log.close();
      await this.lock.release();
    }
  }

  // ---- state transitions: the only place the tables change ------------------------------

  /**
   * Applies one record to the tables, live or in replay. `reindex`: also add a schedule-index
   * entry (when the message's due time is beyond what is loaded into memory).
   */
  private apply(type: number, body: Buffer, position: number, reindex: boolean): void {
    const [idStart, idLength] = idSpan(type, body);
    hashIdBytes(body, idStart, idLength);
    const low = hashLow;
    const high = hashHigh;
    // The id as a string is needed only when an exact-id table is in use (rare): replay of
    // millions of records makes no strings.
    const exact = this.collisions.size > 0 || this.deadIds.size > 0;
    const id = exact ? recordId(type, body) : '';
    if (type === SCHEDULE) {
      const deliverAt = body.readDoubleLE(0);
      if (exact && this.deadIds.has(id)) {
        // The same id scheduled again after it died: the dead message is replaced.
        this.release(this.payloadSegmentOfDead(id));
        this.deadIds.delete(id);
        this.unlink(id, low, high);
      }
      // A live id is never scheduled again (the queue deduplicates), so a taken slot means
      // another id with the same 64-bit hash: this one is kept apart, by its exact id.
      if (!this.ids.add(low, high, position, deliverAt)) {
        this.collisions.set(recordId(type, body), { position, deliverAt });
      }
      const segment = segmentOf(position);
      this.segmentLive.set(segment, (this.segmentLive.get(segment) ?? 0) + 1);
      if (reindex) this.index.append(deliverAt, position, low, high);
      return;
    }
    // Its message finished before this log begins: nothing to do.
    if (!(exact && this.collisions.has(id)) && this.ids.get(low, high) < 0) return;
    if (type === FINISH) {
      const payloadPosition = body.readDoubleLE(1);
      this.unlink(id, low, high);
      if (exact) {
        this.deadIds.delete(id);
        this.buriedPayload.delete(id);
      }
      this.release(segmentOf(payloadPosition));
      return;
    }
    const deliverAt = body.readDoubleLE(0);
    this.link(id, low, high, position, deliverAt);
    if (type === BURY) {
      const buried = id === '' ? recordId(type, body) : id;
      this.deadIds.set(buried, position);
      this.buriedPayload.set(buried, body.readDoubleLE(10));
    } else {
      if (exact && this.deadIds.delete(id)) this.buriedPayload.delete(id);
      if (reindex) this.index.append(deliverAt, position, low, high);
    }
  }

  /** Payload positions of dead messages, so replacing one can release its segment. */
  private readonly buriedPayload = new Map<string, number>();

  private payloadSegmentOfDead(id: string): number {
    const position = this.buriedPayload.get(id);
    this.buriedPayload.delete(id);
    return position === undefined ? -1 : segmentOf(position);
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

  /** Undoes a SCHEDULE whose write failed. */
  private forget(id: string, position: number): void {
    if (this.latest(id) !== position) return;
    hashId(id);
    this.unlink(id, hashLow, hashHigh);
    this.release(segmentOf(position));
  }

  /** Reads full message states for record positions, in the order given. */
  private async statesAt(positions: number[]): Promise<MessageState[]> {
    const states: MessageState[] = new Array(positions.length);
    for (let start = 0; start < positions.length; start += READ_CONCURRENCY) {
      const chunk = positions.slice(start, start + READ_CONCURRENCY);
      const read = await Promise.all(chunk.map((position) => this.stateAt(position)));
      for (let i = 0; i < read.length; i++) states[start + i] = read[i];
    }
    return states;
  }

  private async stateAt(position: number): Promise<MessageState> {
    const { type, body } = await this.log.read(position);
    if (type === SCHEDULE) {
      const record = decodeSchedule(body);
      return { ...record, payload: record.payload, ref: position };
    }
    const move = decodeMove(body);
    const origin = await this.log.read(move.payloadPosition);
    const record = decodeSchedule(origin.body);
    return {
      ...record,
      deliverAt: move.deliverAt,
      attempts: move.attempts,
      ref: move.payloadPosition,
    };
  }

  // ---- checkpoints and retention -------------------------------------------------------

  private async readCheckpoint(): Promise<{
    indexedUntil: number;
    frontier: number;
    windows: Record<string, number>;
  }> {
    try {
      const text = await readFile(join(this.dir, 'checkpoint.json'), 'utf8');
      const { indexedUntil, frontier, windows } = JSON.parse(text) as Record<string, unknown>;
      if (typeof frontier !== 'number' || typeof windows !== 'object' || windows === null) {
        throw new Error('a checkpoint without frontier and windows: rebuild the index');
      }
      return {
        indexedUntil: typeof indexedUntil === 'number' && indexedUntil >= 0 ? indexedUntil : 0,
        frontier,
        windows: windows as Record<string, number>,
      };
    } catch {
      return { indexedUntil: 0, frontier: Infinity, windows: {} };
    }
  }

  /** Syncs the index, records how far it covers the log, and deletes finished segments. */
  checkpoint(): Promise<void> {
    // After a failed recovery (close() on the way out of a failed open) the tables are partial:
    // a checkpoint would claim the index covers records never replayed, and retention would
    // delete segments it knows nothing about.
    if (!this.replayed) return Promise.resolve();
    this.checkpointing ??= this.writeCheckpoint().finally(() => (this.checkpointing = undefined));
    return this.checkpointing;
  }

  private async writeCheckpoint(): Promise<void> {
    const indexedUntil = this.log.end;
    const frontier = this.frontier;
    await this.log.flush();
    await this.index.sync();
    const windows = Object.fromEntries(this.index.sizes());
    const file = join(this.dir, 'checkpoint.json');
    const handle = await open(`${file}.tmp`, 'w');
    try {
      await handle.writeFile(JSON.stringify({ version: 1, indexedUntil, frontier, windows }));
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(`${file}.tmp`, file);
    const segments = this.log.segments();
    for (let i = 0; i < segments.length - 1; i++) {
      if ((this.segmentLive.get(segments[i]) ?? 0) > 0) break;
      await this.log.deleteSegment(segments[i]);
    }
  }
}

function warn(err: unknown): void {
  process.emitWarning(err instanceof Error ? err : new Error(String(err)));
}
