/**
 * A queue's counters and lateness figures, kept by every backend the same way (what stats()
 * reports of them is the same keys everywhere; docs/metrics.md).
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
 */

import type { DeliveryLateness, FireLateness, QueueCounters } from '../protocol/model.js';
import type { MessageState } from './message.js';

export type { QueueCounters } from '../protocol/model.js';

/** Upper bounds (ms) of the first-delivery lateness buckets stats() reports. */
const DELIVERY_LATENESS_BUCKETS_MS = [1, 5, 10, 25, 50, 100, 250, 500, 1000, 5000, 30_000, 300_000];
/** Fire lateness samples kept for quantiles. */
const LATENESS_SAMPLES = 4096;

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
  figures(): QueueCounters & {
    latenessMs: FireLateness;
    deliveryLatenessMs: DeliveryLateness;
  } {
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
        buckets: DELIVERY_LATENESS_BUCKETS_MS.map((le, i): [number, number] => [le, cumulative[i]]),
        count: cumulative[cumulative.length - 1],
        sum: this.sums[DELIVERY_SUM],
      },
    };
  }
}
