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

/**
 * The clocks' alarms. Only a set alarm is held strongly: a driver with nothing pending (a wheel
 * dropped without close()) is not kept alive by its clock, and a clock's scans see only the
 * alarms that are set. A clock that tells its targets of its moves (`tracksIdle`) also reaches
 * the alarms that are not set, through weak references.
 */
export class AlarmSet {
  /** The set alarms (deadline below Infinity), and one that is being called. */
  private readonly armed = new Set<ClockAlarm>();
  /** Every alarm made and not yet collected, when `tracksIdle`. */
  private readonly every: Array<WeakRef<ClockAlarm>> | undefined;
  /** `every` is swept of collected and disposed alarms when it grows to this length. */
  private sweepAt = 64;
  private made = 0;

  /** `changed`: an alarm was set, cleared or removed. */
  constructor(
    readonly changed: () => void,
    tracksIdle = false,
  ) {
    this.every = tracksIdle ? [] : undefined;
  }

  add(target: AlarmTarget, ref: boolean): ClockAlarm {
    const alarm = new ClockAlarm(this, target, ref, this.made++);
    const every = this.every;
    if (every !== undefined) {
      if (every.length >= this.sweepAt) this.sweep();
      every.push(new WeakRef(alarm));
    }
    return alarm;
  }

  /** Holds `alarm` while it is set, lets go of it once it is not. */
  placed(alarm: ClockAlarm): void {
    if (alarm.deadline === Infinity || alarm.disposed) this.armed.delete(alarm);
    else this.armed.add(alarm);
  }

  remove(alarm: ClockAlarm): void {
    this.armed.delete(alarm);
    this.changed();
  }

  /** The alarm due first (the earliest created among equals), or undefined when none is set. */
  earliest(): ClockAlarm | undefined {
    let best: ClockAlarm | undefined;
    for (const alarm of this.armed) {
      if (alarm.deadline === Infinity) continue;
      if (
        best === undefined ||
        alarm.deadline < best.deadline ||
        (alarm.deadline === best.deadline && alarm.order < best.order)
      ) {
        best = alarm;
      }
    }
    return best;
  }

  /** Calls `alarm`'s target (its deadline has come) and sets the alarm to the answer. */
  call(alarm: ClockAlarm, now: number, atTurnStart?: boolean): void {
    alarm.deadline = Infinity;
    try {
      alarm.deadline = alarm.target.onAlarm(now, atTurnStart);
    } finally {
      this.placed(alarm);
    }
  }

  /** Calls each alarm due by `now` once, at the top of an event-loop turn. */
  fireDue(now: number): void {
    // A copy, in creation order: a target may create or dispose alarms while it runs.
    for (const alarm of [...this.armed].sort(byOrder)) {
      if (alarm.deadline > now || alarm.disposed) continue;
      this.call(alarm, now, true);
    }
  }

  bindPending(): void {
    for (const alarm of this.live()) alarm.target.bindPending?.();
  }

  moved(): void {
    for (const alarm of this.live()) alarm.target.clockMoved?.();
  }

  /** Whether a set, ref'd alarm exists: what keeps the process alive. */
  anyRef(): boolean {
    for (const alarm of this.armed) if (alarm.ref && alarm.deadline !== Infinity) return true;
    return false;
  }

  /** The alarms not disposed (those not set only when `tracksIdle`), in creation order. */
  private live(): ClockAlarm[] {
    if (this.every === undefined) return [...this.armed].sort(byOrder);
    const alarms: ClockAlarm[] = [];
    for (const ref of this.every) {
      const alarm = ref.deref();
      if (alarm !== undefined && !alarm.disposed) alarms.push(alarm);
    }
    return alarms;
  }

  private sweep(): void {
    const every = this.every as Array<WeakRef<ClockAlarm>>;
    let kept = 0;
    for (const ref of every) {
      const alarm = ref.deref();
      if (alarm !== undefined && !alarm.disposed) every[kept++] = ref;
    }
    every.length = kept;
    this.sweepAt = Math.max(64, 2 * kept);
  }
}

function byOrder(a: ClockAlarm, b: ClockAlarm): number {
  return a.order - b.order;
}

/**
 * The alarm of this package's clocks: `deadline` always reads what it was last set to, so a
 * reading before it means nothing of the driver's is due (WheelDriver.runDue trusts only these).
 */
export class ClockAlarm implements Alarm {
  deadline = Infinity;
  disposed = false;

  constructor(
    private readonly owner: AlarmSet,
    readonly target: AlarmTarget,
    readonly ref: boolean,
    /** Creation order: of two alarms set for the same time, the older is called first. */
    readonly order: number,
  ) {}

  set(deadline: number): void {
    if (deadline === this.deadline) return;
    this.deadline = deadline;
    this.owner.placed(this);
    this.owner.changed();
  }

  clear(): void {
    this.set(Infinity);
  }

  dispose(): void {
    this.disposed = true;
    this.deadline = Infinity;
    this.owner.remove(this);
  }
}
