import { runNodeScript } from '../support/node-script.js';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { BIND_BATCH } from '../../src/timer/driver.js';
import {
  HashedWheelTimer,
  ManualClock,
  SystemClock,
  SystemTimer,
  TimerTask,
  TimerWheel,
} from '../../src/index.js';

/**
 * A timer started with a delay on a SystemClock or ManualClock does not read the clock: it waits
 * for the next reading (at most BIND_BATCH starts later, or at the end of the synchronous run),
 * and its delay counts from that reading. These tests hold the rules that make it safe: never
 * early, order kept, nothing lost, and on a ManualClock exactly the eager placement.
 */

const root = fileURLToPath(new URL('../..', import.meta.url));

describe('Timers waiting for a clock reading', () => {
  it('keep their order across batches, with cancels, refreshes and reused rows among them', () => {
    const clock = new ManualClock(0);
    const fired: number[] = [];
    const wheel = new TimerWheel<number>({ clock, onExpire: (n) => fired.push(n) });
    const count = BIND_BATCH * 3 + 7;
    const handles: number[] = [];
    for (let i = 0; i < count; i++) handles.push(wheel.schedule(10, i));
    expect(wheel.size).toBe(count);
    // Cancelled while waiting (binds everything first), then its row taken by a new timer.
    const last = handles[count - 1];
    expect(wheel.has(last)).toBe(true);
    expect(wheel.clearTimeout(last)).toBe(true);
    expect(wheel.has(last)).toBe(false);
    expect(wheel.clearTimeout(last)).toBe(false);
    const reused = wheel.schedule(10, 10_000);
    expect(wheel.has(last)).toBe(false);
    expect(wheel.has(reused)).toBe(true);
    // A refresh counts as starting again: timer 3 now comes after the others of its tick.
    expect(wheel.refresh(handles[3])).toBe(true);
    expect(wheel.size).toBe(count);
    clock.advance(9);
    expect(fired).toEqual([]);
    clock.advance(1);
    const expected = [...Array(count - 1).keys()].filter((n) => n !== 3);
    expect(fired).toEqual([...expected, 10_000, 3]);
    expect(wheel.size).toBe(0);
  });

  it('are placed at the time they were started when a ManualClock moves', () => {
    const clock = new ManualClock(100);
    const fired: Array<[string, number]> = [];
    const a = new TimerWheel({ clock });
    const b = new TimerWheel({ clock, resolution: 5 });
    // Started from a callback of wheel a, on wheel b, during the advance: b's timer is placed
    // at 110, before the clock moves on, and fires within the same advance.
    a.setTimeout(() => {
      fired.push(['a', clock.now()]);
      b.setTimeout(() => fired.push(['b', clock.now()]), 12);
    }, 10);
    expect(clock.nextDeadline()).toBe(110);
    clock.advance(100);
    expect(fired).toEqual([
      ['a', 110],
      ['b', 125],
    ]);
  });

  it('count for every face: stats, pending counts, deadlines and maxPending', () => {
    const clock = new ManualClock(0);
    const wheel = new TimerWheel({ clock, maxPending: 2 });
    const h = wheel.setTimeout(() => {}, 30);
    wheel.setTimeout(() => {}, 5);
    expect(wheel.stats()).toMatchObject({ pending: 2, scheduled: 2, nextWakeup: 5 });
    expect(wheel.deadline(h)).toBe(30);
    expect(() => wheel.setTimeout(() => {}, 1)).toThrow(
      expect.objectContaining({ code: 'ERR_TICKWHEEL_MAX_PENDING' }),
    );

    const netty = new HashedWheelTimer({ clock, tickDuration: 10 });
    const timeout = netty.newTimeout(() => {}, 50);
    expect(netty.pendingTimeouts).toBe(1);
    expect(timeout.cancel()).toBe(true);
    expect(netty.pendingTimeouts).toBe(0);
    netty.stop();

    const kafka = new SystemTimer({ clock });
    const ran: string[] = [];
    const task = new (class extends TimerTask {
      run(): void {
        ran.push('task');
      }
    })(20);
    kafka.add(task);
    expect(kafka.size).toBe(1);
    expect(kafka.levels).toBe(1);
    clock.advance(20);
    expect(ran).toEqual(['task']);
    kafka.shutdown();
    wheel.close();
  });

  it('take a delay no tick can hold as an error at the start, not later', () => {
    const wheel = new TimerWheel({ clock: new ManualClock(0), resolution: 1e-6 });
    expect(() => wheel.setTimeout(() => {}, 1e10)).toThrow(
      expect.objectContaining({ code: 'ERR_TICKWHEEL_INVALID_DELAY' }),
    );
    expect(wheel.size).toBe(0);
    wheel.close();
  });

  for (const [resolution, farMs] of [
    [1, 2 ** 41], // 1 ms ticks: the clock stands 2^53 - 2^40 ticks on
    [1e-6, 1e7], // 1 ns ticks (too fine to wait for a reading at all)
  ]) {
    it(`refuse at the start a delay too far for a wheel whose clock moved on unread (${resolution} ms ticks)`, () => {
      const clock = new ManualClock(0);
      const wheel = new TimerWheel({ clock, resolution });
      // Nothing pending: the wheel reads nothing while the clock moves near the end of its ticks.
      clock.advance(resolution === 1 ? 2 ** 53 - 2 ** 40 : 9e9);
      const fired: string[] = [];
      expect(() => wheel.setTimeout(() => fired.push('far'), farMs)).toThrow(
        expect.objectContaining({ code: 'ERR_TICKWHEEL_INVALID_DELAY' }),
      );
      const a = wheel.setTimeout(() => fired.push('a'), 5 * resolution);
      const b = wheel.setTimeout(() => fired.push('b'), 5 * resolution);
      clock.advance(10 * resolution);
      expect(wheel.clearTimeout(b)).toBe(false);
      wheel.setTimeout(() => fired.push('c'), 5 * resolution);
      clock.advance(10 * resolution);
      expect({ fired, hasA: wheel.has(a), size: wheel.size }).toEqual({
        fired: ['a', 'b', 'c'],
        hasA: false,
        size: 0,
      });
      wheel.close();
    });
  }

  it('count their delay from a reading after their start: never early, late by the rest of the run', async () => {
    const clock = new SystemClock();
    const wheel = new TimerWheel({ clock });
    const started = clock.now();
    const fired: number[] = [];
    const done = new Promise<void>((resolve) => {
      for (let i = 0; i < 3; i++) {
        wheel.setTimeout(() => {
          fired.push(clock.now());
          if (fired.length === 3) resolve();
        }, 20);
      }
    });
    // Busy for 30 ms in the same synchronous run: the timers are placed at its end.
    while (clock.now() - started < 30) {
      // spin
    }
    const runEnd = clock.now();
    expect(wheel.runDue()).toBe(0);
    await done;
    for (const at of fired) {
      expect(at).toBeGreaterThanOrEqual(runEnd + 20);
      expect(at - (runEnd + 20)).toBeLessThan(1000); // generous: a loaded machine stalls
    }
    wheel.close();
  });

  it('include a refresh: it waits for a reading as a start does, never early', async () => {
    const clock = new SystemClock();
    const wheel = new TimerWheel({ clock });
    let firedAt = 0;
    let runEnd = 0;
    let handle = 0;
    await new Promise<void>((resolve) => {
      handle = wheel.setTimeout(() => {
        firedAt = clock.now();
        resolve();
      }, 50);
      setTimeout(() => {
        const refreshed = clock.now();
        expect(wheel.refresh(handle, 20)).toBe(true);
        while (clock.now() - refreshed < 30) {
          // spin: the refresh is placed at the end of this run
        }
        runEnd = clock.now();
      }, 10);
    });
    expect(runEnd).toBeGreaterThan(0);
    expect(firedAt).toBeGreaterThanOrEqual(runEnd + 20);
    expect(wheel.has(handle)).toBe(false);
    wheel.close();
  });

  describe('with fake timers', () => {
    afterEach(() => {
      vi.useRealTimers();
    });

    it('are placed when only queueMicrotask is faked', async () => {
      const realSetTimeout = globalThis.setTimeout;
      vi.useFakeTimers({ toFake: ['queueMicrotask'] });
      const wheel = new TimerWheel({ clock: new SystemClock() });
      let fired = false;
      wheel.setTimeout(() => {
        fired = true;
      }, 10);
      await new Promise((resolve) => realSetTimeout(resolve, 200));
      expect({ fired, size: wheel.size }).toEqual({ fired: true, size: 0 });
      wheel.close();
    });
  });

  it('fire in a plain node process: none early, none lost, and the process exits', async () => {
    const script = `
      import { TimerWheel } from ${JSON.stringify(root + 'dist/index.js')};
      const n = 5000;
      let fired = 0, early = 0, maxLate = 0;
      const wheel = new TimerWheel({ onExpire: (started) => {
        const late = performance.now() - (started + 25);
        if (late < 0) early++;
        if (late > maxLate) maxLate = late;
        fired++;
      } });
      for (let i = 0; i < n; i++) {
        const started = performance.now();
        wheel.schedule(25, started);
        if (i % 1000 === 0) { const t = performance.now(); while (performance.now() - t < 3); }
      }
      const h = wheel.schedule(25, 0);
      wheel.clearTimeout(h);
      process.on('exit', () => console.log(JSON.stringify({ fired, early, maxLate, size: wheel.size })));
    `;
    const { status, out, stderr } = await runNodeScript(script);
    expect(status, stderr).toBe(0);
    const result = JSON.parse(out) as {
      fired: number;
      early: number;
      maxLate: number;
      size: number;
    };
    expect(result).toMatchObject({ fired: 5000, early: 0, size: 0 });
    expect(result.maxLate).toBeLessThan(2000);
  });
});
