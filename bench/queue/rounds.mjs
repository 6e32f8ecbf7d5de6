/**
 * Bursts due in the same millisecond, one after another in one process: how the first burst of
 * a process compares with the later ones (bench:queue runs each cell in a fresh process, so it
 * sees only the first). Embedded queue on a file store (fsync 'batch'), consume() in the same
 * process, a 30k warm-up spread over half a second as bench:queue's.
 *
 *   node --expose-gc bench/queue/rounds.mjs [n=100000] [rounds=6] [concurrency=1000] [mode=consume]
 *
 * Modes, how the burst is taken:
 * - consume: consume() with a synchronous handler (lateness from due to the handler);
 * - receive: a pull consumer, receive({ max: concurrency }) in a loop, acking each message as
 *   it goes without waiting for the acks (lateness from due to receive() returning);
 * - receive-only: the same, with every ack left until the whole burst was received: the
 *   queue's delivery path alone (fire, take, delivery objects), with no ack work beside it.
 *
 * TICKWHEEL_BENCH_DIST=<dist folder> runs another build. Prints one JSON line a burst (lateness,
 * ms; how many were early; GC pauses during the burst) and a last line with the medians.
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PerformanceObserver } from 'node:perf_hooks';
import { URL, fileURLToPath } from 'node:url';

const dist =
  process.env.TICKWHEEL_BENCH_DIST ?? fileURLToPath(new URL('../../dist', import.meta.url));
const { DelayQueue } = await import(join(dist, 'delay-queue.js'));
const { SystemClock } = await import(join(dist, 'index.js'));
const n = Number(process.argv[2] ?? 100_000);
const rounds = Number(process.argv[3] ?? 6);
const concurrency = Number(process.argv[4] ?? 1000);
const mode = process.argv[5] ?? 'consume';
if (!['consume', 'receive', 'receive-only'].includes(mode)) {
  throw new Error(`mode must be consume, receive or receive-only, got ${mode}`);
}
// The queue's own clock, read by the bench too: lateness on the clock that fires.
const clock = new SystemClock({ epoch: true });
const now = () => clock.now();

const dir = mkdtempSync(join(tmpdir(), 'tickwheel-rounds-'));
const queue = await DelayQueue.open({ dir, fsync: 'batch', clock });
let pauses = [];
const observer = new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) pauses.push([entry.startTime, entry.duration]);
});
observer.observe({ entryTypes: ['gc'] });

/** Schedules `count` messages in batches of 1,000 over 4 lanes, due at dueOf(i). */
async function scheduleAll(count, dueOf, offset) {
  let next = 0;
  const lane = async () => {
    while (next < count) {
      const start = next;
      const size = Math.min(1000, count - start);
      next += size;
      const requests = new Array(size);
      for (let i = 0; i < size; i++) {
        const k = offset + start + i;
        const due = dueOf(start + i);
        requests[i] = { topic: 'bench', payload: { n: k, user: `user-${k}`, due }, deliverAt: due };
      }
      await queue.scheduleMany(requests);
    }
  };
  await Promise.all([lane(), lane(), lane(), lane()]);
}

/** Delivers `count` messages scheduled by `schedule`; resolves with their lateness, sorted. */
async function burst(count, schedule, how = mode) {
  const lateness = new Float64Array(count);
  if (how === 'consume') {
    let delivered = 0;
    let done;
    const all = new Promise((resolve) => (done = resolve));
    const consumer = queue.consume(
      'bench',
      (message) => {
        lateness[delivered] = now() - message.payload.due;
        if (++delivered === count) done();
      },
      { concurrency },
    );
    await schedule();
    await all;
    await consumer.close();
    return lateness.sort();
  }
  // A pull consumer: one loop of receive() calls, waiting (long poll) while nothing is ready.
  let received = 0;
  const acks = [];
  const receipts = [];
  const pull = async () => {
    while (received < count) {
      const batch = await queue.receive('bench', { max: concurrency, waitMs: 60_000 });
      const t = now();
      for (let i = 0; i < batch.length; i++) {
        lateness[received++] = t - batch[i].payload.due;
        if (how === 'receive') acks.push(queue.ack(batch[i].receipt));
        else receipts.push(batch[i].receipt);
      }
    }
  };
  const pulling = pull();
  await schedule();
  await pulling;
  for (const receipt of receipts) acks.push(queue.ack(receipt));
  const results = await Promise.all(acks);
  if (results.some((acked) => acked !== true)) throw new Error('an ack found no delivery');
  return lateness.sort();
}

const warmAt = Math.ceil(now()) + 300;
await burst(30_000, () => scheduleAll(30_000, (i) => warmAt + (i % 500), 1e9));

const results = [];
for (let round = 0; round < rounds; round++) {
  const due = Math.ceil(now()) + 3000 + n * 0.04;
  let scheduled = 0;
  const lateness = await burst(n, async () => {
    await scheduleAll(n, () => due, 0);
    scheduled = now();
    pauses = [];
  });
  const dueAt = due - (clock.now() - performance.now());
  const end = dueAt + lateness[n - 1];
  const during = pauses.filter(([at]) => at >= dueAt - 1 && at <= end);
  let early = 0;
  while (early < n && lateness[early] < 0) early++;
  const result = {
    round: round + 1,
    marginMs: Math.round(due - scheduled),
    // Delivered before their due time (never, if the queue keeps its word).
    early,
    p0: +lateness[0].toFixed(1),
    p50: +lateness[n >> 1].toFixed(1),
    p99: +lateness[Math.floor(n * 0.99)].toFixed(1),
    max: +lateness[n - 1].toFixed(1),
    gcMs: +during.reduce((sum, [, ms]) => sum + ms, 0).toFixed(1),
    gcPauses: during.length,
  };
  results.push(result);
  process.stdout.write(`${JSON.stringify(result)}\n`);
}
observer.disconnect();
const later = results.slice(1).map((r) => r.p99);
const median = (values) => [...values].sort((a, b) => a - b)[(values.length - 1) >> 1];
process.stdout.write(
  `${JSON.stringify({ n, concurrency, mode, firstP99: results[0].p99, laterP99Median: later.length > 0 ? median(later) : null })}\n`,
);
await queue.close();
rmSync(dir, { recursive: true, force: true });
