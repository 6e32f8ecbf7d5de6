import { afterEach, describe, expect, it } from 'vitest';
import {
  HashedWheelTimer,
  ManualClock,
  SystemClock,
  type HashedWheelTimerOptions,
  type Timeout,
} from '../../src/index.js';

/** Timers made by a test, stopped after it so the live-instance count stays honest. */
const made: HashedWheelTimer[] = [];

function timer(options: HashedWheelTimerOptions = {}): HashedWheelTimer {
  const t = new HashedWheelTimer(options);
  made.push(t);
  return t;
}

afterEach(() => {
  for (const t of made.splice(0)) t.stop();
});

function codeOf(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return { name: (err as Error).name, code: (err as { code?: unknown }).code };
  }
  return 'did not throw';
}

describe('HashedWheelTimer options', () => {
  it('defaults to a 100 ms tick and 512 slots', () => {
    const t = timer({ clock: new ManualClock() });
    expect(t.tickDuration).toBe(100);
    expect(t.ticksPerWheel).toBe(512);
  });

  it('rounds ticksPerWheel up to a power of two', () => {
    const clock = new ManualClock();
    expect(timer({ clock, ticksPerWheel: 500 }).ticksPerWheel).toBe(512);
    expect(timer({ clock, ticksPerWheel: 513 }).ticksPerWheel).toBe(1024);
    expect(timer({ clock, ticksPerWheel: 64 }).ticksPerWheel).toBe(64);
    expect(timer({ clock, ticksPerWheel: 1 }).ticksPerWheel).toBe(1);
  });

  it('refuses bad options with ERR_TICKWHEEL_INVALID_OPTION', () => {
    const invalid = { name: 'TickwheelRangeError', code: 'ERR_TICKWHEEL_INVALID_OPTION' };
    expect(codeOf(() => new HashedWheelTimer({ tickDuration: 0 }))).toEqual(invalid);
    expect(codeOf(() => new HashedWheelTimer({ tickDuration: NaN }))).toEqual(invalid);
    expect(codeOf(() => new HashedWheelTimer({ ticksPerWheel: 0 }))).toEqual(invalid);
    expect(codeOf(() => new HashedWheelTimer({ ticksPerWheel: 2 ** 30 + 1 }))).toEqual(invalid);
    expect(codeOf(() => new HashedWheelTimer({ maxPendingTimeouts: 1.5 }))).toEqual(invalid);
    expect(codeOf(() => new HashedWheelTimer({ clock: {} as ManualClock }))).toEqual({
      name: 'TickwheelTypeError',
      code: 'ERR_TICKWHEEL_INVALID_OPTION',
    });
  });
});

describe('HashedWheelTimer timing', () => {
  it('never fires a timeout before its deadline, and fires it on the first tick boundary at or after it', () => {
    const clock = new ManualClock();
    const t = timer({ clock, tickDuration: 100 });
    const fired: Array<[number, number]> = [];
    for (const delay of [0, 1, 99, 100, 101, 250, 1000]) {
      t.newTimeout(() => fired.push([delay, clock.now()]), delay);
    }
    clock.advance(99);
    expect(fired).toEqual([]);
    clock.advance(2000);
    expect(fired).toEqual([
      [0, 100],
      [1, 100],
      [99, 100],
      [100, 100],
      [101, 200],
      [250, 300],
      [1000, 1000],
    ]);
    expect(t.pendingTimeouts).toBe(0);
  });

  it('counts ticks from when it starts, lazily on the first newTimeout', () => {
    const clock = new ManualClock();
    const t = timer({ clock, tickDuration: 100 });
    clock.advance(30);
    let firedAt = -1;
    t.newTimeout(() => (firedAt = clock.now()), 100);
    clock.advance(1000);
    expect(firedAt).toBe(130);
  });

  it('fires timeouts more than one revolution away in their own round', () => {
    const clock = new ManualClock();
    const t = timer({ clock, tickDuration: 10, ticksPerWheel: 8 });
    const fired: number[] = [];
    for (const delay of [30, 110, 190, 830]) t.newTimeout(() => fired.push(clock.now()), delay);
    clock.advance(1000);
    expect(fired).toEqual([30, 110, 190, 830]);
  });

  it('fires timeouts due in the same tick in the order they were made', () => {
    const clock = new ManualClock();
    const t = timer({ clock, tickDuration: 10 });
    const order: string[] = [];
    t.newTimeout(() => order.push('a'), 15);
    t.newTimeout(() => order.push('b'), 11);
    t.newTimeout(() => order.push('c'), 20);
    clock.advance(20);
    expect(order).toEqual(['a', 'b', 'c']);
  });

  it('treats a negative delay as 0: the next tick', () => {
    const clock = new ManualClock();
    const t = timer({ clock, tickDuration: 10 });
    let firedAt = -1;
    t.newTimeout(() => (firedAt = clock.now()), -50);
    clock.advance(100);
    expect(firedAt).toBe(10);
  });

  it('fires a timeout scheduled by a task no earlier than the next tick', () => {
    const clock = new ManualClock();
    const t = timer({ clock, tickDuration: 10 });
    const fired: number[] = [];
    t.newTimeout(() => {
      fired.push(clock.now());
      t.newTimeout(() => fired.push(clock.now()), 0);
    }, 10);
    clock.advance(100);
    expect(fired).toEqual([10, 20]);
  });

  it('runs by itself on a SystemClock: 100 timeouts, none early, all within 2 s', async () => {
    const t = timer({ clock: new SystemClock(), tickDuration: 10 });
    const early: number[] = [];
    const lateness: number[] = [];
    await new Promise<void>((resolve, reject) => {
      const guard = setTimeout(() => reject(new Error(`only ${lateness.length} fired`)), 2000);
      for (let i = 0; i < 100; i++) {
        const delay = (i * 7) % 300;
        const deadline = performance.now() + delay;
        t.newTimeout(() => {
          const now = performance.now();
          if (now < deadline) early.push(deadline - now);
          lateness.push(now - deadline);
          if (lateness.length === 100) {
            clearTimeout(guard);
            resolve();
          }
        }, delay);
      }
    });
    expect(early).toEqual([]);
    expect(Math.max(...lateness)).toBeLessThan(1000);
  });
});

describe('HashedWheelTimer tasks and timeouts', () => {
  it('runs a function task with its Timeout, and an object task through run(timeout)', () => {
    const clock = new ManualClock();
    const t = timer({ clock, tickDuration: 10 });
    const seen: Timeout[] = [];
    const fn = (timeout: Timeout) => seen.push(timeout);
    const object = {
      runs: 0,
      run(timeout: Timeout) {
        this.runs++;
        seen.push(timeout);
      },
    };
    const a = t.newTimeout(fn, 10);
    const b = t.newTimeout(object, 10);
    expect(a.timer).toBe(t);
    expect(a.task).toBe(fn);
    expect(b.task).toBe(object);
    clock.advance(10);
    expect(seen).toEqual([a, b]);
    expect(object.runs).toBe(1);
  });

  it('marks a timeout expired before its task runs', () => {
    const clock = new ManualClock();
    const t = timer({ clock, tickDuration: 10 });
    let expiredInside = false;
    const timeout = t.newTimeout((self) => (expiredInside = self.isExpired()), 10);
    expect(timeout.isExpired()).toBe(false);
    clock.advance(10);
    expect(expiredInside).toBe(true);
    expect(timeout.isExpired()).toBe(true);
    expect(timeout.isCancelled()).toBe(false);
  });

  it('cancels a pending timeout once: cancel() is true, then false, and the task never runs', () => {
    const clock = new ManualClock();
    const t = timer({ clock, tickDuration: 10 });
    let ran = false;
    const timeout = t.newTimeout(() => (ran = true), 50);
    expect(t.pendingTimeouts).toBe(1);
    expect(timeout.cancel()).toBe(true);
    expect(timeout.isCancelled()).toBe(true);
    expect(timeout.isExpired()).toBe(false);
    expect(t.pendingTimeouts).toBe(0);
    expect(timeout.cancel()).toBe(false);
    clock.advance(100);
    expect(ran).toBe(false);
  });

  it('refuses to cancel a timeout that has expired', () => {
    const clock = new ManualClock();
    const t = timer({ clock, tickDuration: 10 });
    const timeout = t.newTimeout(() => {}, 10);
    clock.advance(10);
    expect(timeout.cancel()).toBe(false);
    expect(timeout.isCancelled()).toBe(false);
  });

  it('lets a task cancel another timeout due in the same tick', () => {
    const clock = new ManualClock();
    const t = timer({ clock, tickDuration: 10 });
    const ran: string[] = [];
    t.newTimeout(() => {
      ran.push('first');
      expect(second.cancel()).toBe(true);
    }, 10);
    const second = t.newTimeout(() => ran.push('second'), 10);
    clock.advance(50);
    expect(ran).toEqual(['first']);
  });

  it('keeps a stale Timeout from cancelling the timeout that reused its row', () => {
    const clock = new ManualClock();
    const t = timer({ clock, tickDuration: 10 });
    const old = t.newTimeout(() => {}, 10);
    clock.advance(10);
    let ran = false;
    t.newTimeout(() => (ran = true), 10);
    expect(old.cancel()).toBe(false);
    clock.advance(10);
    expect(ran).toBe(true);
  });

  it('hands expired tasks to the executor when one is given', () => {
    const clock = new ManualClock();
    const queue: Array<() => void> = [];
    const t = timer({ clock, tickDuration: 10, executor: (run) => queue.push(run) });
    let ran = 0;
    const timeout = t.newTimeout(() => ran++, 10);
    clock.advance(10);
    expect(queue).toHaveLength(1);
    expect(ran).toBe(0);
    expect(timeout.isExpired()).toBe(true);
    expect(t.pendingTimeouts).toBe(0);
    queue[0]();
    expect(ran).toBe(1);
  });

  it('runs tasks through setImmediate as an executor', async () => {
    const clock = new ManualClock();
    const t = timer({ clock, tickDuration: 10, executor: setImmediate });
    let ran = false;
    t.newTimeout(() => (ran = true), 10);
    clock.advance(10);
    expect(ran).toBe(false);
    await new Promise((resolve) => setImmediate(resolve));
    expect(ran).toBe(true);
  });

  it('sends errors thrown by tasks to onError and still runs the others', () => {
    const clock = new ManualClock();
    const errors: unknown[] = [];
    const t = timer({ clock, tickDuration: 10, onError: (err) => errors.push(err) });
    const ran: number[] = [];
    const boom = new Error('boom');
    t.newTimeout(() => ran.push(1), 10);
    t.newTimeout(() => {
      throw boom;
    }, 10);
    t.newTimeout(() => ran.push(3), 10);
    t.newTimeout(() => ran.push(4), 20);
    clock.advance(20);
    expect(errors).toEqual([boom]);
    expect(ran).toEqual([1, 3, 4]);
  });

  it('sends errors thrown by tasks run on the executor to onError too', () => {
    const clock = new ManualClock();
    const errors: unknown[] = [];
    const queue: Array<() => void> = [];
    const t = timer({
      clock,
      tickDuration: 10,
      executor: (run) => queue.push(run),
      onError: (err) => errors.push(err),
    });
    t.newTimeout(() => {
      throw new Error('later');
    }, 10);
    clock.advance(10);
    expect(() => queue[0]()).not.toThrow();
    expect(errors).toHaveLength(1);
    expect((errors[0] as Error).message).toBe('later');
  });
});

describe('HashedWheelTimer limits and stopping', () => {
  it('refuses timeouts beyond maxPendingTimeouts with ERR_TICKWHEEL_MAX_PENDING', () => {
    const clock = new ManualClock();
    const t = timer({ clock, tickDuration: 10, maxPendingTimeouts: 2 });
    const first = t.newTimeout(() => {}, 10);
    t.newTimeout(() => {}, 10);
    expect(codeOf(() => t.newTimeout(() => {}, 10))).toEqual({
      name: 'TickwheelRangeError',
      code: 'ERR_TICKWHEEL_MAX_PENDING',
    });
    first.cancel();
    t.newTimeout(() => {}, 10);
    expect(t.pendingTimeouts).toBe(2);
    clock.advance(10);
    t.newTimeout(() => {}, 10);
    expect(t.pendingTimeouts).toBe(1);
  });

  it('treats maxPendingTimeouts <= 0 as unlimited', () => {
    const t = timer({ clock: new ManualClock(), maxPendingTimeouts: 0 });
    for (let i = 0; i < 5000; i++) t.newTimeout(() => {}, i);
    expect(t.pendingTimeouts).toBe(5000);
  });

  it('stop() returns the timeouts that neither ran nor were cancelled, and none of them ever runs', () => {
    const clock = new ManualClock();
    const t = timer({ clock, tickDuration: 10 });
    let ran = 0;
    t.newTimeout(() => ran++, 10);
    clock.advance(10);
    const cancelled = t.newTimeout(() => ran++, 20);
    cancelled.cancel();
    const a = t.newTimeout(() => ran++, 20);
    const b = t.newTimeout(() => ran++, 5000);
    const unprocessed = t.stop();
    expect(new Set(unprocessed)).toEqual(new Set([a, b]));
    expect(unprocessed).toHaveLength(2);
    for (const timeout of unprocessed) {
      expect(timeout.isExpired()).toBe(false);
      expect(timeout.isCancelled()).toBe(false);
    }
    expect(t.pendingTimeouts).toBe(0);
    clock.advance(10_000);
    expect(ran).toBe(1);
  });

  it('refuses newTimeout and start after stop() with ERR_TICKWHEEL_TIMER_STOPPED', () => {
    const t = timer({ clock: new ManualClock() });
    t.start();
    t.stop();
    const stopped = { name: 'TickwheelStateError', code: 'ERR_TICKWHEEL_TIMER_STOPPED' };
    expect(codeOf(() => t.newTimeout(() => {}, 10))).toEqual(stopped);
    expect(codeOf(() => t.start())).toEqual(stopped);
    expect(t.stop()).toEqual([]);
  });

  it('can be stopped before it ever started', () => {
    const t = timer({ clock: new ManualClock() });
    expect(t.pendingTimeouts).toBe(0);
    expect(t.stop()).toEqual([]);
  });

  it('can be stopped from inside one of its tasks', () => {
    const clock = new ManualClock();
    const t = timer({ clock, tickDuration: 10 });
    const ran: string[] = [];
    let unprocessed: Timeout[] = [];
    t.newTimeout(() => {
      ran.push('stopper');
      unprocessed = t.stop();
    }, 10);
    const sameTick = t.newTimeout(() => ran.push('same tick'), 10);
    const later = t.newTimeout(() => ran.push('later'), 20);
    clock.advance(100);
    expect(ran).toEqual(['stopper']);
    expect(new Set(unprocessed)).toEqual(new Set([sameTick, later]));
  });

  it('warns once, with code TICKWHEEL_TOO_MANY_TIMERS, when more than 64 instances are alive', async () => {
    const warnings: Error[] = [];
    const listen = (warning: Error) => warnings.push(warning);
    process.on('warning', listen);
    try {
      const clock = new ManualClock();
      const base = HashedWheelTimer.liveInstances;
      expect(base).toBe(0);
      for (let i = 0; i < 64; i++) timer({ clock });
      expect(HashedWheelTimer.liveInstances).toBe(64);
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings.filter(tooMany)).toHaveLength(0);

      timer({ clock });
      for (let i = 0; i < 10; i++) timer({ clock });
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings.filter(tooMany)).toHaveLength(1);
      expect(warnings.filter(tooMany)[0].message).toMatch(/HashedWheelTimer/);

      for (const t of made.splice(0)) t.stop();
      expect(HashedWheelTimer.liveInstances).toBe(0);
    } finally {
      process.off('warning', listen);
    }
  });
});

function tooMany(warning: Error): boolean {
  return (warning as { code?: string }).code === 'TICKWHEEL_TOO_MANY_TIMERS';
}

describe('HashedWheelTimer bad input', () => {
  it('refuses tasks that are neither functions nor objects with run()', () => {
    const t = timer({ clock: new ManualClock() });
    const invalid = { name: 'TickwheelTypeError', code: 'ERR_TICKWHEEL_INVALID_CALLBACK' };
    for (const task of [null, undefined, 42, 'run', {}, { run: 1 }]) {
      expect(codeOf(() => t.newTimeout(task as never, 10))).toEqual(invalid);
    }
    expect(t.pendingTimeouts).toBe(0);
  });

  it('refuses NaN, infinite and non-number delays with ERR_TICKWHEEL_INVALID_DELAY', () => {
    const t = timer({ clock: new ManualClock() });
    const range = { name: 'TickwheelRangeError', code: 'ERR_TICKWHEEL_INVALID_DELAY' };
    expect(codeOf(() => t.newTimeout(() => {}, NaN))).toEqual(range);
    expect(codeOf(() => t.newTimeout(() => {}, Infinity))).toEqual(range);
    expect(codeOf(() => t.newTimeout(() => {}, -Infinity))).toEqual(range);
    expect(codeOf(() => t.newTimeout(() => {}, '10' as never))).toEqual({
      name: 'TickwheelTypeError',
      code: 'ERR_TICKWHEEL_INVALID_DELAY',
    });
    expect(t.pendingTimeouts).toBe(0);
  });
});
