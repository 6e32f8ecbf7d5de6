/**
 * Clocks: where drivers read the time and how they get woken up. A driver keeps an alarm set for
 * its next expiration; the clock calls the alarm's target at or after that time, and the target
 * answers with its next deadline. One clock serves any number of drivers with one native timer
 * (SystemClock) or none (ManualClock).
 */

import { TickwheelTypeError } from '../errors.js';

export interface Clock {
  /** Monotonic time in milliseconds (fractions allowed). */
  now(): number;
}

/** The side of a driver a clock talks to. */
export interface AlarmTarget {
  /**
   * Called at or after the alarm's deadline with the clock's time. Returns the next deadline,
   * Infinity for none, or a time <= now to be called again once the event loop allows (how a
   * driver yields between batches). `atTurnStart`: called from the clock's own native timer or
   * immediate, with nothing else on the stack and Node's queues empty; only then may the target
   * run the nextTick and microtask queues between its callbacks (see WheelDriver).
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
  /** Sets the alarm for `deadline`, replacing any earlier setting. */
  set(deadline: number): void;
  clear(): void;
  /** Removes the alarm from its clock for good. */
  dispose(): void;
}

export interface AlarmOptions {
  /** Whether a set alarm keeps the process alive, like a ref'd native timer. Default true. */
  ref?: boolean;
}

/** A clock that can wake drivers: what TimerWheel and the other drivers need. */
export interface AlarmClock extends Clock {
  createAlarm(target: AlarmTarget, options?: AlarmOptions): Alarm;
  /**
   * A driver may bind a timer's delay to a later reading (never early: it comes after the
   * start): the time moves only with real time, or `bindPending()` is called before it moves.
   */
  readonly bindsLate?: boolean;
}

export function checkAlarmClock(clock: unknown): AlarmClock {
  const { now, createAlarm } = (clock ?? {}) as Partial<AlarmClock>;
  if (typeof clock !== 'object' || typeof now !== 'function' || typeof createAlarm !== 'function') {
    throw new TickwheelTypeError(
      'ERR_TICKWHEEL_INVALID_OPTION',
      'clock must be a SystemClock, a ManualClock, or an object with now() and createAlarm()',
    );
  }
  return clock as AlarmClock;
}

/** Bookkeeping shared by the clocks: alarms in creation order, each with its deadline. */
export class AlarmSet {
  readonly alarms: ClockAlarm[] = [];

  /** Called whenever an alarm is set, cleared or removed. */
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

  /** Calls each alarm due by `now` once, from the top of an event-loop turn (atTurnStart). */
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
 * The alarm of this package's clocks. Its `deadline` always reads what it was last set to (by
 * its driver, or from onAlarm's answer in the same step), so a reading before it means nothing
 * of the driver's is due (WheelDriver.runDue); another clock's alarm is not trusted with that.
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
