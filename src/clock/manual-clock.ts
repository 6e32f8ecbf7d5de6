/**
 * ManualClock: virtual time for tests and simulations. Time moves only when told to, and
 * `advance` walks it from deadline to deadline, so each callback sees `now()` equal to its own
 * (tick-rounded) deadline and timers scheduled by callbacks within the span fire too, in order.
 */

import { TickwheelRangeError, TickwheelStateError } from '../errors.js';
import {
  AlarmSet,
  type Alarm,
  type AlarmClock,
  type AlarmOptions,
  type AlarmTarget,
} from './clock.js';

export class ManualClock implements AlarmClock {
  private time: number;
  private readonly alarms = new AlarmSet(() => {});
  private advancing = false;

  constructor(startMs = 0) {
    if (typeof startMs !== 'number' || !Number.isFinite(startMs)) {
      throw new TickwheelRangeError(
        'ERR_TICKWHEEL_INVALID_OPTION',
        `startMs must be a finite number, got ${String(startMs)}`,
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
    return this.alarms.earliest()?.deadline ?? Infinity;
  }

  /** Moves time forward by `ms`, firing everything that comes due on the way. */
  advance(ms: number): void {
    if (typeof ms !== 'number' || !(ms >= 0) || !Number.isFinite(ms)) {
      throw new TickwheelRangeError(
        'ERR_TICKWHEEL_INVALID_DELAY',
        `advance() takes a finite number of milliseconds >= 0, got ${String(ms)}`,
      );
    }
    this.advanceTo(this.time + ms);
  }

  /** Moves time forward to `ms`, firing everything that comes due on the way. */
  advanceTo(ms: number): void {
    if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < this.time) {
      throw new TickwheelRangeError(
        'ERR_TICKWHEEL_INVALID_DELAY',
        `advanceTo() takes a finite time at or after now (${this.time}), got ${String(ms)}`,
      );
    }
    if (this.advancing) {
      throw new TickwheelStateError(
        'ERR_TICKWHEEL_REENTRANT',
        'ManualClock.advance() was called from a callback it is running; advance from outside',
      );
    }
    this.advancing = true;
    try {
      for (
        let alarm = this.alarms.earliest();
        alarm !== undefined;
        alarm = this.alarms.earliest()
      ) {
        if (alarm.deadline > ms) break;
        if (alarm.deadline > this.time) this.time = alarm.deadline;
        alarm.deadline = Infinity;
        alarm.deadline = alarm.target.onAlarm(this.time);
      }
      this.time = ms;
    } finally {
      this.advancing = false;
    }
  }
}
