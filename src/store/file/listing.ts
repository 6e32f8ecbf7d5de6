/**
 * list() over the file store: the messages the store still has to itself (due at or after the
 * horizon, or whose load failed), found through the schedule index without reading the whole
 * schedule.
 *
 * An index entry has a due time, a log position and an id hash, but no topic: the topic is in
 * the log record. So a page is read in two steps, each bounded:
 *
 *   1. candidates: the index files whose span meets the page's times are read in the order of
 *      their start, a chunk at a time, keeping the `budget` current entries with the
 *      smallest (due time, position) not held by the queue. Once that many are kept and the
 *      next file starts after the last of them, no later file can hold a smaller one: the
 *      files after it are not read;
 *   2. records: the candidates' log records are read in that order until the page has its
 *      messages of the topic, then to the end of that due time (equal due times list by the
 *      message's `ref`, its schedule record, which a candidate's position, its latest record,
 *      does not give).
 *
 * So a page reads at most `budget` records (FileStoreOptions.listScanRecords, default 8,192). A rare topic's page may find fewer
 * messages than asked (or none) and then ends where the candidates end: its `through` is the
 * last due time wholly examined, and the next page goes on from there. One exception: a single
 * due time with more than `budget` waiting messages is read whole (a page inside it
 * otherwise could not make progress), a chunk at a time, keeping only the page's messages.
 */

import type { KeyedPart, ListKey, ListQuery } from '../../queue/list.js';
import { SEQ_AFTER, SEQ_BEFORE, SmallestKeys, compareKeys, inRange } from '../../queue/list.js';
import type { StoredMessage } from '../../queue/store.js';
import type { MessageLog } from '../log/index.js';
import { statesAt, type OnDamaged } from './states.js';
import type { Tables } from './table.js';
import type { EntryChunk, WindowIndex } from './window-index.js';

/** Records read at once while examining candidates. */
const RECORDS_PER_READ = 512;

export interface ListingParts {
  log: MessageLog;
  index: WindowIndex;
  tables: Tables;
}

/** A candidate: an index entry's due time and log position. */
interface Candidates {
  deliverAt: number[];
  position: number[];
  /** Whether current entries were left out (beyond the kept ones, or in files not read). */
  cut: boolean;
}

export async function listWaiting(
  parts: ListingParts,
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
    // Every candidate up to the due time examined last was examined (the kept ones after it
    // are due later, and so are those not kept).
    through = { deliverAt: candidates.deliverAt[examined - 1], seq: SEQ_AFTER, id: '' };
  } else if (candidates.cut) {
    // Entries not kept may be due at the last kept due time.
    through = before(candidates.deliverAt[count - 1]);
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

/** The bound before every message due at `deliverAt`. */
function before(deliverAt: number): ListKey {
  return { deliverAt, seq: SEQ_BEFORE, id: '' };
}

/**
 * Whether messages due at `deliverAt` may be on the page: in [from, until), and not before the
 * cursor's due time (nor at it, for a cursor past every message due then).
 */
function startsAfter(query: ListQuery, deliverAt: number): boolean {
  const { after } = query;
  if (deliverAt < query.from || deliverAt >= query.until) return false;
  if (after === undefined || deliverAt > after.deliverAt) return true;
  return deliverAt === after.deliverAt && after.seq < SEQ_AFTER;
}

/**
 * The `budget` current, not held index entries with the smallest (due time, position) that
 * the page may list, in that order, each position once.
 */
async function findCandidates(
  { index, tables }: ListingParts,
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
  const collided = tables.collidedPositions();
  const visit = ({ count, f64, u32 }: EntryChunk) => {
    for (let i = 0; i < count; i++) {
      const due = f64[3 * i];
      if (!startsAfter(query, due)) continue;
      const at = f64[3 * i + 1];
      if (due > maxDue || (due === maxDue && at >= maxPosition)) {
        cut = true;
        continue;
      }
      if (!tables.isLatest(u32[6 * i + 4], u32[6 * i + 5], at, collided)) continue;
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

/**
 * Reads the records of candidates [from, to) and keeps those of the topic in the page's range;
 * returns how many were kept.
 */
async function examine(
  { log, tables }: ListingParts,
  query: ListQuery,
  candidates: Candidates,
  from: number,
  to: number,
  found: SmallestKeys<StoredMessage>,
  damaged: OnDamaged,
): Promise<number> {
  const positions = candidates.position.slice(from, to);
  const states = await statesAt(log, positions, damaged);
  let kept = 0;
  for (let i = 0; i < positions.length; i++) {
    const state = states[i];
    if (state === undefined || state.topic !== query.topic) continue;
    if (!tables.isPendingAt(state.id, positions[i])) continue;
    const key = { deliverAt: state.deliverAt, seq: state.ref, id: state.id };
    if (!inRange(query, key)) continue;
    found.push({ ...state, payload: undefined, status: 'scheduled' }, key);
    kept++;
  }
  return kept;
}

/**
 * The page's messages due at `deliverAt` (the cursor's due time, held by more waiting messages
 * than a page examines): every current entry due then, its record read a chunk at a time.
 */
async function dueTimeWhole(
  parts: ListingParts,
  query: ListQuery,
  deliverAt: number,
  damaged: OnDamaged,
  budget: number,
): Promise<KeyedPart<StoredMessage>> {
  const { index, tables } = parts;
  const positions = new Set<number>();
  const collided = tables.collidedPositions();
  for (const file of index.files()) {
    if (file.end <= deliverAt || file.start > deliverAt) continue;
    await index.scan(file.key, ({ count, f64, u32 }) => {
      for (let i = 0; i < count; i++) {
        const at = f64[3 * i + 1];
        if (f64[3 * i] !== deliverAt || tables.near.has(at)) continue;
        if (tables.isLatest(u32[6 * i + 4], u32[6 * i + 5], at, collided)) positions.add(at);
      }
    });
  }
  const found = new SmallestKeys<StoredMessage>(query.limit + 1);
  const all = [...positions];
  const candidates: Candidates = {
    deliverAt: all.map(() => deliverAt),
    position: all,
    cut: false,
  };
  for (let from = 0; from < all.length; from += budget) {
    const to = Math.min(all.length, from + budget);
    await examine(parts, query, candidates, from, to, found, damaged);
  }
  const part = found.part();
  return { items: part.items, through: part.through ?? { deliverAt, seq: SEQ_AFTER, id: '' } };
}
