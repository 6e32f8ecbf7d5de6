/**
 * What a receiving end saw: how many deliveries arrived, how many distinct messages they were,
 * and each one's lateness (arrival minus deliverAt, ms).
 *
 * Arrival times are Unix epoch ms: performance.now() anchored to the wall clock once, where
 * Date.now() ticks to its next millisecond, so within a few microseconds of the system clock
 * in every process (the queue's own clock, src/clock, may trail it by up to a millisecond: a
 * message it delivers on time shows a lateness from 0 to 1 ms here, never below 0).
 */

import { LatenessRecorder } from '../queue/stats.mjs';

/**
 * Date.now() - performance.now() at the moment Date.now() ticks. A read made late (the process
 * was preempted between the two calls) gives a smaller offset, never a larger one: the largest
 * of a few ticks is the closest.
 */
function wallClockOffset(ticks = 10) {
  let best = -Infinity;
  for (let i = 0; i < ticks; i++) {
    const before = Date.now();
    let now = before;
    while (now === before) now = Date.now();
    best = Math.max(best, now - performance.now());
  }
  return best;
}

const offset = wallClockOffset();

/** Now, as epoch ms, on the queue's kind of clock. */
export function epochNow() {
  return offset + performance.now();
}

export class Arrivals {
  constructor() {
    this.reset();
  }

  reset() {
    this.count = 0;
    this.ids = new Set();
    this.lateness = new LatenessRecorder(1 << 15);
  }

  /** One delivery of message `id`, due at `deliverAt` (epoch ms). */
  add(id, deliverAt) {
    this.lateness.add(epochNow() - deliverAt);
    this.count++;
    this.ids.add(id);
  }

  summary() {
    return { arrivals: this.count, distinct: this.ids.size, lateness: this.lateness.summary() };
  }
}
