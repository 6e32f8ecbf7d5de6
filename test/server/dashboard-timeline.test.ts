/**
 * The dashboard's "Upcoming deliveries" timeline is exact at every moment: sampled across whole
 * minutes on a ManualClock, each bucket of GET /v1/dashboard holds exactly the scheduled
 * messages due in the range it states (fromMs, untilMs), and those ranges are the ones its label
 * names: exactly for edges within the in-memory horizon; past it, the whole minute at or before
 * the edge (what is on disk is counted by the minute), or the horizon if that is later.
 */

import { afterEach, describe, expect, it, vi } from 'vitest';
import { ManualClock } from '../../src/index.js';
import { DelayQueue, MemoryStore, type DelayQueueOpenOptions } from '../../src/delay-queue.js';
import { createServer } from '../../src/server/index.js';
import { T0, advance } from '../queue/harness.js';
import { injector } from './harness.js';
import { useTempDirs } from '../support/temp-dir.js';

const tempDir = useTempDirs('timeline');

const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
/** Label -> the edge it ends at. */
const NOMINAL: Record<string, number | null> = {
  '< 1 s': SECOND,
  '1-10 s': 10 * SECOND,
  '10-60 s': MINUTE,
  '1-60 min': HOUR,
  '1-24 h': DAY,
  '> 1 day': null,
};
/** How long the samples span: more than two whole minutes, with horizon loads between. */
const SPAN_MS = 150 * SECOND;
/** Time between samples: not a divisor of a minute, so they fall at many offsets in it. */
const SAMPLE_EVERY_MS = 3_700;

interface Bucket {
  label: string;
  fromMs: number;
  untilMs: number | null;
  count: number;
}

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  vi.restoreAllMocks();
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

/**
 * Due times (ms after T0), none on a sampled instant (those are multiples of 100 ms): the 55
 * messages due 14-84 min ahead that once showed under "10-60 s", some due in 100 min, and
 * messages every few seconds around each edge, for as long as the samples move the edges.
 */
function dueOffsets(): number[] {
  const offsets: number[] = [];
  for (let i = 0; i < 55; i++) offsets.push(14 * MINUTE + Math.round((i * 70 * MINUTE) / 54) + 37);
  for (let i = 0; i < 5; i++) offsets.push(100 * MINUTE + i * 7_001);
  const around = (edge: number, every: number) => {
    for (let at = edge - 30 * SECOND; at < edge + SPAN_MS + 30 * SECOND; at += every) {
      if (at > 0) offsets.push(at + 53);
    }
  };
  around(0, 700);
  around(HOUR, 1_300);
  around(DAY, 2_100);
  offsets.push(3 * DAY + 11, 400 * DAY + 13);
  return offsets;
}

async function openTimeline(store: 'memory' | 'file'): Promise<{
  clock: ManualClock;
  queue: DelayQueue;
  timeline: () => Promise<{ buckets: Bucket[]; loadedUntil: number }>;
}> {
  const clock = new ManualClock(T0);
  // The snapshot is cached for a second of performance.now(): that second is the clock's here.
  vi.spyOn(performance, 'now').mockImplementation(() => clock.now() - T0);
  // The horizon and windows `tickwheel serve` runs with.
  const options: DelayQueueOpenOptions = { clock, horizonMs: MINUTE };
  let dir: string | undefined;
  if (store === 'file') {
    dir = tempDir();
    Object.assign(options, { dir, fsync: 'never', windowMs: MINUTE });
  } else options.store = new MemoryStore();
  const queue = await DelayQueue.open(options);
  const server = await createServer({ queue, logLevel: 'silent' });
  cleanups.push(async () => {
    await server.close();
    await queue.close();
  });
  const call = injector(server);
  return {
    clock,
    queue,
    timeline: async () => {
      const answer = await call('GET', '/v1/dashboard');
      expect(answer.status).toBe(200);
      return {
        buckets: answer.body.upcoming as Bucket[],
        loadedUntil: answer.body.totals.loadedUntil as number,
      };
    },
  };
}

/**
 * Checks a timeline against the due times still scheduled at `now`, with the queue's in-memory
 * horizon at `loadedUntil`.
 */
function expectExact(
  buckets: Bucket[],
  due: readonly number[],
  now: number,
  loadedUntil: number,
): void {
  expect(buckets.map((b) => b.label)).toEqual(Object.keys(NOMINAL));
  for (const bucket of buckets) {
    const nominal = NOMINAL[bucket.label];
    const where = `${bucket.label} at ${now - T0} ms`;
    if (nominal === null) expect(bucket.untilMs, where).toBeNull();
    else if (now + nominal <= loadedUntil) {
      // Within the in-memory horizon: the edge as labelled.
      expect(bucket.untilMs, where).toBe(nominal);
    } else {
      // Past it: the whole minute at or before the labelled edge, or the horizon if later.
      const until = bucket.untilMs as number;
      expect(until, where).toBeLessThanOrEqual(nominal);
      expect(until, where).toBeGreaterThan(Math.min(nominal - MINUTE, loadedUntil - now - 1));
      if (now + until !== loadedUntil) expect((now + until) % MINUTE, where).toBe(0);
    }
    const inRange = due.filter(
      (at) =>
        at > now &&
        at - now >= bucket.fromMs &&
        (bucket.untilMs === null || at - now < bucket.untilMs),
    );
    expect(bucket.count, where).toBe(inRange.length);
  }
}

describe.each(['memory', 'file'] as const)('the upcoming timeline on the %s store', (store) => {
  it('holds exactly what is due in each bucket, sampled across whole minutes', async () => {
    const { clock, queue, timeline } = await openTimeline(store);
    // Start off a whole minute, so that the edges past the horizon move during the samples.
    await advance(clock, 7_300, 100, queue);
    const due = dueOffsets().map((offset) => T0 + offset + 7_300);
    await queue.scheduleMany(
      due.map((deliverAt, i) => ({ topic: `t${i % 3}`, payload: i, deliverAt })),
    );
    let samples = 0;
    for (let elapsed = 0; elapsed <= SPAN_MS; elapsed += SAMPLE_EVERY_MS) {
      const { buckets, loadedUntil } = await timeline();
      expectExact(buckets, due, clock.now(), loadedUntil);
      samples++;
      await advance(clock, SAMPLE_EVERY_MS, 100, queue);
    }
    expect(samples).toBeGreaterThan(40);
  });

  it('places messages due in 100 min under 1-24 h and 14-84 min ahead under 1-60 min', async () => {
    const { clock, queue, timeline } = await openTimeline(store);
    await advance(clock, 12_345, 100, queue);
    const now = clock.now();
    // 14 min to 84 min ahead now; 14 s later, the first 36 are due within the hour.
    const due = [
      ...Array.from({ length: 55 }, (_, i) => now + 14 * MINUTE + i * 78_000 + 500),
      now + 100 * MINUTE,
    ];
    await queue.scheduleMany(due.map((deliverAt, i) => ({ topic: 't', payload: i, deliverAt })));
    // Just before a horizon load (every 15 s), when the loaded horizon is least ahead of now.
    await advance(clock, 14_000, 100, queue);
    const counts = Object.fromEntries((await timeline()).buckets.map((b) => [b.label, b.count]));
    expect(counts).toEqual({
      '< 1 s': 0,
      '1-10 s': 0,
      '10-60 s': 0,
      '1-60 min': 36,
      '1-24 h': 20,
      '> 1 day': 0,
    });
  });
});

describe('the minute counts of the file store', () => {
  it('survive a restart, from the snapshot or the log', async () => {
    const dir = tempDir('timeline-restart');
    const clock = new ManualClock(T0 + 20_000);
    const options = { dir, clock, fsync: 'never' as const, horizonMs: MINUTE, windowMs: MINUTE };
    const due = [HOUR - 30_000, HOUR + 30_000, DAY - 10_000, DAY + 10_000].map(
      (offset) => T0 + 20_000 + offset,
    );
    const edges = [MINUTE, HOUR, DAY];
    let queue = await DelayQueue.open(options);
    await queue.scheduleMany(due.map((deliverAt, i) => ({ topic: 't', payload: i, deliverAt })));
    const before = await queue.dueTimeline(edges);
    // 10 s before the day's edge is after the whole minute it is taken at (20 s before it).
    expect(before).toEqual({
      edgesMs: [MINUTE, HOUR - 20_000, DAY - 20_000],
      counts: [0, 1, 1, 2],
    });
    await queue.close();
    queue = await DelayQueue.open(options);
    expect(queue.recovery?.snapshot).toBe('used');
    expect(await queue.dueTimeline(edges)).toEqual(before);
    await queue.close();
  });
});
