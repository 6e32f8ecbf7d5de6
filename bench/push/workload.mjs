/**
 * The messages of the push benchmark and how the runner waits for them, the same for the
 * embedded queue (queue-cell.mjs) and the served one (run.mjs, over the client).
 */

import { setTimeout as sleep } from 'node:timers/promises';
import { epochNow } from './arrivals.mjs';

/** Messages per scheduleMany call. */
export const SCHEDULE_BATCH = 1000;

/**
 * `count` messages of `topic` in batches of SCHEDULE_BATCH: the first due `startMs` from now,
 * the rest evenly over the `spreadMs` after it (0: all due at once). Payloads are small JSON,
 * `{ n, user }` (about 30 bytes), as in the queue benchmark.
 */
export function* scheduleRequests({ topic, count, startMs = 0, spreadMs = 0 }) {
  const first = Math.floor(epochNow()) + startMs;
  for (let from = 0; from < count; from += SCHEDULE_BATCH) {
    const batch = [];
    for (let n = from; n < Math.min(count, from + SCHEDULE_BATCH); n++) {
      batch.push({
        topic,
        payload: { n, user: `user-${n % 1000}` },
        deliverAt: first + Math.floor((n * spreadMs) / count),
      });
    }
    yield batch;
  }
}

/** Polls `pending()` every `pollMs` until it is 0; throws after `timeoutMs`. */
export async function untilDrained(pending, timeoutMs, pollMs) {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const left = await pending();
    if (left === 0) return;
    if (performance.now() > deadline) {
      throw new Error(`${left} messages still pending after ${timeoutMs} ms`);
    }
    await sleep(pollMs);
  }
}
