/**
 * SystemTimer and TimerTask: Kafka's `org.apache.kafka.server.util.timer` API over WheelDriver and
 * a HierarchicalWheel (Kafka's own with the defaults). A task is pending in one timer at most.
 * What differs: the clock drives the wheel, so tasks run when due whether or not a reaper calls
 * advanceClock; a task never runs early, and one already due runs on the next tick.
 */

import { TickwheelTypeError, checkOpen } from '../errors.js';
import { checkDelay, checkOption, checkOptions, optionNames } from '../validate.js';
import { HierarchicalWheel } from '../wheel/index.js';
import { FACE_OPTIONS, WheelDriver, checkFaceOptions, type FaceOptions } from './driver.js';

const CLOSED = 'this SystemTimer is shut down; create a new one to add tasks';

/** Where a task is pending: symbol keys, apart from the fields of users' subclasses. */
const pendingIn = Symbol('pendingIn');
const rowHandle = Symbol('rowHandle');
const removeTask = Symbol('removeTask');

/** Kafka's TimerTask: subclass it, give the delay to the constructor, implement run(). */
export abstract class TimerTask {
  /** Delay from add() to run(), in milliseconds; a negative delay given counts as 0. */
  readonly delayMs: number;
  [pendingIn]: SystemTimer | undefined = undefined;
  [rowHandle] = 0;

  constructor(delayMs: number) {
    this.delayMs = checkDelay(delayMs);
  }

  abstract run(): void;

  /** Takes the task out of the timer it is pending in; does nothing otherwise. */
  cancel(): void {
    this[pendingIn]?.[removeTask](this);
  }
}

export interface SystemTimerOptions extends FaceOptions {
  /** Milliseconds per tick of the finest wheel. Default 1. */
  tickMs?: number;
  /** Slots per wheel level. Default 20, as in Kafka. */
  wheelSize?: number;
  /** Kafka's start time, unused: for virtual time, give `clock: new ManualClock(startMs)`. */
  startMs?: number;
}

/** A pending advanceClock() call: a row of the wheel too, due when its wait times out. */
interface ClockWaiter {
  resolve: (ran: boolean) => void;
  handle: number;
}

const SYSTEM_TIMER_OPTIONS = optionNames<SystemTimerOptions>({
  tickMs: true,
  wheelSize: true,
  startMs: true,
  ...FACE_OPTIONS,
});

export class SystemTimer {
  private readonly driver: WheelDriver<HierarchicalWheel>;
  /** Per row: the task, or an advanceClock() call waiting for one. */
  private readonly rows: Array<TimerTask | ClockWaiter | undefined> = [];
  /** Pending advanceClock() calls; their rows are in the wheel but not counted by `size`. */
  private waiters: ClockWaiter[] = [];
  private closed = false;

  constructor(options: SystemTimerOptions = {}) {
    checkOptions(options, SYSTEM_TIMER_OPTIONS, 'new SystemTimer()', '{ tickMs: 1 }');
    const tickMs = checkOption(options.tickMs ?? 1, 'tickMs', Number.MIN_VALUE);
    const wheelSize = checkOption(options.wheelSize ?? 20, 'wheelSize', 2, 4096, true);
    if (options.startMs !== undefined) {
      checkOption(options.startMs, 'startMs', -Number.MAX_VALUE, Number.MAX_VALUE);
    }
    this.driver = new WheelDriver(
      new HierarchicalWheel({ wheelSize }),
      { ...checkFaceOptions(options), resolution: tickMs },
      (index) => this.expire(index),
    );
  }

  /** Runs `task.run()` `task.delayMs` from now; a task pending anywhere is moved, runs once. */
  add(task: TimerTask): void {
    if (!(task instanceof TimerTask)) {
      throw new TickwheelTypeError(
        'ERR_TICKWHEEL_INVALID_CALLBACK',
        'add() takes a TimerTask: a subclass of TimerTask with a run() method',
      );
    }
    checkOpen(this.closed, CLOSED);
    const holder = task[pendingIn];
    if (holder === this) {
      this.driver.rearm(this.driver.entries.indexOf(task[rowHandle]), task.delayMs);
      return;
    }
    // Added here before it leaves the other timer: a delay this wheel cannot hold throws first.
    const index = this.driver.add(task.delayMs);
    holder?.[removeTask](task);
    this.rows[index] = task;
    task[pendingIn] = this;
    task[rowHandle] = this.driver.entries.handleOf(index);
  }

  /**
   * For reaper loops: resolves true as soon as a task runs after the call, false after
   * `timeoutMs` without one. The wait is a timer like the tasks (so 0 waits one tick), and a task
   * due in its last tick counts if added before the call. Waits pending at shutdown resolve false.
   */
  advanceClock(timeoutMs: number): Promise<boolean> {
    const timeout = checkDelay(timeoutMs, 'timeoutMs');
    checkOpen(this.closed, CLOSED);
    return new Promise<boolean>((resolve) => {
      const index = this.driver.add(timeout);
      const waiter = { resolve, handle: this.driver.entries.handleOf(index) };
      this.rows[index] = waiter;
      this.waiters.push(waiter);
    });
  }

  get size(): number {
    return this.driver.size - this.waiters.length;
  }

  get levels(): number {
    this.driver.bindPending();
    return this.driver.wheel.levels;
  }

  /** Cancels every pending task and ends pending waits (false). Adding afterwards throws. */
  shutdown(): void {
    if (this.closed) return;
    this.closed = true;
    this.driver.dispose((index) => {
      const row = this.rows[index];
      this.rows[index] = undefined;
      this.driver.wheel.release(index);
      if (row instanceof TimerTask) forget(row);
    });
    const waiters = this.waiters;
    this.waiters = [];
    for (const waiter of waiters) waiter.resolve(false);
  }

  /** Takes a pending task out of the wheel (TimerTask.cancel, or a move to another timer). */
  [removeTask](task: TimerTask): void {
    const index = this.driver.cancelHandle(task[rowHandle]);
    if (index >= 0) this.rows[index] = undefined;
    forget(task);
  }

  private expire(index: number): void {
    const row = this.rows[index];
    this.rows[index] = undefined;
    this.driver.wheel.release(index);
    this.driver.settleAfter = this.driver.runQueues;
    if (row instanceof TimerTask) {
      forget(row);
      if (this.waiters.length > 0) this.wakeWaiters();
      row.run();
    } else if (row !== undefined) {
      this.waiters.splice(this.waiters.indexOf(row), 1);
      row.resolve(false);
    }
  }

  /** A task has run: every pending advanceClock() resolves true and its timeout row goes. */
  private wakeWaiters(): void {
    const waiters = this.waiters;
    this.waiters = [];
    const entries = this.driver.entries;
    for (const waiter of waiters) {
      const index = entries.indexOf(waiter.handle);
      this.rows[index] = undefined;
      this.driver.cancel(index);
      waiter.resolve(true);
    }
  }
}

function forget(task: TimerTask): void {
  task[pendingIn] = undefined;
  task[rowHandle] = 0;
}
