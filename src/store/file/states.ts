/**
 * Messages read back from the log, and handed to the queue. A state is the SCHEDULE record with
 * the due time and attempts of the latest record (it, or a MOVE, HANDOUT or BURY pointing back).
 * A message handed over (onDue) is the queue's from then on, noted in `near` (table.ts).
 */

import type { MessageState } from '../../queue/message.js';
import type { PayloadBudget } from '../../queue/payload-budget.js';
import { isLogFailure, type LogFailure, type MessageLog, type ReadResult } from '../log/index.js';
import { isDamage } from './damage.js';
import {
  HANDOUT,
  RELOCATE,
  SCHEDULE,
  decodeMove,
  decodeOrigin,
  decodeRelocate,
  decodeSchedule,
} from './records.js';
import type { RecoveryParts } from './repair.js';
import type { Tables } from './table.js';

/** Records asked of MessageLog.readMany at once, at most... */
const STATES_PER_READ = 8192;
/** ...and at first, until the records' size is known: a read holds about READ_BYTES. */
const FIRST_READ = 64;
const READ_BYTES = 16 * 1024 * 1024;

/** Told of a record that cannot be read (see isDamage), which is then skipped. */
export type OnDamaged = (position: number, err: LogFailure) => void;

/**
 * Full message states for record positions, in order (undefined where `damaged` was told of a
 * skipped record; without it, damage throws), in few large reads (readMany). `handedOut` gets
 * the indexes of the HANDOUT records; `ranks` the order among equal due times of those that
 * differ from their position (RELOCATE records: compaction.ts).
 */
export async function statesAt(
  log: MessageLog,
  positions: number[],
  damaged?: OnDamaged,
  budget?: PayloadBudget,
  handedOut?: Set<number>,
  ranks?: Map<number, number>,
): Promise<Array<MessageState | undefined>> {
  const states: Array<MessageState | undefined> = new Array(positions.length);
  // Payloads beyond the budget are not kept: the queue reads them back when it delivers.
  let admitted = 0;
  const kept = (payload: Uint8Array) => {
    if (budget === undefined || budget.fits(admitted + payload.byteLength)) {
      admitted += payload.byteLength;
      return payload;
    }
    return undefined;
  };
  const moved: Array<{ at: number; move: ReturnType<typeof decodeMove> }> = [];
  await readInPieces(log, positions, damaged, (i, record) => {
    if (record.type === SCHEDULE) {
      const decoded = decodeSchedule(record.body);
      states[i] = { ...decoded, payload: kept(decoded.payload), ref: positions[i] };
    } else if (record.type === RELOCATE) {
      const { schedule, reason, rank } = decodeRelocate(record.body);
      const payload = kept(schedule.payload);
      states[i] = { ...schedule, payload, ref: positions[i], lastError: reason };
      ranks?.set(i, rank);
    } else {
      moved.push({ at: i, move: decodeMove(record.body) });
      if (record.type === HANDOUT) handedOut?.add(i);
    }
  });
  // A moved message's latest record points back at its SCHEDULE, which holds the payload.
  const origins = moved.map(({ move }) => move.payloadPosition);
  await readInPieces(log, origins, damaged, (i, origin) => {
    const { at, move } = moved[i];
    const record = decodeOrigin(origin.type, origin.body);
    states[at] = {
      ...record,
      payload: kept(record.payload),
      deliverAt: move.deliverAt,
      attempts: move.attempts,
      ref: move.payloadPosition,
      lastError: move.lastError,
    };
  });
  return states;
}

/**
 * The records at `positions`, to `use` in order, in reads of about READ_BYTES (readMany); one
 * that cannot be read is told to `damaged` and skipped (without it, damage throws).
 */
async function readInPieces(
  log: MessageLog,
  positions: number[],
  damaged: OnDamaged | undefined,
  use: (i: number, record: ReadResult) => void,
): Promise<void> {
  let perRead = FIRST_READ;
  for (let start = 0; start < positions.length;) {
    const chunk = positions.slice(start, start + perRead);
    const records = await log.readMany(chunk);
    let bytes = 0;
    for (let i = 0; i < chunk.length; i++) {
      const record = records[i];
      if (isLogFailure(record)) {
        if (damaged === undefined || !isDamage(record)) throw record;
        damaged(chunk[i], record);
        continue;
      }
      bytes += record.body.byteLength;
      use(start + i, record);
    }
    start += chunk.length;
    // About READ_BYTES of records next, judged by this read.
    const each = Math.max(1, bytes / Math.max(1, chunk.length));
    perRead = Math.max(1, Math.min(STATES_PER_READ, Math.floor(READ_BYTES / each)));
  }
}

/**
 * Hands the messages at `due`'s positions still live and pending to the queue, in (due time,
 * position) order: schedule order for equal due times. `stopped` (recovery) may keep one whose
 * latest record is a HANDOUT (a promise) instead (handouts.ts).
 */
export async function handOver(
  tables: Tables,
  log: MessageLog,
  due: Map<number, number>,
  onDue: (message: MessageState) => void,
  damaged: OnDamaged,
  budget?: PayloadBudget,
  stopped?: (message: MessageState) => Promise<void> | undefined,
): Promise<void> {
  const positions = [...due.keys()];
  const handedOut = stopped === undefined ? undefined : new Set<number>();
  const ranks = new Map<number, number>();
  const states = await statesAt(log, positions, damaged, budget, handedOut, ranks);
  const order: Array<[number, number, MessageState, number]> = [];
  for (let i = 0; i < positions.length; i++) {
    const state = states[i];
    const position = positions[i];
    if (state === undefined || !tables.isPendingAt(state.id, position)) {
      tables.near.delete(position);
      continue;
    }
    order.push([state.deliverAt, ranks.get(i) ?? position, state, i]);
  }
  order.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const kept: Array<Promise<void>> = [];
  for (const [, , state, i] of order) {
    const position = positions[i];
    const keeping = handedOut?.has(i) === true ? stopped?.(state) : undefined;
    if (keeping !== undefined) {
      kept.push(keeping);
      continue;
    }
    tables.near.add(position);
    onDue(state);
  }
  await Promise.all(kept);
}

/**
 * Loads the horizon: index files starting before `frontier` taken, current entries handed over.
 * Every such file, not only new ones: one whose load failed is retried.
 */
export async function loadIndexFiles(
  { log, index, tables, checkpoints, budget }: RecoveryParts,
  frontier: number,
  onDue: (message: MessageState) => void,
  damaged: OnDamaged,
): Promise<void> {
  for (const { key, start } of index.files()) {
    if (start >= frontier) break;
    if (checkpoints.wasLoaded(key)) continue;
    // Current: its id's latest record is the one it points at (a dead one's is its BURY).
    const current = tables.latestCheck();
    const { count, f64, u32 } = await index.take(key, frontier, current);
    const due = new Map<number, number>();
    for (let i = 0; i < count; i++) {
      const position = f64[3 * i + 1];
      if (!current(u32[6 * i + 4], u32[6 * i + 5], position)) continue;
      // Handed over already by another file (one taken again after a crash carries copies).
      if (tables.near.has(position)) continue;
      due.set(position, f64[3 * i]);
      tables.near.add(position);
    }
    try {
      await handOver(tables, log, due, onDue, damaged, budget);
    } catch (err) {
      // Nothing was handed over (the log read failed): the next load must find them again.
      for (const position of due.keys()) tables.near.delete(position);
      throw err;
    }
    await checkpoints.retire(key);
  }
}
