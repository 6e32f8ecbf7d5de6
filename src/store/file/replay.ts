/**
 * Replays at recovery, through Tables.apply: the whole log (the IdTable keeps due times as its
 * second value meanwhile: dueAfterReplay), or a snapshot's tables and the log after it (what is
 * due comes from its near positions, the tail and the index: dueAfterSnapshot). A replayed
 * SCHEDULE, MOVE, HANDOUT or live RELOCATE is indexed when due at or after the frontier and at or after
 * `indexedUntil` (before it the checkpoint vouches for the index): the live rule too.
 */

import type { MessageLog, OnRecord, ReplayOptions, ReplayReport } from '../log/index.js';
import type { Checkpoint } from './checkpoint.js';
import { PositionSet } from './position-set.js';
import {
  FINISH,
  HANDOUT,
  MOVE,
  RELOCATE,
  SCHEDULE,
  payloadPositionOf,
  recordDeliverAt,
  relocatedDead,
} from './records.js';
import type { StoreSnapshot } from './snapshot.js';
import { ReplayWatcher, type Tables } from './table.js';
import { fileOfKey, type WindowIndex } from './window-index.js';
import { offsetOf, segmentOf } from '../log/index.js';

export interface ReplayParts {
  readonly log: MessageLog;
  readonly index: WindowIndex;
  readonly tables: Tables;
}

/**
 * Whole-log replay from `from`. Without `index` (a plan) the index is left as it is. `watcher`
 * learns what the tables do not keep; `onRecord` hears each position before it is applied.
 */
export async function replayAll(
  { log, index, tables }: ReplayParts,
  frontier: number,
  checkpoint: Checkpoint,
  options: {
    from: number;
    replay: ReplayOptions;
    index: boolean;
    watcher: ReplayWatcher;
    onRecord?: (position: number) => void;
  },
): Promise<ReplayReport> {
  // The index covers the log up to indexedUntil only if no file lost entries since and the
  // frontier did not move back (a smaller horizonMs, the clock set back). Windows wholly before
  // the frontier do not matter (the replay hands them over). If in doubt, rebuild from the log.
  const sizes = index.sizes();
  const trusted =
    checkpoint.frontier <= frontier &&
    Object.entries(checkpoint.windows).every(([key, bytes]) => {
      const file = fileOfKey(key, index.windowMs);
      return (file !== undefined && file.end <= frontier) || (sizes.get(key) ?? 0) >= bytes;
    });
  if (!trusted && options.index) {
    for (const { key } of index.files()) await index.delete(key);
  }
  const indexedUntil = !options.index ? Infinity : trusted ? checkpoint.indexedUntil : 0;
  tables.ids.useAux(true);
  tables.ids.reserve(Math.min(50_000_000, Math.floor(log.stats().bytes / 120)));
  const apply = applier(tables, indexedUntil, frontier, options.onRecord);
  tables.replay = options.watcher;
  try {
    return await log.replay(apply, options.from, options.replay);
  } finally {
    tables.replay = undefined;
  }
}

/** Live, not dead, due before the frontier, after a whole-log replay: position -> due. */
export function dueAfterReplay(tables: Tables, frontier: number): Map<number, number> {
  const due = new Map<number, number>();
  const deadPositions = new Set<number>();
  for (const dead of tables.deadIds.values()) deadPositions.add(dead.position);
  tables.ids.forEach((_low, _high, position, deliverAt) => {
    if (deliverAt < frontier && !deadPositions.has(position)) due.set(position, deliverAt);
  });
  for (const { position, deliverAt } of tables.collisions.values()) {
    if (deliverAt < frontier && !deadPositions.has(position)) due.set(position, deliverAt);
  }
  tables.ids.useAux(false);
  return due;
}

/**
 * Loads a snapshot and replays the log after it. `tail`: records due before the frontier, four
 * numbers each (deliverAt, position, id hash low, high).
 */
export async function replayTail(
  { log, tables }: ReplayParts,
  frontier: number,
  snapshot: StoreSnapshot,
  { indexedUntil }: Checkpoint,
  options: ReplayOptions,
): Promise<{ report: ReplayReport; tail: number[] }> {
  tables.adopt(snapshot);
  const tail = new TailDue(frontier);
  tables.replay = tail;
  try {
    const apply = applier(tables, indexedUntil, frontier);
    const report = await log.replay(apply, snapshot.position, options);
    return { report, tail: tail.entries };
  } finally {
    tables.replay = undefined;
  }
}

/**
 * After a snapshot and its tail, what is due before the frontier comes from (overlapping, so a
 * map by position): the snapshot's near positions, tail records due before it, and index files
 * starting before it still on disk. Stale entries drop here, or once read (near positions).
 */
export async function dueAfterSnapshot(
  { index, tables }: ReplayParts,
  frontier: number,
  tail: number[],
): Promise<Map<number, number>> {
  const due = new Map<number, number>();
  for (const position of tables.near) due.set(position, NaN);
  tables.near = new PositionSet();
  const current = tables.latestCheck();
  for (let i = 0; i < tail.length; i += 4) {
    if (current(tail[i + 2], tail[i + 3], tail[i + 1])) due.set(tail[i + 1], tail[i]);
  }
  for (const { key, start } of index.files()) {
    if (start >= frontier) break;
    const { count, f64, u32 } = await index.take(key, frontier, current);
    for (let i = 0; i < count; i++) {
      if (current(u32[6 * i + 4], u32[6 * i + 5], f64[3 * i + 1])) {
        due.set(f64[3 * i + 1], f64[3 * i]);
      }
    }
  }
  return due;
}

export function bytesFrom(log: MessageLog, position: number): number {
  const first = segmentOf(position);
  let bytes = -offsetOf(position);
  for (const segment of log.segments()) {
    if (segment >= first) bytes += log.segmentSize(segment) ?? 0;
  }
  return Math.max(0, bytes);
}

/**
 * Finishes at or after `from` of messages whose schedule was not read, by payload segment: beside
 * a snapshot that could not be used (which of its live payloads still are), or in a repair.
 */
export class LateFinishes extends ReplayWatcher {
  readonly bySegment = new Map<number, number>();

  constructor(private readonly from: number) {
    super();
  }

  override unknown(type: number, body: Buffer, at: number, position: number): void {
    if (type !== FINISH || position < this.from) return;
    const segment = segmentOf(payloadPositionOf(FINISH, body, at));
    this.bySegment.set(segment, (this.bySegment.get(segment) ?? 0) + 1);
  }
}

/** While a snapshot's tail is replayed: its records due before the frontier (see replayTail). */
class TailDue extends ReplayWatcher {
  readonly entries: number[] = [];

  constructor(private readonly frontier: number) {
    super();
  }

  override placed(deliverAt: number, position: number, low: number, high: number): void {
    if (deliverAt < this.frontier) this.entries.push(deliverAt, position, low, high);
  }
}

/** Applies a replayed record, indexing it by the rule at the top of the file. */
function applier(
  tables: Tables,
  indexedUntil: number,
  frontier: number,
  onRecord?: (position: number) => void,
): OnRecord {
  return (type, body, position) => {
    onRecord?.(position);
    const reindex =
      position >= indexedUntil &&
      (type === SCHEDULE ||
        type === MOVE ||
        type === HANDOUT ||
        (type === RELOCATE && !relocatedDead(body))) &&
      recordDeliverAt(type, body) >= frontier;
    tables.apply(type, body, 0, position, reindex);
  };
}
