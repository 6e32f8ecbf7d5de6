/**
 * SystemClock: performance.now() and one native timer for every alarm on the clock, armed for the
 * earliest; an idle clock has none. Node's timers may wake early (the loop's cached time): the
 * drivers compare against now(), so nothing fires early, and the clock re-arms for the rest.
 */

import { performance as nodePerformance } from 'node:perf_hooks';
import { checkFlag, checkOptions, optionNames } from '../validate.js';
import {
  AlarmSet,
  type Alarm,
  type AlarmClock,
  type AlarmOptions,
  type AlarmTarget,
} from './clock.js';

/**
 * Node's `globalThis.performance` is a lazy accessor (10 ns a read, a tenth of a schedule): made a
 * data property of the same object. now() still reads the global, so fake timers still work.
 */
function settlePerformanceGlobal(): void {
  const descriptor = Object.getOwnPropertyDescriptor(globalThis, 'performance');
  if (descriptor?.get === undefined || descriptor.configurable !== true) return;
  const value: unknown = descriptor.get.call(globalThis);
  // Only Node's own object: a getter some environment put there keeps its behaviour.
  if (value !== nodePerformance) return;
  Object.defineProperty(globalThis, 'performance', {
    value,
    writable: true,
    configurable: true,
    enumerable: descriptor.enumerable === true,
  });
}

/** Node's longest setTimeout; longer waits are taken in steps. */
const MAX_NATIVE_DELAY = 2 ** 31 - 1;
/** Below this much time to a deadline the clock waits with setImmediate, above with a timer. */
const SPIN_MS = 0.25;

/**
 * Date.now() is whole ms, up to 1 ms behind the time it reads: a clock with fractions is ahead
 * of it just before each whole ms unless it trails the anchor by 1 ms (and by the rounding of
 * two sums of epoch ms, 2^-11 ms each at most).
 */
const EPOCH_LAG_MS = 1 + 2 ** -10;

export interface SystemClockOptions {
  /** Time in Unix epoch ms, anchored to the wall clock once: monotonic, never ahead of it. */
  epoch?: boolean;
}

const SYSTEM_CLOCK_OPTIONS = optionNames<SystemClockOptions>({ epoch: true });

export class SystemClock implements AlarmClock {
  private readonly offset: number;
  /** Not under fake timers (vi/jest.useFakeTimers): their time jumps between synchronous calls. */
  get bindsLate(): boolean {
    return globalThis.performance === nodePerformance;
  }

  constructor(options: SystemClockOptions = {}) {
    checkOptions(options, SYSTEM_CLOCK_OPTIONS, 'new SystemClock()', '{ epoch: true }');
    const epoch = checkFlag(options.epoch, 'epoch');
    settlePerformanceGlobal();
    // Date.now() first, then performance.now(), less EPOCH_LAG_MS: the clock can only trail the
    // wall clock, never lead it. performance.timeOrigin can be ms ahead of Date.now() on a busy
    // machine, for the process's whole life: a delay queue would deliver before deliverAt.
    this.offset = epoch ? Date.now() - EPOCH_LAG_MS - performance.now() : 0;
  }

  private readonly alarms = new AlarmSet(() => this.rearm());
  private timer: ReturnType<typeof setTimeout> | undefined;
  private immediate: ReturnType<typeof setImmediate> | undefined;
  /** What the native timer (or immediate) is armed for; Infinity when nothing is. */
  private armedFor = Infinity;
  private firing = false;
  private readonly onNative = (): void => this.fire();

  now(): number {
    return this.offset + performance.now();
  }

  createAlarm(target: AlarmTarget, options: AlarmOptions = {}): Alarm {
    return this.alarms.add(target, options.ref ?? true);
  }

  private fire(): void {
    this.disarm(); // whichever fired: clearing it is harmless
    this.firing = true;
    try {
      this.alarms.fireDue(this.now());
    } finally {
      this.firing = false;
      this.rearm();
    }
  }

  private rearm(): void {
    if (this.firing) return;
    const first = this.alarms.earliest();
    if (first === undefined) {
      this.disarm();
      return;
    }
    // A native timer armed earlier than needed is kept: it wakes, finds nothing due, re-arms.
    if (first.deadline < this.armedFor) {
      this.disarm();
      this.armedFor = first.deadline;
      const delay = first.deadline - this.now();
      // Under SPIN_MS away (or a driver yielding between batches): the next turn of the loop,
      // while a ref'd alarm holds the process anyway. Unref'd alarms alone get a timer (at most
      // 1 ms more): a ref'd immediate would hold the process, and an unref'd one does not wake
      // libuv's poll phase. Further, even under 1 ms, a timer: spinning costs a core under load.
      const ref = this.alarms.anyRef();
      if (delay < SPIN_MS && ref) {
        this.immediate = setImmediate(this.onNative);
      } else {
        this.timer = setTimeout(this.onNative, Math.min(Math.ceil(delay), MAX_NATIVE_DELAY));
        if (!ref) this.timer.unref();
      }
      return;
    }
    this.followRef();
  }

  /** The native timer follows the alarms' ref state (an immediate runs on the next turn). */
  private followRef(): void {
    if (this.timer === undefined) return;
    if (this.alarms.anyRef()) this.timer.ref();
    else this.timer.unref();
  }

  private disarm(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    if (this.immediate !== undefined) clearImmediate(this.immediate);
    this.timer = undefined;
    this.immediate = undefined;
    this.armedFor = Infinity;
  }
}

let shared: SystemClock | undefined;

/** The SystemClock drivers use when no clock is given: one native timer for all of them. */
export function defaultClock(): SystemClock {
  shared ??= new SystemClock();
  return shared;
}
