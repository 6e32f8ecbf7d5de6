/**
 * Clocks: a driver keeps an alarm set for its next expiration; the clock calls the alarm's target
 * at or after that time, and the target answers with its next deadline. One clock serves any
 * number of drivers with one native timer (SystemClock) or none (ManualClock).
 */

import { invalidOption } from '../validate.js';

export interface Clock {
  /** Monotonic time in milliseconds (fractions allowed). */
  now(): number;
}

/** The side of a driver a clock talks to. */
export interface AlarmTarget {
  /**
   * Called at or after the alarm's deadline: returns the next one, Infinity for none, or a time
   * <= now to be called again once the event loop allows (a driver yielding between batches).
   * `atTurnStart`: from the clock's own timer, nothing else on the stack, Node's queues empty.
   */
  onAlarm(now: number, atTurnStart?: boolean): number;
  /** Places timers waiting for a reading (`bindsLate`): called before a ManualClock moves. */
  bindPending?(): void;
  /** The clock's time moved by a step of its own (ManualClock); called after the move. */
  clockMoved?(): void;
}

export interface Alarm {
  /** The time the alarm is set for; Infinity when it is not set. */
  readonly deadline: number;
  set(deadline: number): void;
  clear(): void;
  /** Removes the alarm from its clock for good. */
  dispose(): void;
}

export interface AlarmOptions {
  /** A set alarm keeps the process alive. Default true. */
  ref?: boolean;
}

/** A clock that can wake drivers: what TimerWheel and the other drivers need. */
export interface AlarmClock extends Clock {
  createAlarm(target: AlarmTarget, options?: AlarmOptions): Alarm;
  /** A delay may be bound to a later reading: time moves only after `bindPending()`, or really. */
  readonly bindsLate?: boolean;
}

export function checkAlarmClock(clock: unknown): AlarmClock {
  const { now, createAlarm } = (clock ?? {}) as Partial<AlarmClock>;
  if (typeof clock !== 'object' || typeof now !== 'function' || typeof createAlarm !== 'function') {
    throw invalidOption(
      'clock must be a SystemClock, a ManualClock, or an object with now() and createAlarm()',
    );
  }
  return clock as AlarmClock;
}

/** The clocks' alarms, in creation order. */
export class AlarmSet {
  readonly alarms: ClockAlarm[] = [];

  /** `changed`: an alarm was set, cleared or removed. */
  constructor(readonly changed: () => void) {}

  add(target: AlarmTarget, ref: boolean): ClockAlarm {
    const alarm = new ClockAlarm(this, target, ref);
    this.alarms.push(alarm);
    return alarm;
  }

  remove(alarm: ClockAlarm): void {
    const at = this.alarms.indexOf(alarm);
    if (at >= 0) this.alarms.splice(at, 1);
    this.changed();
  }

  /** The alarm due first (the earliest created among equals), or undefined when none is set. */
  earliest(): ClockAlarm | undefined {
    let best: ClockAlarm | undefined;
    for (const alarm of this.alarms) {
      if (alarm.deadline !== Infinity && (best === undefined || alarm.deadline < best.deadline)) {
        best = alarm;
      }
    }
    return best;
  }

  /** Calls each alarm due by `now` once, at the top of an event-loop turn. */
  fireDue(now: number): void {
    // A copy: a target may create or dispose alarms while it runs.
    for (const alarm of this.alarms.slice()) {
      if (alarm.deadline > now) continue;
      alarm.deadline = Infinity;
      alarm.deadline = alarm.target.onAlarm(now, true);
    }
  }

  bindPending(): void {
    for (const alarm of this.alarms.slice()) alarm.target.bindPending?.();
  }

  moved(): void {
    for (const alarm of this.alarms) alarm.target.clockMoved?.();
  }

  /** Whether a set, ref'd alarm exists: what keeps the process alive. */
  anyRef(): boolean {
    for (const alarm of this.alarms) if (alarm.ref && alarm.deadline !== Infinity) return true;
    return false;
  }
}

/**
 * The alarm of this package's clocks: `deadline` always reads what it was last set to, so a
 * reading before it means nothing of the driver's is due (WheelDriver.runDue trusts only these).
 */
export class ClockAlarm implements Alarm {
  deadline = Infinity;

  constructor(
    private readonly owner: AlarmSet,
    readonly target: AlarmTarget,
    readonly ref: boolean,
  ) {}

  set(deadline: number): void {
    if (deadline === this.deadline) return;
    this.deadline = deadline;
    this.owner.changed();
  }

  clear(): void {
    this.set(Infinity);
  }

  dispose(): void {
    this.deadline = Infinity;
    this.owner.remove(this);
  }
}
