/**
 * The embedded queue's stats() and dueTimeline() besides the report's counters, without walking
 * messages: held counts come from the near horizon, the rest from the store.
 *
 *   scheduled(topic) = store.pending(topic) − held ready(topic) − held in flight(topic)
 *   on disk by minute  = store.minutes(minute) − held minutes(minute)
 */

import { SystemClock, type Clock } from '../clock/index.js';
import type { TopicStateCounts } from '../protocol/model.js';
import type { TimerWheelStats } from '../timer/index.js';
import type { BackendStats } from './backend.js';
import type { QueueReport } from './report.js';
import { MINUTE_MS, type HeldCounts } from './near-message.js';
import type { Store } from './store.js';
import type { DueTimeline } from './types.js';

export interface StatsSources {
  held: HeldCounts;
  store: Store;
  loadedUntil: number;
  timers: TimerWheelStats;
}

/** Tells `report` when the data was last written (SystemClock only: a ManualClock's time is its own). */
export async function noteLastWrite(
  report: QueueReport,
  clock: Clock,
  store: Pick<Store, 'lastWrittenAt'>,
): Promise<void> {
  if (!(clock instanceof SystemClock) || store.lastWrittenAt === undefined) return;
  const written = await store.lastWrittenAt();
  if (written === undefined) return;
  report.recoveredAfter(clock.now() - Math.max(0, Date.now() - written));
}

export function embeddedStats({ held, store, loadedUntil, timers }: StatsSources): BackendStats {
  return {
    inMemory: held.size,
    payloadMemory: { heldBytes: held.payloads.held, limitBytes: held.payloads.limit },
    loadedUntil,
    topics: topicStates(held, store),
    timers,
    store: store.stats(),
  };
}

/**
 * Each topic's counts by state, made as read: one object, filled anew for each topic (a reader
 * copies what it keeps), so that stats() of many topics makes none per topic.
 */
function* topicStates(held: HeldCounts, store: Store): Generator<[string, TopicStateCounts]> {
  const counts: TopicStateCounts = { scheduled: 0, ready: 0, inflight: 0, dead: 0 };
  const entry: [string, TopicStateCounts] = ['', counts];
  const { tallies } = held;
  for (const [topic, { pending, dead }] of store.counts().topics) {
    const tally = tallies.get(topic);
    const ready = tally?.ready ?? 0;
    const inflight = tally?.inflight ?? 0;
    counts.scheduled = Math.max(0, pending - ready - inflight);
    counts.ready = ready;
    counts.inflight = inflight;
    counts.dead = dead;
    entry[0] = topic;
    yield entry;
  }
}

/**
 * Scheduled messages by time until due: held ones by due time, those on disk by minute. An edge
 * past `loadedUntil` is moved back to a whole minute (or `loadedUntil`), so none straddles one.
 *
 * Worked example: now 12:00:20, loadedUntil 12:02:00, edges 60 s and 1 h. The 60 s edge
 * (12:01:20) is in memory and stays; the 1 h edge (13:00:20) becomes 13:00:00, i.e. 3,580,000
 * ms. A message on disk due 13:00:10 counts in the last bucket, as its minute, 13:00, does.
 */
export function dueTimeline(
  edgesMs: readonly number[],
  now: number,
  held: HeldCounts,
  storeMinutes: ReadonlyMap<number, number>,
  loadedUntil: number,
): DueTimeline {
  const edges = edgesMs.map((edge) => {
    const at = now + edge;
    if (at <= loadedUntil) return edge;
    return Math.max(loadedUntil, Math.floor(at / MINUTE_MS) * MINUTE_MS) - now;
  });
  const counts = new Array<number>(edges.length + 1).fill(0);
  const bucketOf = (until: number) => {
    let bucket = 0;
    while (bucket < edges.length && until >= edges[bucket]) bucket++;
    return bucket;
  };
  // forEach, not for-of: no entry array per distinct due time or minute.
  const since = held.due.base - now;
  held.due.settled().forEach((count, due) => (counts[bucketOf(since + due)] += count));
  // The store counts every live message, including those in memory: take those out.
  const heldMinutes = held.minutes;
  storeMinutes.forEach((count, minute) => {
    const far = count - (heldMinutes.get(minute) ?? 0);
    if (far > 0) counts[bucketOf(Math.max(minute * MINUTE_MS, loadedUntil) - now)] += far;
  });
  return { edgesMs: edges, counts };
}
