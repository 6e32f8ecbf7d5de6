/**
 * list() over the file store: the messages it still has to itself (beyond the horizon, or whose
 * load failed), found through the schedule index, whose entries have no topic. A page keeps the
 * `budget` (listScanRecords) current entries due first that the queue does not hold (files
 * starting after the last kept one are not read), then reads their records in that order until
 * it has its messages and the due time reached is whole (equal due times list by `ref`, or the
 * rank a RELOCATE carries, which a position does not give). So a page reads at most `budget` records, and a rare topic's may end
 * short, at `through`. A due time with more than `budget` messages is read whole, in chunks, or
 * no page inside it could progress.
 */

import type { KeyedPart, ListKey, ListQuery } from '../../queue/list.js';
import { SEQ_AFTER, SEQ_BEFORE, SmallestKeys, compareKeys, inRange } from '../../queue/list.js';
import type { StoredMessage } from '../../queue/store.js';
import { statesAt, type OnDamaged } from './states.js';
import type { ReplayParts } from './replay.js';
import type { EntryChunk } from './window-index.js';

/** Records read at once while examining candidates. */
const RECORDS_PER_READ = 512;

/** A candidate: an index entry's due time and log position. */
interface Candidates {
  deliverAt: number[];
  position: number[];
  /** Whether current entries were left out (beyond the kept ones, or in files not read). */
  cut: boolean;
}

export async function listWaiting(
  parts: ReplayParts,
  query: ListQuery,
  damaged: OnDamaged,
  budget: number,
): Promise<KeyedPart<StoredMessage>> {
  const { after } = query;
  const candidates = await findCandidates(parts, query, budget);
  const found = new SmallestKeys<StoredMessage>(query.limit + 1);
  const count = candidates.position.length;
  let examined = 0;
  let matches = 0;
  while (examined < count && matches <= query.limit) {
    const end = Math.min(count, examined + RECORDS_PER_READ);
    matches += await examine(parts, query, candidates, examined, end, found, damaged);
    examined = end;
  }
  // The due time reached is listed whole: equal due times order by ref, not by position.
  if (examined < count) {
    const last = candidates.deliverAt[examined - 1];
    let end = examined;
    while (end < count && candidates.deliverAt[end] === last) end++;
    await examine(parts, query, candidates, examined, end, found, damaged);
    examined = end;
  }
  let through: ListKey | undefined;
  if (examined < count) {
    through = { deliverAt: candidates.deliverAt[examined - 1], seq: SEQ_AFTER, id: '' };
  } else if (candidates.cut) {
    // Entries not kept may be due at the last kept due time.
    through = { deliverAt: candidates.deliverAt[count - 1], seq: SEQ_BEFORE, id: '' };
  }
  if (through !== undefined && after !== undefined && compareKeys(through, after) <= 0) {
    // Every candidate kept is due at the cursor's time: that due time is read whole.
    return dueTimeWhole(parts, query, after.deliverAt, damaged, budget);
  }
  const part = found.part();
  if (
    part.through !== undefined &&
    (through === undefined || compareKeys(part.through, through) < 0)
  ) {
    through = part.through;
  }
  return {
    items: part.items.filter(({ key }) => through === undefined || compareKeys(key, through) <= 0),
    through,
  };
}

/** Whether messages due at `deliverAt` may be on the page (in range, not before the cursor). */
function startsAfter(query: ListQuery, deliverAt: number): boolean {
  const { after } = query;
  if (deliverAt < query.from || deliverAt >= query.until) return false;
  if (after === undefined || deliverAt > after.deliverAt) return true;
  return deliverAt === after.deliverAt && after.seq < SEQ_AFTER;
}

/** Step 1: the `budget` smallest current, not held entries the page may list, each once. */
async function findCandidates(
  { index, tables }: ReplayParts,
  query: ListQuery,
  budget: number,
): Promise<Candidates> {
  const lo = Math.max(query.from, query.after?.deliverAt ?? -Infinity);
  let deliverAt: number[] = [];
  let position: number[] = [];
  let cut = false;
  // The largest kept once `budget` are kept: entries after it cannot be among the smallest.
  let maxDue = Infinity;
  let maxPosition = Infinity;
  const trim = () => {
    const order = deliverAt.map((_, i) => i);
    order.sort((a, b) => deliverAt[a] - deliverAt[b] || position[a] - position[b]);
    const keptDue: number[] = [];
    const keptPosition: number[] = [];
    for (const i of order) {
      const at = keptPosition.length;
      // The same entry twice: a file read while its entries were carried to another.
      if (at > 0 && keptPosition[at - 1] === position[i] && keptDue[at - 1] === deliverAt[i]) {
        continue;
      }
      if (at === budget) {
        cut = true;
        break;
      }
      keptDue.push(deliverAt[i]);
      keptPosition.push(position[i]);
    }
    deliverAt = keptDue;
    position = keptPosition;
    if (keptPosition.length === budget) {
      maxDue = keptDue[budget - 1];
      maxPosition = keptPosition[budget - 1];
    }
  };
  const isLatest = tables.latestCheck();
  const visit = ({ count, f64, u32 }: EntryChunk) => {
    for (let i = 0; i < count; i++) {
      const due = f64[3 * i];
      if (!startsAfter(query, due)) continue;
      const at = f64[3 * i + 1];
      if (due > maxDue || (due === maxDue && at >= maxPosition)) {
        cut = true;
        continue;
      }
      if (!isLatest(u32[6 * i + 4], u32[6 * i + 5], at)) continue;
      if (tables.near.has(at)) continue;
      deliverAt.push(due);
      position.push(at);
      if (position.length >= budget * 2) trim();
    }
  };
  for (const file of index.files()) {
    if (file.end <= lo || file.start >= query.until) continue;
    if (file.start > maxDue) {
      cut = true;
      break;
    }
    await index.scan(file.key, visit);
  }
  trim();
  return { deliverAt, position, cut };
}

/** Step 2 for candidates [from, to): keeps the page's messages; returns how many. */
async function examine(
  { log, tables }: ReplayParts,
  query: ListQuery,
  candidates: Candidates,
  from: number,
  to: number,
  found: SmallestKeys<StoredMessage>,
  damaged: OnDamaged,
): Promise<number> {
  const positions = candidates.position.slice(from, to);
  // A message carried forward (compaction.ts) keeps its rank: its place among equal due times,
  // and so a listing's cursor, does not change with the move.
  const ranks = new Map<number, number>();
  const states = await statesAt(log, positions, damaged, undefined, undefined, ranks);
  let kept = 0;
  for (let i = 0; i < positions.length; i++) {
    const state = states[i];
    if (state === undefined || state.topic !== query.topic) continue;
    if (!tables.isPendingAt(state.id, positions[i])) continue;
    const key = { deliverAt: state.deliverAt, seq: ranks.get(i) ?? state.ref, id: state.id };
    if (!inRange(query, key)) continue;
    found.push({ ...state, payload: undefined, status: 'scheduled' }, key);
    kept++;
  }
  return kept;
}

/** The page's messages due at the cursor's `deliverAt`, which holds more than a budget. */
async function dueTimeWhole(
  parts: ReplayParts,
  query: ListQuery,
  deliverAt: number,
  damaged: OnDamaged,
  budget: number,
): Promise<KeyedPart<StoredMessage>> {
  const { index, tables } = parts;
  const positions = new Set<number>();
  const isLatest = tables.latestCheck();
  for (const file of index.files()) {
    if (file.end <= deliverAt || file.start > deliverAt) continue;
    await index.scan(file.key, ({ count, f64, u32 }) => {
      for (let i = 0; i < count; i++) {
        const at = f64[3 * i + 1];
        if (f64[3 * i] !== deliverAt || tables.near.has(at)) continue;
        if (isLatest(u32[6 * i + 4], u32[6 * i + 5], at)) positions.add(at);
      }
    });
  }
  const found = new SmallestKeys<StoredMessage>(query.limit + 1);
  const all = [...positions];
  const candidates: Candidates = { deliverAt: all.map(() => deliverAt), position: all, cut: false };
  for (let from = 0; from < all.length; from += budget) {
    const to = Math.min(all.length, from + budget);
    await examine(parts, query, candidates, from, to, found, damaged);
  }
  const part = found.part();
  return { items: part.items, through: part.through ?? { deliverAt, seq: SEQ_AFTER, id: '' } };
}
