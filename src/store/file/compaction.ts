/**
 * Compaction (docs/storage.md, Compaction): retention deletes only a prefix of the log, so one
 * live message in the oldest segment (a dead letter, a message due next year) would keep every
 * later segment on disk. When the log is much larger than its live messages, the live messages
 * whose payload is in the oldest segment are carried forward, each by a RELOCATE record that
 * holds its whole state; the segment then counts no live payload and the next checkpoint deletes
 * it, and with it the segments after it that only it kept.
 *
 * Replay-safe in either order: with the old records still there a RELOCATE moves the payload and
 * changes nothing else; with them deleted it enters the message as it carries it (table.ts).
 * Messages the queue holds (in `near`: due within the horizon, in flight) are left: they end or
 * leave memory soon. A caller that read a message's state before its RELOCATE may still write a
 * record pointing at the old payload: `moved` maps it to the new one until the next pass.
 */

import type { MessageState } from '../../queue/message.js';
import type { MessageLog, RecordSlot } from '../log/index.js';
import { PayloadBudget } from '../../queue/payload-budget.js';
import {
  RELOCATE,
  decodeOrigin,
  holdsPayload,
  recordId,
  relocateLength,
  writeRelocateHead,
} from './records.js';
import { statesAt } from './states.js';
import type { Tables } from './table.js';

/** Messages carried forward in one pass, at most... */
const MESSAGES_PER_PASS = 4096;
/** ...read at once... */
const MESSAGES_PER_READ = 256;
/** ...and payload bytes a pass carries, and a read holds, at most. */
const BYTES_PER_PASS = 16 * 1024 * 1024;
const BYTES_PER_READ = 4 * 1024 * 1024;

export interface CompactionParts {
  readonly log: MessageLog;
  readonly tables: Tables;
  /** The store's frontier (file-store.ts): a message due before it is the queue's. */
  readonly frontier: () => number;
  /** Whether the store takes changes (no failed write, lock held, not closed). */
  readonly writable: () => boolean;
  /** Commits a reserved record and applies it (FileStore.commit); its position. */
  readonly commit: (slot: RecordSlot, type: number, length: number, reindex: boolean) => number;
}

export class Compaction {
  /** Payload positions carried forward by the last pass -> where they are now. */
  readonly moved = new Map<number, number>();
  /** Messages carried forward since open. */
  relocated = 0;
  private scheduledBytes = 0;
  private scheduledCount = 0;
  /**
   * A pass that left its segment pinned (messages held in memory, limits): not scanned again
   * until its live count changes or the log has grown by a segment.
   */
  private stalled: { segment: number; live: number; grownTo: number } | undefined;

  constructor(private readonly parts: CompactionParts) {}

  /** A record holding a payload was appended: the mean size estimates the live bytes. */
  noteSchedule(bytes: number): void {
    this.scheduledBytes += bytes;
    this.scheduledCount++;
  }

  /**
   * The oldest segment, if compacting it pays: it holds live payloads, is closed and before
   * `keepFrom` (the snapshot's segment), and the log is over twice its live messages' estimated
   * bytes and two segments (so copying never costs more than it frees).
   */
  due(keepFrom: number): number | undefined {
    const { log, tables } = this.parts;
    const segments = log.segments();
    if (segments.length < 3) return undefined;
    const oldest = segments[0];
    const live = tables.segmentLive.get(oldest) ?? 0;
    if (oldest >= keepFrom || live === 0) return undefined;
    const stalled = this.stalled;
    if (
      stalled?.segment === oldest &&
      stalled.live === live &&
      segments[segments.length - 1] < stalled.grownTo
    ) {
      return undefined;
    }
    const mean = this.scheduledCount === 0 ? 0 : this.scheduledBytes / this.scheduledCount;
    const slack = 2 * (log.segmentSize(oldest) ?? 0);
    return log.stats().bytes >= 2 * tables.live * mean + slack ? oldest : undefined;
  }

  /** One pass: the live messages of the oldest segment carried forward, if due (see due()). */
  async pass(keepFrom: number): Promise<void> {
    this.moved.clear();
    const segment = this.due(keepFrom);
    if (segment === undefined || !this.parts.writable()) return;
    const { log, tables } = this.parts;
    const found: Array<{ id: string; from: number }> = [];
    await log.scanClosed(segment, (type, body, position) => {
      if (!holdsPayload(type) || found.length >= MESSAGES_PER_PASS) return;
      const id = recordId(type, body);
      if (tables.latest(id) >= 0) found.push({ id, from: position });
    });
    let bytes = 0;
    let durable: Promise<void> | undefined;
    for (
      let start = 0;
      start < found.length && bytes < BYTES_PER_PASS;
      start += MESSAGES_PER_READ
    ) {
      const batch = found.slice(start, start + MESSAGES_PER_READ);
      const latest = batch.map(({ id }) => tables.latest(id));
      const ranks = new Map<number, number>();
      // Records that cannot be read stay where they are (a repair's business); payloads past
      // the read's budget are read one at a time below.
      const budget = new PayloadBudget(BYTES_PER_READ);
      const states = await statesAt(log, latest, () => {}, budget, undefined, ranks);
      for (let i = 0; i < batch.length; i++) {
        const state = states[i];
        const { id, from } = batch[i];
        if (state === undefined || state.ref !== from) continue;
        state.payload ??= await this.payloadAt(from);
        // Checked in the turn that appends: nothing changed the message since it was read.
        if (!this.parts.writable()) return;
        if (state.payload === undefined || tables.latest(id) !== latest[i]) continue;
        const written = this.carry(state, from, latest[i], ranks.get(i) ?? latest[i]);
        if (written === undefined) continue;
        bytes += state.payload.byteLength;
        durable = written;
      }
    }
    await durable;
    const left = tables.segmentLive.get(segment) ?? 0;
    const active = log.segments().at(-1) ?? segment;
    this.stalled = left === 0 ? undefined : { segment, live: left, grownTo: active + 1 };
  }

  private async payloadAt(position: number): Promise<Uint8Array | undefined> {
    try {
      const { type, body } = await this.parts.log.read(position);
      return holdsPayload(type) ? decodeOrigin(type, body).payload : undefined;
    } catch {
      return undefined; // unreadable: left where it is
    }
  }

  /** Appends the RELOCATE of a message whose latest record is `at`, if it may move now. */
  private carry(
    state: MessageState,
    from: number,
    at: number,
    rank: number,
  ): Promise<void> | undefined {
    const { log, tables, frontier, commit } = this.parts;
    const payload = state.payload;
    if (tables.near.has(at) || payload === undefined) return undefined;
    const dead = tables.isDeadAt(state.id, at);
    // A pending message due before the frontier is the queue's to hold: not carried.
    if (!dead && state.deliverAt < frontier()) return undefined;
    let slot: RecordSlot | undefined;
    try {
      slot = log.reserve(RELOCATE, relocateLength(state, payload.byteLength));
      const payloadAt = writeRelocateHead(slot.buf, slot.at, state, { from, rank, dead });
      slot.buf.set(payload, payloadAt);
      const end = payloadAt + payload.byteLength;
      const position = commit(slot, RELOCATE, end - slot.at, !dead);
      this.noteSchedule(end - slot.at);
      this.moved.set(from, position);
      this.relocated++;
      return slot.durable;
    } catch (err) {
      slot?.abort();
      throw err;
    }
  }
}
