import { describe, expect, it } from 'vitest';
import { ManualClock, SystemClock, SystemTimer, TimerTask } from '../../src/index.js';
import { codeOf } from './code-of.js';

/** A task that records the clock time of each of its runs. */
class Probe extends TimerTask {
  readonly runs: number[] = [];

  constructor(
    delayMs: number,
    private readonly clock: { now(): number },
    private readonly body: () => void = () => {},
  ) {
    super(delayMs);
  }

  run(): void {
    this.runs.push(this.clock.now());
    this.body();
  }
}

/** Lets promise callbacks and immediates run. */
function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

function track(promise: Promise<boolean>): { result: boolean | undefined } {
  const state: { result: boolean | undefined } = { result: undefined };
  void promise.then((ran) => (state.result = ran));
  return state;
}

describe('SystemTimer, Kafka example (tickMs 1, wheelSize 20)', () => {
  it('creates overflow levels only when a task needs one: 2, 8, 19 -> 1 level, 350 -> 2, 450 -> 3', () => {
    const clock = new ManualClock();
    const timer = new SystemTimer({ clock, tickMs: 1, wheelSize: 20 });
    for (const delay of [2, 8, 19]) timer.add(new Probe(delay, clock));
    expect(timer.levels).toBe(1);
    timer.add(new Probe(350, clock));
    expect(timer.levels).toBe(2);
    timer.add(new Probe(450, clock));
    expect(timer.levels).toBe(3);
    expect(timer.size).toBe(5);
  });

  it('runs each task at exactly its time', () => {
    const clock = new ManualClock();
    const timer = new SystemTimer({ clock });
    const tasks = [2, 8, 19, 350, 450].map((delay) => new Probe(delay, clock));
    for (const task of tasks) timer.add(task);
    clock.advance(1000);
    expect(tasks.map((task) => task.runs)).toEqual([[2], [8], [19], [350], [450]]);
    expect(timer.size).toBe(0);
  });
});

describe('SystemTimer scheduling', () => {
  it('never runs a task before its delay has passed', () => {
    const clock = new ManualClock();
    const timer = new SystemTimer({ clock, tickMs: 10 });
    const tasks = [0, 1, 9, 10, 11, 95].map((delay) => new Probe(delay, clock));
    for (const task of tasks) timer.add(task);
    clock.advance(500);
    expect(tasks.map((task) => task.runs)).toEqual([[10], [10], [10], [10], [20], [100]]);
  });

  it('treats a negative delay as 0: the task runs on the next tick', () => {
    const clock = new ManualClock();
    const timer = new SystemTimer({ clock });
    const task = new Probe(-5, clock);
    expect(task.delayMs).toBe(0);
    timer.add(task);
    clock.advance(10);
    expect(task.runs).toEqual([1]);
  });

  it('reschedules a task that is added again, from the time it is re-added, and runs it once', () => {
    const clock = new ManualClock();
    const timer = new SystemTimer({ clock });
    const task = new Probe(100, clock);
    timer.add(task);
    clock.advance(60);
    timer.add(task);
    expect(timer.size).toBe(1);
    clock.advance(99);
    expect(task.runs).toEqual([]);
    clock.advance(1000);
    expect(task.runs).toEqual([160]);
  });

  it('moves a task added to a second timer out of the first', () => {
    const clock = new ManualClock();
    const first = new SystemTimer({ clock });
    const second = new SystemTimer({ clock });
    const task = new Probe(50, clock);
    first.add(task);
    clock.advance(10);
    second.add(task);
    expect(first.size).toBe(0);
    expect(second.size).toBe(1);
    clock.advance(1000);
    expect(task.runs).toEqual([60]);
  });

  it('lets a task add itself again from run()', () => {
    const clock = new ManualClock();
    const timer = new SystemTimer({ clock });
    const task: Probe = new Probe(30, clock, () => {
      if (task.runs.length < 3) timer.add(task);
    });
    timer.add(task);
    clock.advance(1000);
    expect(task.runs).toEqual([30, 60, 90]);
  });

  it('cancels a pending task with TimerTask.cancel(), which does nothing otherwise', () => {
    const clock = new ManualClock();
    const timer = new SystemTimer({ clock });
    const task = new Probe(50, clock);
    task.cancel();
    timer.add(task);
    expect(timer.size).toBe(1);
    task.cancel();
    task.cancel();
    expect(timer.size).toBe(0);
    clock.advance(100);
    expect(task.runs).toEqual([]);
    timer.add(task);
    clock.advance(100);
    expect(task.runs).toEqual([150]);
    task.cancel();
    expect(timer.size).toBe(0);
  });

  it('counts pending tasks in size', () => {
    const clock = new ManualClock();
    const timer = new SystemTimer({ clock });
    const tasks = [10, 20, 30].map((delay) => new Probe(delay, clock));
    for (const task of tasks) timer.add(task);
    expect(timer.size).toBe(3);
    tasks[1].cancel();
    expect(timer.size).toBe(2);
    clock.advance(10);
    expect(timer.size).toBe(1);
    clock.advance(20);
    expect(timer.size).toBe(0);
  });

  it('sends errors thrown by tasks to onError and still runs the others', () => {
    const clock = new ManualClock();
    const errors: unknown[] = [];
    const timer = new SystemTimer({ clock, onError: (err) => errors.push(err) });
    const boom = new Error('boom');
    const before = new Probe(5, clock);
    const thrower = new Probe(5, clock, () => {
      throw boom;
    });
    const after = new Probe(5, clock);
    for (const task of [before, thrower, after]) timer.add(task);
    clock.advance(5);
    expect(errors).toEqual([boom]);
    expect(after.runs).toEqual([5]);
  });

  it('runs by itself on a SystemClock', async () => {
    const clock = new SystemClock();
    const timer = new SystemTimer({ clock });
    const start = performance.now();
    const task = new Probe(20, clock);
    timer.add(task);
    expect(await timer.advanceClock(2000)).toBe(true);
    expect(task.runs).toHaveLength(1);
    expect(task.runs[0] - start).toBeGreaterThanOrEqual(20);
    timer.shutdown();
  });
});

describe('SystemTimer.advanceClock', () => {
  it('resolves true as soon as a task runs within the timeout', async () => {
    const clock = new ManualClock();
    const timer = new SystemTimer({ clock });
    timer.add(new Probe(30, clock));
    const wait = track(timer.advanceClock(100));
    expect(timer.size).toBe(1);
    clock.advance(29);
    await settle();
    expect(wait.result).toBeUndefined();
    clock.advance(1);
    await settle();
    expect(wait.result).toBe(true);
    expect(timer.size).toBe(0);
  });

  it('resolves false when the timeout passes with no task run, on the timer clock', async () => {
    const clock = new ManualClock();
    const timer = new SystemTimer({ clock });
    const task = new Probe(60, clock);
    timer.add(task);
    const wait = track(timer.advanceClock(50));
    clock.advance(49);
    await settle();
    expect(wait.result).toBeUndefined();
    clock.advance(1);
    await settle();
    expect(wait.result).toBe(false);
    expect(timer.size).toBe(1);
    clock.advance(10);
    expect(task.runs).toEqual([60]);
  });

  it('counts a task pending before the call and due exactly at the timeout', async () => {
    const clock = new ManualClock();
    const timer = new SystemTimer({ clock });
    timer.add(new Probe(50, clock));
    const wait = track(timer.advanceClock(50));
    clock.advance(50);
    await settle();
    expect(wait.result).toBe(true);
  });

  it('resolves every pending wait when a task runs, and keeps them out of size', async () => {
    const clock = new ManualClock();
    const timer = new SystemTimer({ clock });
    const waits = [track(timer.advanceClock(100)), track(timer.advanceClock(200))];
    expect(timer.size).toBe(0);
    timer.add(new Probe(10, clock));
    expect(timer.size).toBe(1);
    clock.advance(10);
    await settle();
    expect(waits.map((wait) => wait.result)).toEqual([true, true]);
    expect(timer.size).toBe(0);
  });

  it('does not count a task that ran before the call', async () => {
    const clock = new ManualClock();
    const timer = new SystemTimer({ clock });
    timer.add(new Probe(10, clock));
    clock.advance(10);
    const wait = track(timer.advanceClock(20));
    clock.advance(20);
    await settle();
    expect(wait.result).toBe(false);
  });

  it('serves a Kafka-style reaper loop', async () => {
    const clock = new ManualClock();
    const timer = new SystemTimer({ clock });
    const tasks = [5, 15, 250].map((delay) => new Probe(delay, clock));
    for (const task of tasks) timer.add(task);
    const results: boolean[] = [];
    const reaper = (async () => {
      while (timer.size > 0) results.push(await timer.advanceClock(100));
    })();
    for (let i = 0; i < 30; i++) {
      clock.advance(10);
      await settle();
    }
    await reaper;
    expect(tasks.map((task) => task.runs)).toEqual([[5], [15], [250]]);
    expect(results).toEqual([true, true, false, false, true]);
  });

  it('refuses NaN, infinite and non-number timeouts', () => {
    const timer = new SystemTimer({ clock: new ManualClock() });
    const range = { name: 'TickwheelRangeError', code: 'ERR_TICKWHEEL_INVALID_DELAY' };
    expect(codeOf(() => timer.advanceClock(NaN))).toEqual(range);
    expect(codeOf(() => timer.advanceClock(Infinity))).toEqual(range);
    expect(codeOf(() => timer.advanceClock('1' as never))).toEqual({
      name: 'TickwheelTypeError',
      code: 'ERR_TICKWHEEL_INVALID_DELAY',
    });
  });
});

describe('SystemTimer.shutdown', () => {
  it('cancels every pending task and ends pending waits with false', async () => {
    const clock = new ManualClock();
    const timer = new SystemTimer({ clock });
    const tasks = [10, 500, 100_000].map((delay) => new Probe(delay, clock));
    for (const task of tasks) timer.add(task);
    const wait = track(timer.advanceClock(1000));
    timer.shutdown();
    expect(timer.size).toBe(0);
    await settle();
    expect(wait.result).toBe(false);
    clock.advance(200_000);
    expect(tasks.map((task) => task.runs)).toEqual([[], [], []]);
  });

  it('refuses add() and advanceClock() afterwards with ERR_TICKWHEEL_CLOSED', () => {
    const clock = new ManualClock();
    const timer = new SystemTimer({ clock });
    timer.shutdown();
    timer.shutdown();
    const closed = { name: 'TickwheelStateError', code: 'ERR_TICKWHEEL_CLOSED' };
    expect(codeOf(() => timer.add(new Probe(10, clock)))).toEqual(closed);
    expect(codeOf(() => timer.advanceClock(10))).toEqual(closed);
  });

  it('frees its tasks to be added to another timer', () => {
    const clock = new ManualClock();
    const timer = new SystemTimer({ clock });
    const task = new Probe(10, clock);
    timer.add(task);
    timer.shutdown();
    task.cancel();
    const other = new SystemTimer({ clock });
    other.add(task);
    clock.advance(10);
    expect(task.runs).toEqual([10]);
  });
});

describe('SystemTimer bad input', () => {
  it('refuses NaN, infinite and non-number task delays with ERR_TICKWHEEL_INVALID_DELAY', () => {
    const clock = new ManualClock();
    const range = { name: 'TickwheelRangeError', code: 'ERR_TICKWHEEL_INVALID_DELAY' };
    expect(codeOf(() => new Probe(NaN, clock))).toEqual(range);
    expect(codeOf(() => new Probe(Infinity, clock))).toEqual(range);
    expect(codeOf(() => new Probe(null as never, clock))).toEqual({
      name: 'TickwheelTypeError',
      code: 'ERR_TICKWHEEL_INVALID_DELAY',
    });
  });

  it('refuses anything but a TimerTask in add() with ERR_TICKWHEEL_INVALID_CALLBACK', () => {
    const timer = new SystemTimer({ clock: new ManualClock() });
    const invalid = { name: 'TickwheelTypeError', code: 'ERR_TICKWHEEL_INVALID_CALLBACK' };
    for (const task of [null, undefined, () => {}, { delayMs: 10, run() {} }]) {
      expect(codeOf(() => timer.add(task as never))).toEqual(invalid);
    }
    expect(timer.size).toBe(0);
  });

  it('refuses bad options with ERR_TICKWHEEL_INVALID_OPTION', () => {
    const invalid = { name: 'TickwheelRangeError', code: 'ERR_TICKWHEEL_INVALID_OPTION' };
    expect(codeOf(() => new SystemTimer({ tickMs: 0 }))).toEqual(invalid);
    expect(codeOf(() => new SystemTimer({ wheelSize: 1 }))).toEqual(invalid);
    expect(codeOf(() => new SystemTimer({ wheelSize: 20.5 }))).toEqual(invalid);
    expect(codeOf(() => new SystemTimer({ startMs: NaN }))).toEqual(invalid);
  });

  it('accepts startMs and counts ticks from the clock time when it is made', () => {
    const clock = new ManualClock(1000);
    const timer = new SystemTimer({ clock, startMs: 0, tickMs: 10 });
    const task = new Probe(25, clock);
    timer.add(task);
    clock.advance(100);
    expect(task.runs).toEqual([1030]);
  });
});

describe('SystemTimer.add moving a task', () => {
  it('leaves the task where it was when the other timer cannot hold its delay', () => {
    const clock = new ManualClock(0);
    const near = new SystemTimer({ clock });
    const task = new Probe(100, clock);
    near.add(task);
    const farClock = new ManualClock(0);
    const far = new SystemTimer({ clock: farClock });
    farClock.advance(2 ** 53 - 10); // its ticks count from 0: it stands 10 ticks from the last
    expect(() => far.add(task)).toThrow(
      expect.objectContaining({ code: 'ERR_TICKWHEEL_INVALID_DELAY' }),
    );
    expect({ near: near.size, far: far.size }).toEqual({ near: 1, far: 0 });
    clock.advance(100);
    expect(task.runs).toEqual([100]);
  });
});
