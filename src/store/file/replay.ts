/**
 * Replays: the tables rebuilt from the log at recovery, through the same Tables.apply that live
 * changes take, and what is due before the frontier once they are.
 *
 *   whole log   every record from the first segment the log needs; the IdTable keeps each
 *               message's due time beside its position meanwhile (its second value), so what
 *               is due comes from the tables alone (dueAfterReplay)
 *   tail        a snapshot's tables, then the records from its position on; what is due comes
 *               from the snapshot's near positions, the tail, and the index (dueAfterSnapshot)
 *
 * Re-indexing: a replayed SCHEDULE, MOVE or HANDOUT gets an index entry when its message is due at or
 * after the frontier and its record is at or after `indexedUntil`, the position before which
 * the last checkpoint vouches that the index on disk has every such entry. That is the rule
 * live changes follow too (FileStore.add, move), so a replay and the live store index the same
 * records.
 */

import { readF64 } from '../bytes.js';
import type { MessageLog, ReplayOptions, ReplayReport } from '../log/index.js';
import type { Checkpoint } from './checkpoint.js';
import { PositionSet } from './position-set.js';
import { offsetOf, segmentOf } from './positions.js';
import { FINISH, HANDOUT, MOVE, SCHEDULE, payloadPositionOf } from './records.js';
import type { StoreSnapshot } from './snapshot.js';
import { ReplayWatcher, type Tables } from './table.js';
import { fileName, parseFileName } from './index-files.js';
import type { WindowIndex } from './window-index.js';

/** What a replay reads and rebuilds. */
export interface ReplayParts {
  readonly log: MessageLog;
  readonly index: WindowIndex;
  readonly tables: Tables;
}

/**
 * Whole-log replay, from `from` (the first segment the log needs): every record through
 * apply, due times kept while it runs. Without `index` (a plan) the schedule index is left
 * as it is: nothing deleted, nothing added. `watcher` learns what the tables do not keep;
 * `onRecord` hears of each record's position before it is applied.
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
  // The index on disk covers the log up to checkpoint.indexedUntil only if nothing removed
  // entries from it since (a truncated or deleted file: disk trouble, an operator) and the
  // frontier did not move back (a smaller horizonMs than last time, the clock set back):
  // records of messages that were due before the old frontier have no entry, and windows
  // loaded into memory since the checkpoint are deleted. Windows wholly before the frontier
  // do not matter: recovery hands their messages over from the replay. If in doubt, rebuild
  // the index from the log, which is the truth.
  const sizes = index.sizes();
  const trusted =
    checkpoint.frontier <= frontier &&
    Object.entries(checkpoint.windows).every(([key, bytes]) => {
      const file = parseFileName(fileName(key), index.windowMs);
      return (file !== undefined && file.end <= frontier) || (sizes.get(key) ?? 0) >= bytes;
    });
  if (!trusted && options.index) {
    for (const { key } of index.files()) await index.delete(key);
  }
  const indexedUntil = !options.index ? Infinity : trusted ? checkpoint.indexedUntil : 0;
  tables.ids.useAux(true);
  // Room for about as many messages as the log could hold, so replay does not keep growing it.
  tables.ids.reserve(Math.min(50_000_000, Math.floor(log.stats().bytes / 120)));
  const { onRecord } = options;
  tables.replay = options.watcher;
  try {
    return await log.replay(
      onRecord === undefined
        ? (type, body, position) =>
            tables.apply(
              type,
              body,
              0,
              position,
              reindexes(type, body, position, indexedUntil, frontier),
            )
        : (type, body, position) => {
            onRecord(position);
            tables.apply(
              type,
              body,
              0,
              position,
              reindexes(type, body, position, indexedUntil, frontier),
            );
          },
      options.from,
      options.replay,
    );
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
 * Loads a snapshot and replays the log from its position on. Returns the replay's report and
 * the tail records whose message is due before the frontier, flat, four numbers each
 * (deliverAt, position, id hash low, id hash high).
 */
export async function replayTail(
  { log, tables }: ReplayParts,
  frontier: number,
  snapshot: StoreSnapshot,
  indexedUntil: number,
  options: ReplayOptions,
): Promise<{ report: ReplayReport; tail: number[] }> {
  tables.adopt(snapshot);
  const tail = new TailDue(frontier);
  tables.replay = tail;
  try {
    const report = await log.replay(
      (type, body, position) =>
        tables.apply(
          type,
          body,
          0,
          position,
          reindexes(type, body, position, indexedUntil, frontier),
        ),
      snapshot.position,
      options,
    );
    return { report, tail: tail.entries };
  } finally {
    tables.replay = undefined;
  }
}

/**
 * After a snapshot and its tail: what is due before the new frontier comes from three
 * places, which may overlap (hence a map by position):
 *   - the messages the queue held when the snapshot was taken (its near positions), less
 *     those the tail moved or finished;
 *   - tail records whose message is due before the frontier (tracked while replaying);
 *   - index files starting before the frontier still on disk: every file handed over after
 *     the snapshot was taken, and any not yet handed over (their entries due later are
 *     carried to files nearer their time).
 * Entries that are no longer their message's latest record are dropped here (index and
 * tail) or once read (near positions).
 */
export async function dueAfterSnapshot(
  { index, tables }: ReplayParts,
  frontier: number,
  tail: number[],
): Promise<Map<number, number>> {
  const due = new Map<number, number>();
  // The snapshot's near positions, less those the tail moved or finished.
  for (const position of tables.near) due.set(position, NaN);
  tables.near = new PositionSet();
  const collided = tables.collidedPositions();
  for (let i = 0; i < tail.length; i += 4) {
    if (tables.isLatest(tail[i + 2], tail[i + 3], tail[i + 1], collided)) {
      due.set(tail[i + 1], tail[i]);
    }
  }
  const current = (low: number, high: number, position: number) =>
    tables.isLatest(low, high, position, collided);
  for (const { key, start } of index.files()) {
    if (start >= frontier) break;
    const entries = await index.take(key, frontier, current);
    for (let i = 0; i < entries.count; i++) {
      if (current(entries.low[i], entries.high[i], entries.position[i])) {
        due.set(entries.position[i], entries.deliverAt[i]);
      }
    }
  }
  return due;
}

/** Bytes of the log from a position to its end. */
export function bytesFrom(log: MessageLog, position: number): number {
  const first = segmentOf(position);
  let bytes = -offsetOf(position);
  for (const segment of log.segments()) {
    if (segment >= first) bytes += log.segmentSize(segment) ?? 0;
  }
  return Math.max(0, bytes);
}

/**
 * While the whole log is replayed next to a snapshot that could not be used: finishes, at or
 * after its position, of messages whose schedule was not read, by the segment of the payload
 * (to tell which of the snapshot's live payloads are still live).
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

function reindexes(
  type: number,
  body: Buffer,
  position: number,
  indexedUntil: number,
  frontier: number,
): boolean {
  return (
    position >= indexedUntil &&
    (type === SCHEDULE || type === MOVE || type === HANDOUT) &&
    readF64(body, 0) >= frontier
  );
}
