/**
 * SystemClock: real monotonic time (performance.now()) and one native timer for all the alarms
 * of all the drivers that share the clock, armed for the earliest of them. Nothing polls: an
 * idle clock has no timer at all, and a busy one wakes once per distinct deadline.
 *
 * Node's timers run on the event loop's cached millisecond time and may wake a fraction of a
 * millisecond before the monotonic deadline. The clock then waits out the rest with a 1 ms
 * timer, or with setImmediate when under a quarter of a millisecond is left; drivers never fire
 * early either way, since they compare against now() themselves.
 */

import { performance as nodePerformance } from 'node:perf_hooks';
import {
  AlarmSet,
  type Alarm,
  type AlarmClock,
  type AlarmOptions,
  type AlarmTarget,
} from './clock.js';

/**
 * Node defines `globalThis.performance` as a lazy accessor, and reading it through that
 * accessor costs about 10 ns, a tenth of a whole schedule. Once the clock is in use it is
 * redefined as a plain data property holding the same object (its setter would only store the
 * value behind the accessor). The global is still read on every now(), so fake timers that
 * replace `performance` (vi/jest.useFakeTimers) are still followed; only the accessor's cost goes.
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

/** The longest delay Node's setTimeout honours; longer waits are taken in steps. */
const MAX_NATIVE_DELAY = 2 ** 31 - 1;
/** Below this much time to a deadline the clock waits with setImmediate, above with a timer. */
const SPIN_MS = 0.25;

export interface SystemClockOptions {
  /**
   * Report time as Unix epoch milliseconds instead of milliseconds since the process started.
   * Still monotonic: it is anchored to the wall clock once, when the clock is made, and does not
   * follow later wall-clock steps. It never runs ahead of Date.now(), so a deadline given as
   * epoch ms is never reached before the wall clock reaches it.
   */
  epoch?: boolean;
}

export class SystemClock implements AlarmClock {
  private readonly offset: number;
  /**
   * Its time moves only with real time, so a timer may wait for a later reading (AlarmClock);
   * not while fake timers stand in for `performance` (vi/jest.useFakeTimers), whose time jumps
   * from one synchronous call to the next: a timer started before such a jump is read at once.
   */
  get bindsLate(): boolean {
    return globalThis.performance === nodePerformance;
  }

  constructor(options: SystemClockOptions = {}) {
    settlePerformanceGlobal();
    // Date.now() first, then performance.now(): the clock can then only trail the wall clock
    // (by under 1 ms), never lead it. Not performance.timeOrigin: in a process started on a busy
    // machine it can be several ms ahead of Date.now() (18 ms seen), for the process's whole
    // life, and a delay queue on such a clock delivered messages before their deliverAt.
    this.offset = options.epoch === true ? Date.now() - performance.now() : 0;
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
    this.timer = undefined;
    this.immediate = undefined;
    this.armedFor = Infinity;
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
      // Due now (or a driver yielding between batches), or a sliver away: the next turn of the
      // loop. Further away, even under a millisecond, a 1 ms timer: spinning on setImmediate
      // through the last millisecond before every deadline costs a core under steady load.
      if (delay < SPIN_MS) {
        this.immediate = setImmediate(this.onNative);
      } else {
        this.timer = setTimeout(this.onNative, Math.min(Math.ceil(delay), MAX_NATIVE_DELAY));
      }
    }
    // Only the native timer follows the alarms' ref state. An immediate stays ref'd: libuv's
    // poll phase does not wait for unref'd immediates, so an unref'd one would run only when
    // some other event wakes the loop (seconds late). It runs on the next turn anyway, so it
    // cannot hold an idle process open.
    if (this.timer !== undefined) {
      if (this.alarms.anyRef()) this.timer.ref();
      else this.timer.unref();
    }
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
