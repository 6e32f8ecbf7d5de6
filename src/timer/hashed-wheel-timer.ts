/**
 * HashedWheelTimer: Netty's `io.netty.util.HashedWheelTimer` as a face over WheelDriver and a
 * HashedWheel, with its API and behaviour (4.1.111). What differs: no worker thread; tasks run
 * on the event loop, empty ticks are slept through, and nothing fires before its deadline.
 */

import { TickwheelRangeError, TickwheelTypeError, checkOpen } from '../errors.js';
import { checkCallback, checkDelay, checkOption, checkOptions, optionNames } from '../validate.js';
import { HashedWheel } from '../wheel/index.js';
import {
  FACE_OPTIONS,
  WheelDriver,
  checkFaceOptions,
  type DriverOptions,
  type FaceOptions,
} from './driver.js';

const STOPPED = 'this HashedWheelTimer was stopped and cannot be started again; create a new one';

/** Netty's `TimerTask`: what runs when a timeout expires. */
export interface TimeoutTask {
  run(timeout: Timeout): void;
}

/** A task scheduled by `newTimeout`, and the handle to cancel it. */
export interface Timeout {
  readonly timer: HashedWheelTimer;
  readonly task: TimeoutTask | ((timeout: Timeout) => void);
  /** True once the task has been handed over to run. */
  isExpired(): boolean;
  isCancelled(): boolean;
  /** Cancels the timeout; true only if it was pending (neither expired nor cancelled). */
  cancel(): boolean;
}

export interface HashedWheelTimerOptions extends FaceOptions {
  /** Milliseconds per tick: timeouts fire at most one tick late. Default 100. */
  tickDuration?: number;
  /** Slots of the wheel, rounded up to a power of two. Default 512. */
  ticksPerWheel?: number;
  /** Pending timeouts allowed; <= 0 means unlimited. Default -1. */
  maxPendingTimeouts?: number;
  /** Netty's taskExecutor: gets each expired task as `run` (e.g. setImmediate). Default inline. */
  executor?: (run: () => void) => void;
}

/** Netty's INSTANCE_COUNT_LIMIT: more live timers than this earns a warning. */
const INSTANCE_COUNT_LIMIT = 64;
let liveInstances = 0;
let warnedTooManyInstances = false;
/** Timers dropped without stop() leave the count when they are collected. */
const unstoppedInstances = new FinalizationRegistry<null>(() => {
  liveInstances--;
});

const PENDING = 0;
const CANCELLED = 1;
const EXPIRED = 2;

/** Reached by a timeout's cancel() through a symbol, out of the public surface. */
const removeTimeout = Symbol('removeTimeout');

class HashedWheelTimeout implements Timeout {
  state = PENDING;
  /** The row handle while the timeout is in the wheel; 0 (never a handle) otherwise. */
  handle = 0;

  constructor(
    readonly timer: HashedWheelTimer,
    readonly task: TimeoutTask | ((timeout: Timeout) => void),
  ) {}

  isExpired(): boolean {
    return this.state === EXPIRED;
  }

  isCancelled(): boolean {
    return this.state === CANCELLED;
  }

  cancel(): boolean {
    if (this.state !== PENDING) return false;
    this.state = CANCELLED;
    this.timer[removeTimeout](this);
    return true;
  }

  toString(): string {
    return `HashedWheelTimeout(${['pending', 'cancelled', 'expired'][this.state]})`;
  }
}

const HASHED_WHEEL_OPTIONS = optionNames<HashedWheelTimerOptions>({
  tickDuration: true,
  ticksPerWheel: true,
  maxPendingTimeouts: true,
  executor: true,
  ...FACE_OPTIONS,
});

export class HashedWheelTimer {
  readonly tickDuration: number;
  private readonly wheel: HashedWheel;
  private readonly maxPendingTimeouts: number;
  private readonly executor: ((run: () => void) => void) | undefined;
  private readonly driverOptions: DriverOptions;
  /** Made by start(): the tick grid begins when the timer starts, as in Netty. */
  private driver: WheelDriver<HashedWheel> | undefined;
  private readonly rows: Array<HashedWheelTimeout | undefined> = [];
  private stopped = false;

  /** HashedWheelTimers made and neither stopped nor garbage-collected. */
  static get liveInstances(): number {
    return liveInstances;
  }

  constructor(options: HashedWheelTimerOptions = {}) {
    checkOptions(options, HASHED_WHEEL_OPTIONS, 'new HashedWheelTimer()', '{ tickDuration: 100 }');
    this.tickDuration = checkOption(options.tickDuration ?? 100, 'tickDuration', Number.MIN_VALUE);
    this.wheel = new HashedWheel({ ticksPerWheel: options.ticksPerWheel });
    this.maxPendingTimeouts = checkOption(
      options.maxPendingTimeouts ?? -1,
      'maxPendingTimeouts',
      Number.MIN_SAFE_INTEGER,
      Number.MAX_SAFE_INTEGER,
      true,
    );
    if (options.executor !== undefined) checkCallback(options.executor, 'executor');
    this.executor = options.executor;
    this.driverOptions = { ...checkFaceOptions(options), resolution: this.tickDuration };

    unstoppedInstances.register(this, null, this);
    if (++liveInstances > INSTANCE_COUNT_LIMIT && !warnedTooManyInstances) {
      warnedTooManyInstances = true;
      process.emitWarning(
        `More than ${INSTANCE_COUNT_LIMIT} HashedWheelTimer instances are alive. A ` +
          'HashedWheelTimer is meant to be shared (one per process or per kind of timeout), not ' +
          'made per connection or request; reuse one, and stop() those you no longer need.',
        { type: 'TickwheelWarning', code: 'TICKWHEEL_TOO_MANY_TIMERS' },
      );
    }
  }

  /** Rounded up to a power of two. */
  get ticksPerWheel(): number {
    return this.wheel.ticksPerWheel;
  }

  /** Timeouts waiting to expire (cancelled ones leave at once). */
  get pendingTimeouts(): number {
    return this.driver?.size ?? 0;
  }

  /** Starts the timer; newTimeout does so itself. Throws once the timer has been stopped. */
  start(): void {
    checkOpen(this.stopped, STOPPED, 'ERR_TICKWHEEL_TIMER_STOPPED');
    this.driver ??= new WheelDriver(this.wheel, this.driverOptions, (index) => this.expire(index));
  }

  /** Runs `task` once, at the first tick boundary at or after `delayMs` (at least 0) from now. */
  newTimeout(task: TimeoutTask | ((timeout: Timeout) => void), delayMs: number): Timeout {
    if (typeof task !== 'function' && typeof (task as TimeoutTask | null)?.run !== 'function') {
      throw new TickwheelTypeError(
        'ERR_TICKWHEEL_INVALID_CALLBACK',
        'task must be a function or an object with a run(timeout) method',
      );
    }
    const delay = checkDelay(delayMs);
    this.start();
    const driver = this.driver as WheelDriver<HashedWheel>;
    const pending = driver.size;
    if (this.maxPendingTimeouts > 0 && pending >= this.maxPendingTimeouts) {
      throw new TickwheelRangeError(
        'ERR_TICKWHEEL_MAX_PENDING',
        `Number of pending timeouts (${pending + 1}) is greater than the maximum allowed ` +
          `(maxPendingTimeouts: ${this.maxPendingTimeouts})`,
      );
    }
    const timeout = new HashedWheelTimeout(this, task);
    const index = driver.add(delay);
    this.rows[index] = timeout;
    timeout.handle = driver.entries.handleOf(index);
    return timeout;
  }

  /** Stops the timer for good; returns the timeouts that had not run, now cancelled. */
  stop(): Timeout[] {
    if (this.stopped) return [];
    this.stopped = true;
    if (unstoppedInstances.unregister(this)) liveInstances--;
    const unprocessed: Timeout[] = [];
    this.driver?.dispose((index) => unprocessed.push(this.detach(index, CANCELLED)));
    return unprocessed;
  }

  [removeTimeout](timeout: HashedWheelTimeout): void {
    const index = this.driver?.cancelHandle(timeout.handle) ?? -1;
    if (index >= 0) this.rows[index] = undefined;
    timeout.handle = 0;
  }

  /** Frees an unlinked row and gives its timeout its final state (CANCELLED or EXPIRED). */
  private detach(index: number, state: number): HashedWheelTimeout {
    const timeout = this.rows[index] as HashedWheelTimeout;
    this.rows[index] = undefined;
    this.wheel.release(index);
    timeout.handle = 0;
    timeout.state = state;
    return timeout;
  }

  private expire(index: number): void {
    const timeout = this.detach(index, EXPIRED);
    const driver = this.driver as WheelDriver<HashedWheel>;
    driver.settleAfter = driver.runQueues;
    if (this.executor === undefined) {
      runTask(timeout);
      return;
    }
    // Handed over: errors thrown later, on the executor's schedule, still reach onError.
    this.executor(() => {
      try {
        runTask(timeout);
      } catch (err) {
        driver.report(err);
      }
    });
  }
}

function runTask(timeout: HashedWheelTimeout): void {
  const task = timeout.task;
  if (typeof task === 'function') task(timeout);
  else task.run(timeout);
}
