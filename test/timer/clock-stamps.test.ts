import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock, SystemClock } from '../../src/index.js';
import { WheelDriver } from '../../src/timer/index.js';
import { HierarchicalWheel } from '../../src/wheel/index.js';

// A burst of timers is placed against one reading of the system clock (the driver's stamp) and
// checked against a later one (src/timer/driver.ts, "Reading the clock"). These tests run on
// the real clock, with busy waits inside bursts so that stamps go stale across ticks, and check
// what must hold whatever the timing: never early, equal delays in order, cancels honoured.

/** The system clock, counting the driver's reads. */
class CountingClock extends SystemClock {
  reads = 0;
  override now(): number {
    this.reads++;
    return super.now();
  }
}

function spin(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // busy: the event loop is held, the clock moves
  }
}

/** Seeded random numbers in [0, 1), so a failure can be replayed. */
function random(seed: number): () => number {
  const values = fc.sample(fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), {
    seed,
    numRuns: 4096,
  });
  let next = 0;
  return () => values[next++ % values.length];
}

interface Fired {
  at: number;
  order: number;
}

function harness(clock: SystemClock | ManualClock) {
  const fired = new Map<number, Fired>();
  let order = 0;
  let rowToTimer = new Map<number, number>();
  const driver = new WheelDriver(new HierarchicalWheel(), { resolution: 1, clock }, (index) => {
    const timer = rowToTimer.get(index) as number;
    rowToTimer.delete(index);
    fired.set(timer, { at: clock.now(), order: order++ });
    driver.wheel.release(index);
  });
  return {
    driver,
    fired,
    add(timer: number, delayMs: number): number {
      const index = driver.add(delayMs);
      rowToTimer.set(index, timer);
      return index;
    },
    cancel(index: number): void {
      rowToTimer.delete(index);
      driver.cancel(index);
    },
    reset() {
      rowToTimer = new Map();
    },
  };
}

async function until(condition: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('timed out waiting for timers');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

const drivers: WheelDriver[] = [];
afterEach(() => {
  for (const driver of drivers.splice(0)) driver.dispose(() => {});
});

describe('timers placed against a stamp', () => {
  it('reads the clock once per burst of timers, not once per timer', async () => {
    const clock = new CountingClock();
    const h = harness(clock);
    drivers.push(h.driver);
    const before = clock.reads;
    const starts: number[] = [];
    for (let i = 0; i < 3200; i++) {
      starts.push(performance.now());
      h.add(i, 20);
    }
    const reads = clock.reads - before;
    // 3 reads to see the burst, then one per 32 timers: ~100, far from one per timer.
    expect(reads).toBeLessThan(400);
    await until(() => h.fired.size === 3200);
    for (let i = 0; i < 3200; i++) {
      const fired = h.fired.get(i) as Fired;
      expect(fired.at).toBeGreaterThanOrEqual(starts[i] + 20);
      expect(fired.order).toBe(i);
    }
  });

  it('never fires a timer early when the burst holds the event loop between schedules', async () => {
    for (const seed of [1, 2, 3]) {
      const next = random(seed);
      const clock = new CountingClock();
      const h = harness(clock);
      drivers.push(h.driver);
      const starts: number[] = [];
      const delays: number[] = [];
      let timer = 0;
      // Groups of quick schedules (a burst opens a stamp), then the loop held for up to 1.5 ms,
      // so later timers of the same stamp start in a later tick than the stamp was read in.
      for (let group = 0; group < 40; group++) {
        const size = 2 + Math.floor(next() * 10);
        for (let k = 0; k < size; k++) {
          // Few distinct delays, some of them fractional: equal delays must keep their order.
          const delay = [3, 3, 5, 2.5, 7.25][Math.floor(next() * 5)];
          starts.push(performance.now());
          delays.push(delay);
          h.add(timer++, delay);
        }
        spin(next() * 1.5);
      }
      // And held after the last of them, before the microtask that checks them can run.
      spin(2);
      await until(() => h.fired.size === timer);
      for (let i = 0; i < timer; i++) {
        const fired = h.fired.get(i) as Fired;
        expect(fired.at, `timer ${i} of seed ${seed}`).toBeGreaterThanOrEqual(
          starts[i] + delays[i],
        );
      }
      // Timers of equal delay fire in the order they were scheduled.
      for (let i = 0; i < timer; i++) {
        for (let j = i + 1; j < timer; j++) {
          if (delays[i] === delays[j]) {
            expect((h.fired.get(i) as Fired).order).toBeLessThan((h.fired.get(j) as Fired).order);
          }
        }
      }
      // The stamp was stale for some of them, and they were moved: the path was exercised.
      expect(h.driver.stampMoves, `seed ${seed}`).toBeGreaterThan(0);
    }
  });

  it('leaves a timer cancelled before the check cancelled, and its reused row on time', async () => {
    const clock = new CountingClock();
    const h = harness(clock);
    drivers.push(h.driver);
    const rows: number[] = [];
    for (let i = 0; i < 10; i++) rows.push(h.add(i, 4));
    spin(1.2);
    // Cancelled while unchecked; the row goes to the next timer, with a much longer delay.
    h.cancel(rows[5]);
    const start = performance.now();
    const reused = h.add(100, 30);
    expect(reused).toBe(rows[5]);
    spin(1.2);
    await until(() => h.fired.size === 10);
    expect(h.fired.has(5)).toBe(false);
    const late = h.fired.get(100) as Fired;
    expect(late.at).toBeGreaterThanOrEqual(start + 30);
  });

  it('reads a manual clock for every timer', () => {
    const clock = new ManualClock(0);
    let reads = 0;
    const counted = Object.assign(Object.create(clock) as ManualClock, {
      now: () => {
        reads++;
        return clock.now();
      },
    });
    const h = harness(counted);
    drivers.push(h.driver);
    const before = reads;
    for (let i = 0; i < 100; i++) h.add(i, 5);
    expect(reads - before).toBe(100);
    clock.advance(5);
    expect(h.fired.size).toBe(100);
  });
});
