/**
 * Compaction (docs/storage.md, Compaction): retention deletes only a prefix of the log, so one
 * live message in the oldest segment (a dead letter, a message due next year) would keep every
 * later segment on disk. When that pays (see pays()), the live messages whose payload is in the
 * oldest segment are carried forward, each by a RELOCATE record that holds its whole state; the
 * segment then counts no live payload and the next checkpoint deletes it, and with it the
 * segments after it that only it kept.
 *
 * Replay-safe in either order: with the old records still there a RELOCATE moves the payload and
 * changes nothing else; with them deleted it enters the message as it carries it (table.ts).
 * A message the queue holds (in `near`) is carried only while it waits, scheduled or ready (a
 * ready message on a topic nobody consumes would otherwise keep the log forever), and the
 * queue's copy of it is pointed at the new payload in the same turn; one in flight is left
 * where it is (its delivery's HANDOUT is newer than what the tables know of it). A caller that
 * read a message's state before its RELOCATE may still write a record pointing at the old
 * payload: `moved` maps it to the new one until the next pass.
 */

import type { MessageState } from '../../queue/message.js';
import { RECORD_HEADER_BYTES, segmentOf, type MessageLog, type RecordSlot } from '../log/index.js';
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

/** Segments one pass reads, at most (each up to segmentBytes, 64 MiB by default)... */
const SEGMENTS_PER_PASS = 8;
/** ...messages it carries forward... */
const MESSAGES_PER_PASS = 4096;
/** ...(read at once)... */
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
  /** The queue's message of this id while it waits (StoreDeliveries.resting), if it holds one. */
  readonly resting: (id: string) => MessageState | undefined;
}

export class Compaction {
  /** Payload positions carried forward by the last pass -> where they are now. */
  readonly moved = new Map<number, number>();
  /** Messages carried forward since open. */
  relocated = 0;
  /**
   * The log as the last pass that carried nothing left it: not scanned again until a segment
   * came or went, or the oldest segment's live count changed.
   */
  private idle: string | undefined;
  /** Where the last pass stopped in its segment (its limits): the next one goes on from there. */
  private resume = { segment: -1, after: -1 };
  /**
   * Closed segments' live counts as the last pass left them, and the messages it carried into
   * the active one (see oldest()).
   */
  private seen = new Map<number, number>();
  /** Messages this pass carried, by the segment they went to. */
  private readonly carriedInto = new Map<number, number>();
  /**
   * The RELOCATEs written into each segment still on disk: once those still latest are all
   * its live messages, a pass carries them on without reading the segment (see known()).
   */
  private readonly written = new Map<number, Carried[]>();

  constructor(private readonly parts: CompactionParts) {}

  /**
   * The oldest segment, if it is closed, before `keepFrom`, holds live payloads and has stopped
   * draining by itself: the last pass saw it (as the oldest or not) with as many live messages,
   * or, active then, with as many as that pass carried into it. A segment whose messages
   * are still being delivered and acked (the usual case just after it closed) is not read:
   * reading a whole segment costs more than waiting one checkpoint.
   */
  private oldest(keepFrom: number): number | undefined {
    const { log, tables } = this.parts;
    const segments = log.segments();
    if (segments.length < 2) return undefined;
    const oldest = segments[0];
    const live = tables.segmentLive.get(oldest) ?? 0;
    if (oldest >= keepFrom || live === 0) return undefined;
    const settled = live >= (this.seen.get(oldest) ?? Infinity);
    const state = `${segments.length}:${segments[segments.length - 1]}:${oldest}:${live}`;
    return !settled || state === this.idle ? undefined : oldest;
  }

  /**
   * How many of the oldest segments carrying forward pays (0: none): the largest k such that
   * their live bytes (estimated at `mean`, measured in the oldest) are at most half of what
   * deleting them would free, with the segments after them that only they keep. Copying then
   * never writes more than half of what it frees; a log of live messages is left alone.
   */
  private pays(mean: number, keepFrom: number): number {
    const { log, tables } = this.parts;
    const segments = log.segments();
    let cost = 0;
    let freed = 0;
    let pays = 0;
    for (let i = 0; i < segments.length - 1 && segments[i] < keepFrom; i++) {
      freed += log.segmentSize(segments[i]) ?? 0;
      cost += (tables.segmentLive.get(segments[i]) ?? 0) * mean;
      if (2 * cost <= freed) pays = i + 1;
    }
    return pays;
  }

  /**
   * One pass: if it pays, the live messages of the oldest segments carried forward, as many
   * segments as pay and the pass's limits allow (a log written faster than one segment a
   * checkpoint still shrinks).
   */
  async pass(keepFrom: number): Promise<void> {
    this.moved.clear();
    this.carriedInto.clear();
    try {
      await this.carryOldest(keepFrom);
    } finally {
      // What a pass carried out of a segment is not draining: the next pass goes on with it.
      this.seen.clear();
      const { log, tables } = this.parts;
      const segments = log.segments();
      const active = segments.pop()!;
      for (const segment of segments) {
        const live = tables.segmentLive.get(segment);
        if (live !== undefined && segment < keepFrom) this.seen.set(segment, live);
      }
      const carried = this.carriedInto.get(active);
      if (carried !== undefined) this.seen.set(active, carried);
      for (const [segment, written] of this.written) {
        const live = tables.segmentLive.get(segment) ?? 0;
        if (log.segmentSize(segment) === undefined) this.written.delete(segment);
        // Mostly messages that ended or moved on: only those still there are kept.
        else if (written.length > 2 * live + 64) {
          this.written.set(
            segment,
            written.filter(({ id, at }) => tables.latest(id) === at),
          );
        }
      }
    }
  }

  private async carryOldest(keepFrom: number): Promise<void> {
    const oldest = this.oldest(keepFrom);
    if (oldest === undefined || !this.parts.writable()) return;
    const { log, tables } = this.parts;
    const carried = this.relocated;
    const budget = { messages: MESSAGES_PER_PASS, bytes: BYTES_PER_PASS };
    const after = this.resume.segment === oldest ? this.resume.after : -1;
    this.resume = { segment: -1, after: -1 };
    const first = await this.scan(oldest, after, budget.messages);
    const count = first.live === 0 ? 0 : this.pays(first.liveBytes / first.live, keepFrom);
    const segments = log.segments().slice(0, Math.min(count, SEGMENTS_PER_PASS));
    for (const segment of segments) {
      if (!this.parts.writable() || budget.messages <= 0 || budget.bytes <= 0) break;
      if ((tables.segmentLive.get(segment) ?? 0) === 0) continue;
      const { found } = segment === oldest ? first : await this.scan(segment, -1, budget.messages);
      const reached = await this.carryAll(found, budget);
      // Stopped by a limit: the next pass goes on after it (from the start once through).
      if (found.length > 0 && (budget.messages <= 0 || reached !== found[found.length - 1].from)) {
        this.resume = { segment, after: reached };
        break;
      }
    }
    if (this.relocated > carried) this.idle = undefined;
    else {
      const now = log.segments();
      const left = tables.segmentLive.get(oldest) ?? 0;
      this.idle = `${now.length}:${now[now.length - 1]}:${oldest}:${left}`;
    }
  }

  /** A segment's live payloads: count and bytes, and those after `after` (at most `limit`). */
  private async scan(segment: number, after: number, limit: number) {
    const known = this.known(segment, after, limit);
    if (known !== undefined) return known;
    const { log, tables } = this.parts;
    const found: Array<{ id: string; from: number }> = [];
    let liveBytes = 0;
    let live = 0;
    await log.scanClosed(segment, (type, body, position) => {
      if (!holdsPayload(type)) return;
      const id = recordId(type, body);
      if (tables.latest(id) < 0) return;
      // (Some of these were carried by an earlier pass: the mean is what is measured.)
      live++;
      liveBytes += RECORD_HEADER_BYTES + body.length;
      if (position > after && found.length < limit) found.push({ id, from: position });
    });
    return { found, live, liveBytes };
  }

  /**
   * A segment's live payloads without reading it: when the RELOCATEs passes wrote into it that
   * are still their message's latest record are as many as its live messages, they are all of
   * them (each holds its payload there). Otherwise (another message's payload is there, or one
   * changed since it was carried) undefined: the segment is read.
   */
  private known(segment: number, after: number, limit: number) {
    const written = this.written.get(segment);
    const live = this.parts.tables.segmentLive.get(segment) ?? 0;
    if (written === undefined || written.length < live) return undefined;
    const found: Array<{ id: string; from: number }> = [];
    let count = 0;
    let liveBytes = 0;
    for (const { id, at, bytes } of written) {
      if (this.parts.tables.latest(id) !== at) continue;
      count++;
      liveBytes += bytes;
      if (at > after && found.length < limit) found.push({ id, from: at });
    }
    return count === live ? { found, live, liveBytes } : undefined;
  }

  /**
   * Carries what it can of `found` within `budget` (which it spends); the last position it got
   * to.
   */
  private async carryAll(
    found: Array<{ id: string; from: number }>,
    budget: { messages: number; bytes: number },
  ): Promise<number> {
    const { log, tables } = this.parts;
    let reached = -1;
    let durable: Promise<void> | undefined;
    for (let start = 0; start < found.length && budget.bytes > 0; start += MESSAGES_PER_READ) {
      const batch = found.slice(start, start + MESSAGES_PER_READ);
      const latest = batch.map(({ id }) => tables.latest(id));
      const ranks = new Map<number, number>();
      // Records that cannot be read stay where they are (a repair's business); payloads past
      // the read's budget are read one at a time below.
      const read = new PayloadBudget(BYTES_PER_READ);
      const states = await statesAt(log, latest, () => {}, read, undefined, ranks);
      for (let i = 0; i < batch.length; i++) {
        const state = states[i];
        const { id, from } = batch[i];
        reached = from;
        budget.messages--;
        if (state === undefined || state.ref !== from) continue;
        state.payload ??= await this.payloadAt(from);
        // Checked in the turn that appends: nothing changed the message since it was read.
        if (!this.parts.writable()) return reached;
        if (state.payload === undefined || tables.latest(id) !== latest[i]) continue;
        const written = this.carry(state, from, latest[i], ranks.get(i) ?? latest[i]);
        if (written === undefined) continue;
        budget.bytes -= state.payload.byteLength;
        durable = written;
      }
    }
    await durable;
    return reached;
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
    if (payload === undefined) return undefined;
    const held = tables.near.has(at) ? this.parts.resting(state.id) : undefined;
    // Held: carried as the queue has it, if that is what the log says of it.
    if (held !== undefined && !sameState(held, state, from)) return undefined;
    const length = relocateLength(state, payload.byteLength);
    // Too long for one record (a payload at the limit with a long last error): left where it is.
    if (length > log.maxRecordBytes) return undefined;
    const dead = tables.isDeadAt(state.id, at);
    // A pending message due before the frontier is the queue's to hold: carried only as above.
    if (!dead && held === undefined && state.deliverAt < frontier()) return undefined;
    let slot: RecordSlot | undefined;
    try {
      slot = log.reserve(RELOCATE, length);
      const payloadAt = writeRelocateHead(slot.buf, slot.at, state, { from, rank, dead });
      slot.buf.set(payload, payloadAt);
      const end = payloadAt + payload.byteLength;
      const position = commit(slot, RELOCATE, end - slot.at, !dead && held === undefined);
      if (held !== undefined) held.ref = position;
      this.moved.set(from, position);
      this.relocated++;
      const into = segmentOf(position);
      this.carriedInto.set(into, (this.carriedInto.get(into) ?? 0) + 1);
      const written = this.written.get(into);
      const entry = { id: state.id, at: position, bytes: RECORD_HEADER_BYTES + end - slot.at };
      if (written === undefined) this.written.set(into, [entry]);
      else written.push(entry);
      return slot.durable;
    } catch (err) {
      slot?.abort();
      throw err;
    }
  }
}

/** A RELOCATE a pass wrote: its message, position and size. */
interface Carried {
  id: string;
  at: number;
  bytes: number;
}

/** Whether the queue's waiting message is the one the log's latest record describes. */
function sameState(held: MessageState, state: MessageState, from: number): boolean {
  return (
    held.ref === from &&
    held.deliverAt === state.deliverAt &&
    held.attempts === state.attempts &&
    held.topic === state.topic
  );
}
