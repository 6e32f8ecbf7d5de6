import { afterEach, describe, expect, it } from 'vitest';
import {
  HashedWheelTimer,
  ManualClock,
  SystemClock,
  type HashedWheelTimerOptions,
  type Timeout,
} from '../../src/index.js';
import { codeOf } from './code-of.js';

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

  it('stop() cancels and returns the timeouts that neither ran nor were cancelled; none of them ever runs', () => {
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
      expect(timeout.isCancelled()).toBe(true);
      expect(timeout.cancel()).toBe(false);
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
    expect(unprocessed.every((timeout) => timeout.isCancelled())).toBe(true);
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

/**
 * The cases of Netty's own HashedWheelTimerTest (common/src/test/java/io/netty/util), with
 * Netty's semantics, on tickwheel's face. Netty's tests wait on a worker thread with latches and
 * sleeps; here a ManualClock stands in for the waiting, except where the real clock is the point.
 */
describe("Netty's HashedWheelTimerTest, ported", () => {
  it('testScheduleTimeoutShouldNotRunBeforeDelay: a 10 s timeout has not run after 3 s', () => {
    const clock = new ManualClock();
    const t = timer({ clock });
    let ran = false;
    const timeout = t.newTimeout(() => (ran = true), 10_000);
    clock.advance(3_000);
    expect(ran).toBe(false);
    expect(timeout.isExpired()).toBe(false);
    clock.advance(6_999);
    expect(ran).toBe(false);
  });

  it('testScheduleTimeoutShouldRunAfterDelay: a 2 s timeout has run and expired within 3 s', () => {
    const clock = new ManualClock();
    const t = timer({ clock });
    let ran = false;
    const timeout = t.newTimeout(() => (ran = true), 2_000);
    clock.advance(3_000);
    expect(ran).toBe(true);
    expect(timeout.isExpired()).toBe(true);
  });

  it('testStopTimer: stop() returns nothing once every timeout ran, and the pending ones otherwise', () => {
    const clock = new ManualClock();
    const processed = timer({ clock });
    let ran = 0;
    for (let i = 0; i < 3; i++) processed.newTimeout(() => ran++, 1);
    clock.advance(100);
    expect(ran).toBe(3);
    expect(processed.stop()).toEqual([]);

    const unprocessed = timer({ clock });
    for (let i = 0; i < 5; i++) unprocessed.newTimeout(() => {}, 5_000);
    clock.advance(1_000);
    expect(unprocessed.stop()).toHaveLength(5);
  });

  it('testStopTimerCancelsPendingTasks: every timeout stop() returns is cancelled', () => {
    const clock = new ManualClock();
    const t = timer({ clock });
    let ran = 0;
    const made = Array.from({ length: 5 }, () => t.newTimeout(() => ran++, 5_000));
    clock.advance(1_000);
    const unprocessed = t.stop();
    expect(new Set(unprocessed)).toEqual(new Set(made));
    for (const timeout of unprocessed) {
      expect(timeout.isCancelled()).toBe(true);
      expect(timeout.isExpired()).toBe(false);
      // Netty's Timeout.cancel() is a compare-and-set from the initial state: once only.
      expect(timeout.cancel()).toBe(false);
    }
    clock.advance(10_000);
    expect(ran).toBe(0);
  });

  it('testStopTimerCancelsPendingTasks on a SystemClock, from a task of another timer', async () => {
    const t = timer({ clock: new SystemClock(), tickDuration: 10 });
    for (let i = 0; i < 5; i++) t.newTimeout(() => {}, 5_000);
    const stopper = timer({ clock: new SystemClock(), tickDuration: 10 });
    const unprocessed = await new Promise<Timeout[]>((resolve) => {
      stopper.newTimeout(() => resolve(t.stop()), 20);
    });
    expect(unprocessed).toHaveLength(5);
    expect(unprocessed.every((timeout) => timeout.isCancelled())).toBe(true);
  });

  it('testTimerShouldThrowExceptionAfterShutdownForNewTimeouts', () => {
    const clock = new ManualClock();
    const t = timer({ clock });
    let ran = 0;
    for (let i = 0; i < 3; i++) t.newTimeout(() => ran++, 1);
    clock.advance(100);
    expect(ran).toBe(3);
    t.stop();
    expect(codeOf(() => t.newTimeout(() => {}, 1))).toEqual({
      name: 'TickwheelStateError',
      code: 'ERR_TICKWHEEL_TIMER_STOPPED',
    });
  });

  it('testTimerOverflowWheelLength: a task that re-arms itself on a 32-slot wheel keeps running', () => {
    const clock = new ManualClock();
    const t = timer({ clock, tickDuration: 100, ticksPerWheel: 32 });
    const runs: number[] = [];
    const task = {
      run() {
        t.newTimeout(task, 100);
        runs.push(clock.now());
      },
    };
    t.newTimeout(task, 100);
    clock.advance(300);
    expect(runs).toEqual([100, 200, 300]);
    // 40 more runs take the task around the 32 slots (3.2 s) more than once.
    clock.advance(4_000);
    expect(runs).toHaveLength(43);
    expect(t.stop()).toHaveLength(1);
  });

  it('testExecutionOnTime: 100,000 timeouts of 125 ms on 200 ms ticks run within [125, 650) ms', () => {
    const clock = new ManualClock();
    const t = timer({ clock, tickDuration: 200 });
    const delays: number[] = [];
    for (let i = 0; i < 100_000; i++) {
      const start = clock.now();
      t.newTimeout(() => delays.push(clock.now() - start), 125);
    }
    clock.advance(1_000);
    expect(delays).toHaveLength(100_000);
    expect(Math.min(...delays)).toBeGreaterThanOrEqual(125);
    expect(Math.max(...delays)).toBeLessThan(2 * (200 + 125));
  });

  it('testExecutionOnTime on a SystemClock: 10,000 timeouts, none before 125 ms', async () => {
    const t = timer({ clock: new SystemClock(), tickDuration: 200 });
    const delays: number[] = [];
    await new Promise<void>((resolve) => {
      for (let i = 0; i < 10_000; i++) {
        const start = performance.now();
        t.newTimeout(() => {
          if (delays.push(performance.now() - start) === 10_000) resolve();
        }, 125);
      }
    });
    expect(Math.min(...delays)).toBeGreaterThanOrEqual(125);
    // Netty's bound is 650 ms; a shared machine gets more room.
    expect(Math.max(...delays)).toBeLessThan(5_000);
  });

  it('testExecutionOnTaskExecutor: the executor gets the expired task and runs it', () => {
    const clock = new ManualClock();
    let handedOver = 0;
    let ran = 0;
    const t = timer({
      clock,
      tickDuration: 100,
      ticksPerWheel: 32,
      maxPendingTimeouts: 2,
      executor: (run) => {
        try {
          run();
        } finally {
          handedOver++;
        }
      },
    });
    t.newTimeout(() => ran++, 10);
    clock.advance(100);
    expect(handedOver).toBe(1);
    expect(ran).toBe(1);
  });

  it('testRejectedExecutionExceptionWhenTooManyTimeoutsAreAddedBackToBack', () => {
    const t = timer({ clock: new ManualClock(), ticksPerWheel: 32, maxPendingTimeouts: 2 });
    t.newTimeout(() => {}, 5_000);
    t.newTimeout(() => {}, 5_000);
    expect(codeOf(() => t.newTimeout(() => {}, 1))).toEqual({
      name: 'TickwheelRangeError',
      code: 'ERR_TICKWHEEL_MAX_PENDING',
    });
  });

  it('testNewTimeoutShouldStopThrowingRejectedExecutionExceptionWhenExistingTimeoutIsCancelled', () => {
    const clock = new ManualClock();
    const t = timer({ clock, tickDuration: 100, ticksPerWheel: 32, maxPendingTimeouts: 2 });
    t.newTimeout(() => {}, 5_000);
    const toCancel = t.newTimeout(() => {}, 5_000);
    expect(toCancel.cancel()).toBe(true);
    clock.advance(500);
    let ran = false;
    t.newTimeout(() => (ran = true), 90);
    clock.advance(100);
    expect(ran).toBe(true);
  });

  it('testNewTimeoutShouldStopThrowingRejectedExecutionExceptionWhenExistingTimeoutIsExecuted', () => {
    const clock = new ManualClock();
    const t = timer({ clock, tickDuration: 25, ticksPerWheel: 4, maxPendingTimeouts: 2 });
    t.newTimeout(() => {}, 5_000);
    let first = false;
    t.newTimeout(() => (first = true), 90);
    clock.advance(100);
    expect(first).toBe(true);
    let second = false;
    t.newTimeout(() => (second = true), 90);
    clock.advance(100);
    expect(second).toBe(true);
  });

  it('reportPendingTimeouts: cancelled and expired timeouts leave the count', () => {
    const clock = new ManualClock();
    const t = timer({ clock });
    const t1 = t.newTimeout(() => {}, 100 * 60_000);
    const t2 = t.newTimeout(() => {}, 100 * 60_000);
    t.newTimeout(() => {}, 90);
    expect(t.pendingTimeouts).toBe(3);
    t1.cancel();
    t2.cancel();
    clock.advance(100);
    expect(t.pendingTimeouts).toBe(0);
  });

  it('testOverflow: a timeout as far away as a delay can be never runs and can be cancelled', () => {
    const clock = new ManualClock();
    const t = timer({ clock });
    let ran = false;
    // Netty takes Long.MAX_VALUE ms and clamps it; tickwheel takes any delay within 2^53 ticks.
    const timeout = t.newTimeout(() => (ran = true), Number.MAX_SAFE_INTEGER);
    clock.advance(1_000);
    expect(ran).toBe(false);
    expect(timeout.cancel()).toBe(true);
    expect(t.pendingTimeouts).toBe(0);
  });

  it('testPendingTimeoutsShouldBeCountedCorrectlyWhenTimeoutCancelledWithinGoalTick', () => {
    const clock = new ManualClock();
    const t = timer({ clock });
    const timeouts: Timeout[] = [];
    let ran = 0;
    // 11 timeouts due in the same tick; the first cancels the other ten before they run.
    t.newTimeout(() => {
      for (const timeout of timeouts) timeout.cancel();
    }, 200);
    for (let i = 0; i < 10; i++) timeouts.push(t.newTimeout(() => ran++, 200));
    clock.advance(2_000);
    expect(ran).toBe(0);
    expect(t.pendingTimeouts).toBe(0);
  });
});
