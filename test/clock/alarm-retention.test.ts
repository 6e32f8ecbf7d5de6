/**
 * A clock holds a driver only while its alarm is set: a wheel (or a started HashedWheelTimer)
 * with nothing pending, dropped without close() or stop(), is garbage-collected. One with timers
 * pending stays, as Node's setTimeout keeps its callback.
 */

import { describe, expect, it } from 'vitest';
import { HashedWheelTimer, ManualClock, SystemClock, TimerWheel } from '../../src/index.js';
import { waitFor } from '../support/wait-for.js';

const gc = (globalThis as { gc?: () => void }).gc;

/** Counts the objects handed to `watch` that have been collected. */
function collector(): { watch: (value: object) => void; collected: () => number } {
  let collected = 0;
  const registry = new FinalizationRegistry<null>(() => collected++);
  return { watch: (value) => registry.register(value, null), collected: () => collected };
}

async function allCollected(count: () => number, n: number): Promise<void> {
  await waitFor(
    () => {
      gc!();
      return count() === n;
    },
    { what: `${n} dropped timers collected`, intervalMs: 50 },
  );
}

describe.runIf(gc !== undefined)('a clock and the drivers it wakes', () => {
  it('lets go of TimerWheels on the shared clock that have nothing pending', async () => {
    const { watch, collected } = collector();
    const n = 20;
    await (async () => {
      for (let i = 0; i < n; i++) {
        const wheel = new TimerWheel();
        watch(wheel);
        if (i % 2 === 0) continue; // never used
        // Used: a timer that fired and one that was cleared (the alarm was set, then cleared).
        await wheel.sleep(1);
        wheel.clearTimeout(wheel.setTimeout(() => {}, 60_000));
      }
    })();
    await allCollected(collected, n);
  });

  it('lets go of wheels on a ManualClock that is still in use', async () => {
    const clock = new ManualClock();
    const { watch, collected } = collector();
    const n = 20;
    (() => {
      for (let i = 0; i < n; i++) {
        const wheel = new TimerWheel({ clock });
        watch(wheel);
        wheel.setTimeout(() => {}, 5);
      }
      clock.advance(5);
    })();
    await allCollected(collected, n);
    // The clock still drives the wheels that are alive.
    const wheel = new TimerWheel({ clock });
    const fired: number[] = [];
    wheel.setTimeout(() => fired.push(clock.now()), 10);
    clock.advance(10);
    expect(fired).toEqual([15]);
  });

  it('lets go of started HashedWheelTimers with nothing pending, so they leave liveInstances', async () => {
    const base = HashedWheelTimer.liveInstances;
    const clock = new SystemClock();
    const { watch, collected } = collector();
    const n = 20;
    (() => {
      for (let i = 0; i < n; i++) {
        const timer = new HashedWheelTimer({ clock, tickDuration: 1 });
        watch(timer);
        timer.newTimeout(() => {}, 60_000).cancel();
      }
    })();
    expect(HashedWheelTimer.liveInstances).toBe(base + n);
    await allCollected(collected, n);
    await waitFor(() => HashedWheelTimer.liveInstances === base);
  });

  it('keeps a wheel with a timer pending until the timer has fired', async () => {
    const { watch, collected } = collector();
    let fired = false;
    (() => {
      const wheel = new TimerWheel();
      watch(wheel);
      wheel.setTimeout(() => (fired = true), 100);
    })();
    // A collected wheel would never fire its timer.
    await waitFor(
      () => {
        gc!();
        return fired;
      },
      { intervalMs: 50 },
    );
    await allCollected(collected, 1);
  });
});
