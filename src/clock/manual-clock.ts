/**
 * ManualClock: virtual time. `advance` walks from deadline to deadline, so each callback sees
 * `now()` at its own deadline and timers started within the span fire too, in order, back to
 * back; `advanceAsync` runs each deadline's callbacks in an event-loop turn of their own.
 */

import { TickwheelRangeError, TickwheelStateError } from '../errors.js';
import { describe } from '../validate.js';
import {
  AlarmSet,
  type Alarm,
  type AlarmClock,
  type AlarmOptions,
  type AlarmTarget,
} from './clock.js';

export class ManualClock implements AlarmClock {
  private time: number;
  private readonly alarms = new AlarmSet(() => {}, true);
  private advancing = false;
  readonly bindsLate: boolean = true;

  constructor(startMs = 0) {
    if (typeof startMs !== 'number' || !Number.isFinite(startMs)) {
      throw new TickwheelRangeError(
        'ERR_TICKWHEEL_INVALID_OPTION',
        `startMs must be a finite number, got ${describe(startMs)}`,
      );
    }
    this.time = startMs;
  }

  now(): number {
    return this.time;
  }

  createAlarm(target: AlarmTarget, _options?: AlarmOptions): Alarm {
    return this.alarms.add(target, true);
  }

  /** The earliest time any driver on this clock wants to be woken, or Infinity. */
  nextDeadline(): number {
    this.alarms.bindPending();
    return this.alarms.earliest()?.deadline ?? Infinity;
  }

  /** Moves time forward by `ms`, firing everything due on the way. */
  advance(ms: number): void {
    this.walk(this.begin(ms, 'advance', true));
  }

  /** advance() to the time `ms`. */
  advanceTo(ms: number): void {
    this.walk(this.begin(ms, 'advanceTo', false));
  }

  private walk(ms: number): void {
    try {
      for (;;) {
        // Timers started so far (also by the callbacks just run) are placed before time moves.
        this.alarms.bindPending();
        const alarm = this.alarms.earliest();
        if (alarm === undefined || alarm.deadline > ms) break;
        if (alarm.deadline > this.time) this.moveTo(alarm.deadline);
        this.alarms.call(alarm, this.time);
      }
      this.moveTo(ms);
    } finally {
      this.advancing = false;
    }
  }

  /** advance() with each deadline's callbacks in an event-loop turn of their own (see above). */
  advanceAsync(ms: number): Promise<void> {
    return this.walkAsync(this.begin(ms, 'advanceAsync', true));
  }

  /** advanceTo() with the callbacks run as advanceAsync() runs them. */
  advanceToAsync(ms: number): Promise<void> {
    return this.walkAsync(this.begin(ms, 'advanceToAsync', false));
  }

  private async walkAsync(to: number): Promise<void> {
    try {
      while (await new Promise<boolean>((resolve) => setImmediate(() => this.step(to, resolve)))) {
        // Each step is a turn of the event loop: what its callbacks queued has run by now.
      }
      this.moveTo(to);
    } finally {
      this.advancing = false;
    }
  }

  /**
   * One turn of advanceAsync: fires every alarm due at the next deadline within the span, at the
   * top of an immediate (so `atTurnStart` holds); `more` says whether there was one.
   */
  private step(to: number, more: (fired: boolean) => void): void {
    let fired = false;
    try {
      this.alarms.bindPending();
      const first = this.alarms.earliest();
      if (first === undefined || first.deadline > to) return;
      fired = true;
      if (first.deadline > this.time) this.moveTo(first.deadline);
      this.alarms.fireDue(this.time);
    } finally {
      more(fired);
    }
  }

  /** Moves time: targets place the timers started so far first, and hear of the move after. */
  private moveTo(time: number): void {
    if (time === this.time) return;
    this.alarms.bindPending();
    this.time = time;
    this.alarms.moved();
  }

  /**
   * Starts an advance to the time `ms` names (a finite span of 0 or more when `span`, else a
   * finite time at or after now): that time. One advance at a time.
   */
  private begin(ms: number, method: string, span: boolean): number {
    if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < (span ? 0 : this.time)) {
      throw new TickwheelRangeError(
        'ERR_TICKWHEEL_INVALID_DELAY',
        span
          ? `${method}() takes a finite number of milliseconds >= 0, got ${String(ms)}`
          : `${method}() takes a finite time at or after now (${this.time}), got ${String(ms)}`,
      );
    }
    if (this.advancing) {
      throw new TickwheelStateError(
        'ERR_TICKWHEEL_REENTRANT',
        `ManualClock.${method}() was called while an advance of this clock is running (from ` +
          'one of its callbacks, or during advanceAsync()); advance from outside, one at a time',
      );
    }
    this.advancing = true;
    return span ? this.time + ms : ms;
  }
}
