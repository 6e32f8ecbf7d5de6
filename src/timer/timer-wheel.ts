/**
 * TimerWheel: Node's timer functions on a hierarchical wheel, and a lean path for millions of
 * timers: `schedule(ms, data)` with the wheel-wide `onExpire(data)`, no closure, no allocation.
 * Handles are numbers, never 0, inert once their timer is gone; callbacks get theirs as `this`.
 */

import { ManualClock } from '../clock/index.js';
import { AbortError, TickwheelRangeError, TickwheelStateError, checkOpen } from '../errors.js';
import {
  checkCallback,
  checkDelay,
  checkFlag,
  checkKnownOptions,
  checkOption,
  checkOptions,
  checkOptionsObject,
  checkPeriod,
  checkSignal,
  invalidOption,
  onlyKnownOptions,
  optionNames,
} from '../validate.js';
import { HierarchicalWheel, grown, type WheelSnapshot } from '../wheel/index.js';
import { FACE_OPTIONS, WheelDriver, checkFaceOptions, type FaceOptions } from './driver.js';
import { RowValues } from './row-values.js';

const CLOSED = 'this TimerWheel is closed; create a new one to schedule timers';

export type TimerHandle = number;

export interface TimerWheelOptions<T = unknown> extends FaceOptions {
  /** Milliseconds per tick of the finest level. Timers fire at most one tick late. Default 1. */
  resolution?: number;
  /** Pending timers allowed; beyond it setTimeout throws a RangeError. Default unlimited. */
  maxPending?: number;
  /** The lean path's callback: `schedule(ms, data)` calls `onExpire(data)` when due. */
  onExpire?: (data: T) => void;
  /** Ticks begin on multiples of `resolution` on the clock, not at construction. Default false. */
  alignTicks?: boolean;
  /** Slots per level. Default 4096: with 1 ms ticks, nothing due within 4.1 s ever cascades. */
  wheelSize?: number;
  /** Timers to make room for up front. Default 1024; the slab doubles as needed. */
  initialCapacity?: number;
}

export interface TimerWheelStats {
  pending: number;
  /** Each run of an interval counts. */
  fired: number;
  cancelled: number;
  scheduled: number;
  /** Callbacks that threw. */
  errors: number;
  /** Rows the slab holds before it next grows. */
  capacity: number;
  levels: number;
  /** Clock time of the next wake-up, or null when idle. */
  nextWakeup: number | null;
}

const INTERVAL = 1;
const CALLBACK = 2;
const HAS_ARGS = 4;

type Callback = (this: TimerHandle, ...args: unknown[]) => void;

/** Calls fn with `this` without reading fn.call, which a callback (a Proxy) may lack. */
const callWith = Function.prototype.call.bind(Function.prototype.call) as (
  fn: Callback,
  thisArg: TimerHandle,
) => void;

const TIMER_WHEEL_OPTIONS = optionNames<TimerWheelOptions<unknown>>({
  resolution: true,
  ...FACE_OPTIONS,
  maxPending: true,
  onExpire: true,
  alignTicks: true,
  wheelSize: true,
  initialCapacity: true,
});

export interface SleepOptions {
  /** Aborting it cancels the sleep and rejects its promise with an AbortError. */
  signal?: AbortSignal;
  /** False lets the process end while the sleep is pending. Default true. */
  ref?: boolean;
}

const SLEEP_OPTIONS = optionNames<SleepOptions>({ signal: true, ref: true });

export class TimerWheel<T = unknown> {
  private readonly driver: WheelDriver<HierarchicalWheel>;
  private readonly onExpire: ((data: T) => void) | undefined;
  private readonly maxPending: number;
  /** maxPending while open, -1 once closed: start() checks both with one comparison. */
  private admitBelow: number;
  /** Per row: the callback or the lean path's data; the delay (refresh, intervals); flags. */
  private readonly targets: RowValues;
  private delays: Float64Array;
  private flags: Uint8Array;
  /** Rows with a callback pending or running; while none, expirations skip reading the flags. */
  private callbacks = 0;
  private readonly argsByRow = new Map<number, unknown[]>();
  /** Settle functions of pending sleep() promises, so close() can reject them. */
  private readonly sleepers = new Set<(err?: Error) => void>();
  /** Unref'd on a clock with native timers: a sleep holds the process with a timer of its own. */
  private readonly sleepsHold: boolean;
  /** Sleeps holding an unref'd wheel's process alive (as Node's do): one ref'd timer for all. */
  private refSleeps = 0;
  private keepAlive: ReturnType<typeof setInterval> | undefined;
  private closed = false;

  constructor(options: TimerWheelOptions<T> = {}) {
    checkOptions(options, TIMER_WHEEL_OPTIONS, 'new TimerWheel()', '{ resolution: 1 }');
    const resolution = checkOption(options.resolution ?? 1, 'resolution', Number.MIN_VALUE);
    this.maxPending = checkOption(options.maxPending ?? Infinity, 'maxPending', 0, Infinity);
    this.admitBelow = this.maxPending;
    const wheelSize = checkOption(options.wheelSize ?? 4096, 'wheelSize', 2, 4096, true);
    const capacity = checkOption(
      options.initialCapacity ?? 1024,
      'initialCapacity',
      1,
      2 ** 28,
      true,
    );
    if (options.onExpire !== undefined) checkCallback(options.onExpire, 'onExpire');
    const face = checkFaceOptions(options);
    const alignTicks = checkFlag(options.alignTicks, 'alignTicks');
    this.onExpire = options.onExpire;
    // A ManualClock holds no process, ref'd or not: neither do the sleeps on it.
    this.sleepsHold = face.unref && !(face.clock instanceof ManualClock);
    const wheel = new HierarchicalWheel({ wheelSize, initialCapacity: capacity });
    this.driver = new WheelDriver(wheel, { ...face, resolution, alignTicks }, (index) =>
      this.expire(index),
    );
    this.targets = new RowValues(wheel.entries.capacity);
    this.delays = new Float64Array(wheel.entries.capacity);
    this.flags = new Uint8Array(wheel.entries.capacity);
    wheel.entries.onGrow((size) => {
      this.targets.ensure(size);
      this.delays = grown(this.delays, size);
      this.flags = grown(this.flags, size);
    });
  }

  /** Calls `fn(...args)` once, `delayMs` from now, `this` the handle. */
  setTimeout<A extends unknown[]>(
    fn: (this: TimerHandle, ...args: A) => void,
    delayMs: number,
    ...args: A
  ): TimerHandle {
    checkCallback(fn, 'fn');
    return this.start(fn as Callback, checkDelay(delayMs), CALLBACK, args);
  }

  /** Calls `fn(...args)` every `periodMs`, timed from when the previous run fired. */
  setInterval<A extends unknown[]>(
    fn: (this: TimerHandle, ...args: A) => void,
    periodMs: number,
    ...args: A
  ): TimerHandle {
    checkCallback(fn, 'fn');
    return this.start(fn as Callback, checkPeriod(periodMs), CALLBACK | INTERVAL, args);
  }

  /** The lean path: `onExpire(data)` runs `delayMs` from now; `data` is stored as given. */
  schedule(delayMs: number, data: T): TimerHandle {
    this.requireOnExpire('schedule');
    return this.start(data, checkDelay(delayMs), 0, undefined);
  }

  /** The lean path at clock time `time`; a time in the past is due on the next tick. */
  scheduleAt(time: number, data: T): TimerHandle {
    this.requireOnExpire('scheduleAt');
    if (typeof time !== 'number' || !Number.isFinite(time)) {
      throw new TickwheelRangeError(
        'ERR_TICKWHEEL_INVALID_DELAY',
        `time must be a finite clock time in milliseconds, got ${String(time)}`,
      );
    }
    return this.start(data, 0, 0, undefined, time);
  }

  /** Cancels a pending timer or interval. True if it was pending; stale handles do nothing. */
  clearTimeout(handle: TimerHandle): boolean {
    const index = this.driver.cancelHandle(typeof handle === 'number' ? handle : asNumber(handle));
    if (index >= 0) this.forget(index);
    return index >= 0;
  }

  clearInterval(handle: TimerHandle): boolean {
    return this.clearTimeout(handle);
  }

  /** Re-arms a pending timer `delayMs` (default its own delay) from now. True if it was pending. */
  refresh(handle: TimerHandle, delayMs?: number): boolean {
    checkOpen(this.closed, CLOSED);
    const index = this.linkedRow(handle);
    if (index < 0) return false;
    const delay =
      delayMs === undefined
        ? this.delays[index]
        : this.flags[index] & INTERVAL
          ? checkPeriod(delayMs, 'delayMs')
          : checkDelay(delayMs);
    // Kept only once re-armed: a delay no tick can hold throws and leaves the timer as it was.
    this.driver.rearm(index, delay);
    this.delays[index] = delay;
    return true;
  }

  /** Resolves after `delayMs`; rejects on abort (AbortError) or close (ERR_TICKWHEEL_CLOSED). */
  sleep(delayMs: number, options: SleepOptions = {}): Promise<void> {
    const delay = checkDelay(delayMs);
    checkOptionsObject(options, 'sleep() options', '{ signal }');
    if (!onlyKnownOptions(options, SLEEP_OPTIONS)) {
      checkKnownOptions(options, SLEEP_OPTIONS, 'sleep()');
    }
    const ref = options.ref === undefined || checkFlag(options.ref, 'ref');
    checkOpen(this.closed, CLOSED);
    const signal = checkSignal(options.signal);
    if (signal?.aborted) return Promise.reject(new AbortError(signal.reason));
    // The one error that comes back as a rejection, as it would from any later point.
    if (this.driver.size >= this.admitBelow) return Promise.reject(this.maxPendingError());
    // Kept alive unless asked not to, even on an unref'd wheel (see refSleeps).
    const holds = this.sleepsHold && ref;
    let resolve!: () => void;
    let reject!: (err: Error) => void;
    const promise = new Promise<void>((onResolve, onReject) => {
      resolve = onResolve;
      reject = onReject;
    });
    const settle = (err?: Error) => {
      if (!this.sleepers.delete(settle)) return;
      if (holds && --this.refSleeps === 0) {
        clearInterval(this.keepAlive);
        this.keepAlive = undefined;
      }
      signal?.removeEventListener('abort', onAbort);
      if (err === undefined) resolve();
      else reject(err);
    };
    const onAbort = () => {
      this.clearTimeout(handle);
      settle(new AbortError(signal?.reason));
    };
    // Outside the promise: a delay no tick of the wheel can hold throws, as a bad delay does.
    const handle = this.start(() => settle(), delay, CALLBACK, []);
    this.sleepers.add(settle);
    if (holds && this.refSleeps++ === 0) this.keepAlive = setInterval(() => {}, 1 << 30);
    signal?.addEventListener('abort', onAbort, { once: true });
    return promise;
  }

  /** Whether the handle names a pending timer. */
  has(handle: TimerHandle): boolean {
    return this.linkedRow(handle) >= 0;
  }

  /** Clock time at which a pending timer is due (rounded up to its tick), or undefined. */
  deadline(handle: TimerHandle): number | undefined {
    const index = this.linkedRow(handle);
    if (index < 0) return undefined;
    this.driver.bindPending();
    return this.driver.timeOf(this.driver.entries.tick[index]);
  }

  get size(): number {
    return this.driver.size;
  }

  get resolution(): number {
    return this.driver.resolution;
  }

  /** Clock time of the next wake-up (no timer fires before it), Infinity when none is pending. */
  nextWakeupAt(): number {
    if (this.closed) return Infinity;
    this.driver.bindPending();
    const next = this.driver.wheel.nextDeadline();
    return next === Infinity ? Infinity : this.driver.timeOf(next);
  }

  /** True while the wheel runs expirations (so inside an onExpire or a timer's callback). */
  get expiring(): boolean {
    return this.driver.expiring;
  }

  /** Fires every timer whose tick has begun (late while the loop is busy): how many fired. */
  runDue(): number {
    return this.closed ? 0 : this.driver.runDue();
  }

  stats(): TimerWheelStats {
    const { driver } = this;
    const next = this.nextWakeupAt();
    return {
      pending: driver.size,
      fired: driver.fired,
      cancelled: driver.cancelled,
      scheduled: driver.scheduled,
      errors: driver.errors,
      capacity: driver.entries.capacity,
      levels: driver.wheel.levels,
      nextWakeup: next === Infinity ? null : next,
    };
  }

  /** HierarchicalWheel.snapshot. */
  wheelSnapshot(maxRows?: number): WheelSnapshot {
    this.driver.bindPending();
    return this.driver.wheel.snapshot(maxRows);
  }

  /** Cancels every timer and releases the clock. Scheduling afterwards throws. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.admitBelow = -1;
    this.driver.dispose((index) => {
      this.driver.cancelled++;
      this.forget(index);
      this.driver.wheel.release(index);
    });
    for (const settle of [...this.sleepers]) {
      settle(
        new TickwheelStateError('ERR_TICKWHEEL_CLOSED', 'the TimerWheel was closed during sleep()'),
      );
    }
  }

  private start(
    target: unknown,
    delay: number,
    flags: number,
    args: unknown[] | undefined,
    at?: number,
  ): number {
    if (this.driver.size >= this.admitBelow) this.refuse();
    let index: number;
    if (at === undefined) index = this.driver.add(delay);
    else {
      index = this.driver.addAt(at);
      // Kept for refresh(): the delay the due time stood for, on the reading it was placed at.
      delay = Math.max(0, at - this.driver.placedAt);
    }
    this.targets.set(index, target);
    this.delays[index] = delay;
    if (args !== undefined && args.length > 0) {
      this.argsByRow.set(index, args);
      flags |= HAS_ARGS;
    }
    this.flags[index] = flags;
    if (flags & CALLBACK) this.callbacks++;
    return this.driver.entries.handleOf(index);
  }

  private expire(index: number): void {
    const flags = this.callbacks === 0 ? 0 : this.flags[index];
    const target = this.targets.get(index);
    const driver = this.driver;
    if ((flags & CALLBACK) === 0) {
      this.targets.set(index, undefined);
      driver.wheel.release(index);
      (this.onExpire as (data: T) => void)(target as T);
      return;
    }
    const handle = driver.entries.handleOf(index);
    let args: unknown[] | undefined;
    if (flags & INTERVAL && this.rearmInterval(index)) {
      // Re-armed before it runs, so clearInterval() inside the callback works.
      if (flags & HAS_ARGS) args = this.argsByRow.get(index);
    } else {
      // Freed before it runs (the row may serve a timer the callback starts). Keeping it for a
      // refresh() from inside the callback, as Node allows, cost a quarter more per expiration.
      if (flags & HAS_ARGS) {
        args = this.argsByRow.get(index);
        this.argsByRow.delete(index);
      }
      this.targets.set(index, undefined);
      driver.wheel.release(index);
      this.callbacks--;
    }
    driver.settleAfter = driver.runQueues;
    if (args === undefined) callWith(target as Callback, handle);
    else Reflect.apply(target as Callback, handle, args);
  }

  /** Re-arms an interval as it fires; false (reported) when past the last tick: its last run. */
  private rearmInterval(index: number): boolean {
    try {
      this.driver.rearm(index, this.delays[index]);
      return true;
    } catch (err) {
      this.driver.report(err);
      return false;
    }
  }

  /** Drops what a row holds: the wheel keeps nothing of a timer that is gone. */
  private forget(index: number): void {
    this.targets.set(index, undefined);
    const flags = this.flags[index];
    if (flags & HAS_ARGS) this.argsByRow.delete(index);
    if (flags & CALLBACK) this.callbacks--;
  }

  private linkedRow(handle: TimerHandle): number {
    const entries = this.driver.entries;
    const index = entries.indexOf(typeof handle === 'number' ? handle : asNumber(handle));
    return index >= 0 && entries.isLinked(index) ? index : -1;
  }

  private requireOnExpire(method: string): void {
    if (this.onExpire === undefined) {
      throw invalidOption(
        `${method}() needs the onExpire option: new TimerWheel({ onExpire: (data) => ... })`,
      );
    }
  }

  private refuse(): never {
    checkOpen(this.closed, CLOSED);
    throw this.maxPendingError();
  }

  private maxPendingError(): TickwheelRangeError {
    return new TickwheelRangeError(
      'ERR_TICKWHEEL_MAX_PENDING',
      `${this.driver.size} timers are pending, the maxPending option allows ${this.maxPending}`,
    );
  }
}

/** A handle as boxed by a sloppy-mode callback's `this` (`clearInterval(this)`) names its timer. */
function asNumber(handle: unknown): number {
  return (handle instanceof Number ? handle.valueOf() : handle) as number;
}
