/**
 * What the queue tells about itself: counters, lateness, stats() and dueHistogram() (the
 * dashboard's timeline), all without walking messages.
 *
 * Lateness, measured on the queue's clock from when a message could first have been delivered:
 * its due time, or the time it was handed in (scheduled or rescheduled) if that due time was
 * already past, so that a message scheduled for months ago and received at once is not months
 * late. `lateFrom` keeps those hand-in times, by id, until the message's first delivery or its
 * removal; it is empty in the usual case, and every lookup is skipped then.
 *
 * - fire lateness (due → ready): a ring of the last 4096 samples, for quantiles;
 * - delivery lateness (due → first hand-over to a consumer): cumulative-ready bucket counts
 *   with upper bounds DELIVERY_LATENESS_BUCKETS_MS, and a sum (a Prometheus histogram).
 *
 * Counts of held messages come from the near horizon (near.ts), which keeps them with every
 * change of state; counts of the rest come from the store. Combining them:
 *
 *   scheduled(topic) = store.pending(topic) − held ready(topic) − held in flight(topic)
 *   on disk by minute  = store.minutes(minute) − held minutes(minute)
 */

import { SystemClock, type Clock } from '../clock/index.js';
import type { TimerWheelStats } from '../timer/index.js';
import type { MessageState } from './message.js';
import { MINUTE_MS, type HeldCounts } from './near-message.js';
import type { Store } from './store.js';

/** Upper bounds (ms) of the first-delivery lateness buckets stats() reports. */
const DELIVERY_LATENESS_BUCKETS_MS = [1, 5, 10, 25, 50, 100, 250, 500, 1000, 5000, 30_000, 300_000];
/** Fire lateness samples kept for quantiles. */
const LATENESS_SAMPLES = 4096;

export interface QueueCounters {
  scheduled: number;
  deduplicated: number;
  fired: number;
  delivered: number;
  acked: number;
  nacked: number;
  expired: number;
  dead: number;
  cancelled: number;
  rescheduled: number;
}

/** What stats() reads besides the counters. */
export interface StatsSources {
  held: HeldCounts;
  store: Store;
  loadedUntil: number;
  timers: TimerWheelStats;
}

/** Where QueueInsights keeps its sums. */
const FIRE_SUM = 0;
const DELIVERY_SUM = 1;

export class QueueInsights {
  readonly counters: QueueCounters = {
    scheduled: 0,
    deduplicated: 0,
    fired: 0,
    delivered: 0,
    acked: 0,
    nacked: 0,
    expired: 0,
    dead: 0,
    cancelled: 0,
    rescheduled: 0,
  };
  private readonly lateness = new Float64Array(LATENESS_SAMPLES);
  private latenessCount = 0;
  /**
   * The sums of fire lateness and of first-delivery lateness (ms), in a typed array rather than
   * two fields: a field that starts at 0 and takes a fraction later changes representation, and
   * V8 then deprecates the object's shape and deoptimises the code compiled for it (at the
   * first fire of a process, in the middle of its first burst).
   */
  private readonly sums = new Float64Array(2);
  private readonly lateFrom = new Map<string, number>();
  /** First deliveries per DELIVERY_LATENESS_BUCKETS_MS bucket (not cumulative), then the rest. */
  private readonly deliveryLateness = new Float64Array(DELIVERY_LATENESS_BUCKETS_MS.length + 1);

  /**
   * Lateness counts from no earlier than this (the queue's clock): when a data directory was
   * last written before this open, for the messages it held then (see recoveredAfter).
   */
  private floor = -Infinity;

  /**
   * The queue opened on data last written at `lastWrite` (its clock). A message already overdue
   * then is counted from then, not from its due time: when it was handed in is not kept on disk,
   * and one scheduled for years ago was not years late. One that came due while the queue was
   * down counts from its due time. Messages handed in from now on are all later than this.
   */
  recoveredAfter(lastWrite: number): void {
    this.floor = lastWrite;
  }

  /**
   * Reads when the store's data was last written and notes it (recoveredAfter): on this
   * package's system clock only, whose time is the wall clock's, converted by how long ago that
   * was. (A ManualClock's time has no relation to a file's.)
   */
  async noteLastWrite(clock: Clock, store: Pick<Store, 'lastWrittenAt'>): Promise<void> {
    if (!(clock instanceof SystemClock) || store.lastWrittenAt === undefined) return;
    const written = await store.lastWrittenAt();
    if (written === undefined) return;
    this.recoveredAfter(clock.now() - Math.max(0, Date.now() - written));
  }

  /** A message handed in at `now` with a due time already past: its lateness counts from now. */
  handedInLate(id: string, now: number): void {
    this.lateFrom.set(id, now);
  }

  /** The message's first delivery or removal: its hand-in time is no longer needed. */
  forgetLate(id: string): void {
    if (this.lateFrom.size !== 0) this.lateFrom.delete(id);
  }

  /** A message came due (ready) at `now`. */
  fired(message: MessageState, now: number): void {
    this.counters.fired++;
    // `now` may be a reading shared by the fires of one run (near.ts, fireTime), taken before a
    // message of that run was handed in: never a negative lateness.
    const late = Math.max(0, now - this.dueFrom(message));
    this.lateness[this.latenessCount++ % LATENESS_SAMPLES] = late;
    this.sums[FIRE_SUM] += late;
  }

  /** A message was handed to a consumer for the first time at `now`. */
  deliveredFirst(message: Pick<MessageState, 'id' | 'deliverAt'>, now: number): void {
    const late = Math.max(0, now - this.dueFrom(message));
    this.forgetLate(message.id);
    let bucket = 0;
    while (
      bucket < DELIVERY_LATENESS_BUCKETS_MS.length &&
      late > DELIVERY_LATENESS_BUCKETS_MS[bucket]
    ) {
      bucket++;
    }
    this.deliveryLateness[bucket]++;
    this.sums[DELIVERY_SUM] += late;
  }

  /** When a message could first have been delivered: its due time, unless handed in later. */
  private dueFrom(message: Pick<MessageState, 'id' | 'deliverAt'>): number {
    const due = message.deliverAt > this.floor ? message.deliverAt : this.floor;
    if (this.lateFrom.size === 0) return due;
    return Math.max(due, this.lateFrom.get(message.id) ?? 0);
  }

  /** The counters and both lateness figures, as stats() reports them. */
  figures(): Record<string, unknown> {
    const samples = this.lateness.slice(0, Math.min(this.latenessCount, LATENESS_SAMPLES)).sort();
    const pick = (q: number) =>
      samples.length === 0 ? null : samples[Math.floor(q * (samples.length - 1))];
    const cumulative = Array.from(this.deliveryLateness);
    for (let i = 1; i < cumulative.length; i++) cumulative[i] += cumulative[i - 1];
    return {
      ...this.counters,
      latenessMs: {
        p50: pick(0.5),
        p99: pick(0.99),
        max: samples.length ? samples[samples.length - 1] : null,
        count: this.latenessCount,
        sum: this.sums[FIRE_SUM],
      },
      deliveryLatenessMs: {
        buckets: DELIVERY_LATENESS_BUCKETS_MS.map((le, i) => [le, cumulative[i]]),
        count: cumulative[cumulative.length - 1],
        sum: this.sums[DELIVERY_SUM],
      },
    };
  }

  stats({ held, store, loadedUntil, timers }: StatsSources): Record<string, unknown> {
    // Per topic: ready and in flight from memory; scheduled and dead from the store's counts,
    // which cover every live message wherever it is held (memory or disk).
    const byTopic: Record<
      string,
      { scheduled: number; ready: number; inflight: number; dead: number }
    > = {};
    const topicOf = (topic: string) =>
      (byTopic[topic] ??= { scheduled: 0, ready: 0, inflight: 0, dead: 0 });
    for (const [topic, { pending, dead }] of store.counts().topics) {
      const entry = topicOf(topic);
      entry.scheduled = pending;
      entry.dead = dead;
    }
    for (const [topic, { ready, inflight }] of held.tallies) {
      if (ready + inflight === 0) continue;
      const entry = topicOf(topic);
      entry.ready = ready;
      entry.inflight = inflight;
      entry.scheduled = Math.max(0, entry.scheduled - ready - inflight);
    }
    return {
      ...this.figures(),
      inMemory: held.size,
      payloadMemory: { heldBytes: held.payloads.held, limitBytes: held.payloads.limit },
      loadedUntil,
      topics: byTopic,
      timers,
      store: store.stats(),
    };
  }
}

/** Scheduled messages by time until due, and the edges they were counted at (dueTimeline). */
export interface DueTimeline {
  /**
   * Each edge asked for, or, for one past the in-memory horizon, the whole minute at or before
   * it (never before the horizon): what is on disk is counted by the minute it is due in.
   */
  edgesMs: number[];
  /** counts[i]: due before edgesMs[i] from now and not before the previous edge; last: the rest. */
  counts: number[];
}

/**
 * Every scheduled message (not yet due), by time until due, exact for the edges it returns.
 * Messages in memory (due before `loadedUntil`) count by their exact due time; those still on
 * disk by the minute they are due in, taken as the start of that minute or `loadedUntil`,
 * whichever is later (their due time is never earlier). An edge at or before `loadedUntil` is
 * kept as it is: every message on disk is due at or after it. One past it is moved back to a
 * whole minute (or to `loadedUntil`), so that no minute on disk straddles it and every message
 * falls on the side its due time says. Costs one step per distinct due time in memory and per
 * minute on disk, never a walk over messages.
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
  const since = held.countBase - now;
  held.scheduledDue.forEach((count, due) => (counts[bucketOf(since + due)] += count));
  // The store counts every live message, including those in memory: take those out.
  const heldMinutes = held.minutes;
  storeMinutes.forEach((count, minute) => {
    const far = count - (heldMinutes.get(minute) ?? 0);
    if (far > 0) counts[bucketOf(Math.max(minute * MINUTE_MS, loadedUntil) - now)] += far;
  });
  return { edgesMs: edges, counts };
}
