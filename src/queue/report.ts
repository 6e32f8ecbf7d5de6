/**
 * QueueReport: the backend tells it each happening, and it counts it, measures lateness and
 * emits its event, the same on every backend (docs/http-api.md, "Stats"). Lateness counts from
 * the due time, or the hand-in time if later (`lateFrom`, usually empty).
 */

import type { DeliveryLateness, FireLateness, QueueCounters } from '../protocol/model.js';
import { QueueEvents, type EventSource } from './events.js';
import { deadSpan } from './tracing.js';
import { warnFault, type FaultReporter } from './faults.js';

export type { QueueCounters } from '../protocol/model.js';

/** Upper bounds (ms) of the first-delivery lateness buckets stats() reports. */
const DELIVERY_LATENESS_BUCKETS_MS = [1, 5, 10, 25, 50, 100, 250, 500, 1000, 5000, 30_000, 300_000];
const LATENESS_SAMPLES = 4096;

const FIRE_SUM = 0;
const DELIVERY_SUM = 1;

export class QueueReport {
  readonly events: QueueEvents;
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
   * The sums of fire and first-delivery lateness, in a typed array: a field that starts at 0 and
   * takes a fraction later changes representation, and V8 deoptimises (mid first burst).
   */
  private readonly sums = new Float64Array(2);
  private readonly lateFrom = new Map<string, number>();
  /** First deliveries per DELIVERY_LATENESS_BUCKETS_MS bucket (not cumulative), then the rest. */
  private readonly deliveryLateness = new Float64Array(DELIVERY_LATENESS_BUCKETS_MS.length + 1);

  /** Lateness counts from no earlier than this (see recoveredAfter). */
  private floor = -Infinity;

  constructor(now: () => number, onFault: FaultReporter = warnFault) {
    this.events = new QueueEvents(now, onFault);
  }

  /** Data last written at `lastWrite`: a message overdue then counts from then (no hand-in time). */
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

  fired(message: Pick<EventSource, 'id' | 'deliverAt'>, now: number): void {
    this.counters.fired++;
    // `now` may be a reading shared by the fires of one run (near.ts, fireTime), taken before a
    // message of that run was handed in: never a negative lateness.
    const late = Math.max(0, now - this.dueFrom(message));
    this.lateness[this.latenessCount++ % LATENESS_SAMPLES] = late;
    this.sums[FIRE_SUM] += late;
  }

  /** `count` messages came due at once (a backend that fires in bulk: no lateness of each). */
  firedMany(count: number): void {
    this.counters.fired += count;
  }

  /**
   * Messages handed to a consumer at `now`: `n` of them (all when undefined). A run of first
   * deliveries due at the same time (a burst) has one lateness, found once and counted once.
   */
  delivered(messages: readonly EventSource[], now: number, n = messages.length): void {
    this.counters.delivered += n;
    let runAt = Number.NaN;
    let run = 0;
    for (let i = 0; i < n; i++) {
      const message = messages[i];
      if (message.attempts !== 1) continue;
      if (message.deliverAt === runAt) {
        run++;
        continue;
      }
      if (run > 0) this.deliveredFirst(runAt, now, run);
      if (this.lateFrom.size === 0) {
        runAt = message.deliverAt;
        run = 1;
        continue;
      }
      // Handed in after its due time, maybe: counted alone, from its hand-in time.
      this.deliveredFirst(this.dueFrom(message), now, 1);
      this.forgetLate(message.id);
      runAt = Number.NaN;
      run = 0;
    }
    if (run > 0) this.deliveredFirst(runAt, now, run);
    if (this.events.active)
      for (let i = 0; i < n; i++) this.events.record('delivered', messages[i]);
  }

  scheduled(message: EventSource): void {
    this.counters.scheduled++;
    this.events.record('scheduled', message);
  }

  /** scheduled(), the event made only while someone listens. */
  scheduledAs(message: () => EventSource): void {
    this.counters.scheduled++;
    if (this.events.active) this.events.record('scheduled', message());
  }

  /** A schedule whose id was pending already: nothing written, no event. */
  deduplicated(): void {
    this.counters.deduplicated++;
  }

  cancelled(message: EventSource): void {
    this.counters.cancelled++;
    this.events.record('cancelled', message);
  }

  rescheduled(): void {
    this.counters.rescheduled++;
  }

  /**
   * A delivery was acknowledged; its event once `durable` resolves, if given. Here and below, a
   * message undefined (known by its receipt only) is counted, with no event.
   */
  acked(message: EventSource | undefined, durable?: Promise<unknown>): void {
    this.counters.acked++;
    if (message === undefined || !this.events.active) return;
    if (durable === undefined) {
      this.events.record('acked', message);
      return;
    }
    const { id, topic, deliverAt, attempts } = message;
    durable.then(
      () => this.events.record('acked', { id, topic, deliverAt, attempts }),
      () => {},
    );
  }

  /** A delivery was given back by its consumer; what became of it is told by failed() or dead(). */
  nacked(): void {
    this.counters.nacked++;
  }

  /** A delivery's visibility ran out; what became of it is told by failed() or dead(). */
  expired(): void {
    this.counters.expired++;
  }

  failed(message: EventSource | undefined, reason: string | undefined): void {
    if (message !== undefined) this.events.record('failed', message, reason);
  }

  dead(message: EventSource | undefined, reason: string | undefined): void {
    this.counters.dead++;
    if (message === undefined) return;
    this.events.record('dead', message, reason);
    if (message.trace !== undefined) deadSpan(message.topic, message, reason);
  }

  /** `count` first deliveries at `now` of messages that could have been delivered from `due`. */
  private deliveredFirst(due: number, now: number, count: number): void {
    const late = Math.max(0, now - (due > this.floor ? due : this.floor));
    let bucket = 0;
    while (
      bucket < DELIVERY_LATENESS_BUCKETS_MS.length &&
      late > DELIVERY_LATENESS_BUCKETS_MS[bucket]
    ) {
      bucket++;
    }
    this.deliveryLateness[bucket] += count;
    this.sums[DELIVERY_SUM] += late * count;
  }

  /** When a message could first have been delivered: its due time, unless handed in later. */
  private dueFrom(message: Pick<EventSource, 'id' | 'deliverAt'>): number {
    const due = message.deliverAt > this.floor ? message.deliverAt : this.floor;
    if (this.lateFrom.size === 0) return due;
    return Math.max(due, this.lateFrom.get(message.id) ?? 0);
  }

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
