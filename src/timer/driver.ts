/**
 * The driver binds a timing wheel to a clock: delays to ticks, the clock's alarm kept set for the
 * next expiration, expirations in bounded batches, a failing callback kept from the others.
 * TimerWheel, HashedWheelTimer and SystemTimer are faces over it (`onExpire` says what a row is).
 *
 * Tick k is clock time `origin + k * resolution`. A timer due at time d gets the first tick at
 * or after d, and at least the tick after the current one: it never fires early, and a timer
 * scheduled from a callback never fires in the same tick (no livelock on zero delays).
 */

import {
  checkAlarmClock,
  defaultClock,
  type Alarm,
  type AlarmClock,
  type Clock,
} from '../clock/index.js';
import { ClockAlarm } from '../clock/clock.js';
import { TickwheelRangeError } from '../errors.js';
import { checkCallback, checkFlag, checkOption } from '../validate.js';
import { DETACHED, PENDING } from '../wheel/entries.js';
import type { EntryStore, TimingWheel } from '../wheel/index.js';

/** The options every face hands to its driver. */
export interface FaceOptions {
  /** Default: a SystemClock shared by every driver that is given no clock. */
  clock?: Clock;
  /** Errors thrown by callbacks (tasks). Default: reported as a process warning. */
  onError?: (err: unknown) => void;
  /** When true, pending timers do not keep the process alive (like `timeout.unref()`). */
  unref?: boolean;
  /**
   * Node's order: the nextTick and promise callbacks one callback queues run before the next.
   * Default false: callbacks due together run back to back, much cheaper in bulk (docs/timers.md).
   */
  nodeOrder?: boolean;
  /** Expirations run per batch before yielding to the event loop. Default 10,000. */
  maxBatch?: number;
}

export const FACE_OPTIONS = {
  clock: true,
  onError: true,
  unref: true,
  nodeOrder: true,
  maxBatch: true,
} as const satisfies Record<keyof FaceOptions, true>;

export interface DriverOptions extends FaceOptions {
  /** Milliseconds per tick. */
  resolution: number;
  alignTicks?: boolean;
}

const DEFAULT_MAX_BATCH = 10_000;

type CheckedFaceOptions = Omit<Required<FaceOptions>, 'clock' | 'onError'> & {
  clock: AlarmClock;
  onError: FaceOptions['onError'];
};

/** The options every face shares, checked, defaults filled in. */
export function checkFaceOptions(options: FaceOptions): CheckedFaceOptions {
  if (options.onError !== undefined) checkCallback(options.onError, 'onError');
  return {
    clock: checkAlarmClock(options.clock ?? defaultClock()),
    onError: options.onError,
    unref: checkFlag(options.unref, 'unref'),
    nodeOrder: checkFlag(options.nodeOrder, 'nodeOrder'),
    maxBatch: checkOption(options.maxBatch ?? DEFAULT_MAX_BATCH, 'maxBatch', 1, Infinity, true),
  };
}

/** Rows waiting for a clock reading at most (see `add`): a batch stays in the CPU's cache. */
export const BIND_BATCH = 256;

/** Past this many ticks from the last reading add() reads the clock: a late tick stays < 2^53. */
const LATE_BIND_TICKS = 2 ** 50;

/**
 * A SystemClock may have moved by any time since the last reading: late binding needs 2^52 ticks
 * to outlast a thousand years (7.0 us or more). A ManualClock says when it moves (clockMoved).
 */
const LATE_BIND_SPAN_MS = 1000 * 365.25 * 24 * 3600 * 1000;

/** Pending rows are bound in a promise's microtask: fake timers replace queueMicrotask. */
const SETTLED = Promise.resolve();

/** Steps that settle a rounded quotient's tick (off by two at most): past 2^53 a step may not. */
const SETTLE_STEPS = 4;

/**
 * Node's runNextTicks() (nextTick queue, then microtasks), reachable only as the undocumented
 * process._tickCallback. Under --pending-deprecation that is a wrapper that warns: not used.
 */
const runNextTicks: (() => void) | undefined = (() => {
  const tickCallback = (process as { _tickCallback?: unknown })._tickCallback;
  return typeof tickCallback === 'function' && tickCallback.name === 'runNextTicks'
    ? (tickCallback as () => void)
    : undefined;
})();

export class WheelDriver<W extends TimingWheel = TimingWheel> {
  readonly clock: AlarmClock;
  readonly wheel: W;
  readonly entries: EntryStore;
  readonly resolution: number;
  readonly origin: number;
  private readonly perTick: number;
  private readonly alarm: Alarm;
  private readonly maxBatch: number;
  private readonly onError: ((err: unknown) => void) | undefined;
  private readonly wantsNodeOrder: boolean;
  private readonly expireSafe: (index: number) => boolean;
  /** Inside onAlarm or runDue: the alarm is set when they end. */
  expiring = false;
  /** True inside an onAlarm from the top of an event-loop turn, with runNextTicks available. */
  runQueues = false;
  /** Set to `runQueues` by a face before a callback-style timer runs: its queues run after it. */
  settleAfter = false;
  private disposed = false;
  /** Rows started by `add` and not yet placed: PENDING, their delay in `entries.tick`. */
  private readonly unbound = new Int32Array(BIND_BATCH);
  private unboundCount = 0;
  private bindQueued = false;
  private readonly bindTask = (): void => {
    this.bindQueued = false;
    try {
      this.bindPending();
    } catch (err) {
      this.report(err);
    }
  };
  private readonly lateBindable: boolean;
  /** A ClockAlarm, whose deadline reads as set: runDue trusts it. */
  private readonly exactAlarms: boolean;
  /** Ticks from the origin at the latest reading: how far a late-bound delay may reach. */
  private lastTick = 0;
  fired = 0;
  cancelled = 0;
  scheduled = 0;
  errors = 0;

  constructor(wheel: W, options: DriverOptions, onExpire: (index: number) => void) {
    this.wheel = wheel;
    this.entries = wheel.entries;
    this.resolution = options.resolution;
    this.perTick = 1 / options.resolution;
    if (!Number.isFinite(this.perTick)) {
      throw new TickwheelRangeError(
        'ERR_TICKWHEEL_INVALID_OPTION',
        `a tick of ${options.resolution} ms is too short: its inverse is not a finite number`,
      );
    }
    this.clock = checkAlarmClock(options.clock ?? defaultClock());
    const now = this.clock.now();
    this.origin =
      options.alignTicks === true ? Math.floor(now / this.resolution) * this.resolution : now;
    this.maxBatch = options.maxBatch ?? DEFAULT_MAX_BATCH;
    this.onError = options.onError;
    this.wantsNodeOrder = options.nodeOrder === true;
    this.alarm = this.clock.createAlarm(this, { ref: options.unref !== true });
    this.exactAlarms = this.alarm instanceof ClockAlarm;
    this.lateBindable = 2 ** 52 * this.resolution >= LATE_BIND_SPAN_MS;
    // True ends the advance after this row, so onAlarm runs Node's queues between two advances:
    // an error thrown by a nextTick callback then unwinds no frame of the wheel.
    this.expireSafe = (index: number) => {
      this.fired++;
      try {
        onExpire(index);
      } catch (err) {
        this.report(err);
      }
      return this.settleAfter;
    };
  }

  tickDueAt(deadline: number): number {
    const now = this.read();
    return this.tickFor(now, deadline, deadline - now);
  }

  private tickFor(now: number, deadline: number, delayMs: number): number {
    const resolution = this.resolution;
    // A multiplication, not a (several times slower) division: the lines after settle the tick.
    let tick = Math.ceil((deadline - this.origin) * this.perTick);
    // Past 2^53 (or NaN from an overflow) no tick can hold it.
    if (!(tick <= Number.MAX_SAFE_INTEGER)) this.tooFar(delayMs);
    // A tick is defined by the time it begins at: settle on the first that begins at or after
    // the deadline, as the quotient rounds (by two ticks near 2^52 for some resolutions).
    for (let step = 0; step < SETTLE_STEPS && this.timeOf(tick) < deadline; step++) tick++;
    for (let step = 0; step < SETTLE_STEPS && this.timeOf(tick - 1) >= deadline; step++) tick--;
    // Only a delay shorter than a tick can land in the current tick (the common case skips this).
    if (delayMs < 2 * resolution) {
      const nowTick = this.tickContaining(now);
      if (tick <= nowTick) tick = nowTick + 1;
    }
    if (tick > Number.MAX_SAFE_INTEGER) this.tooFar(delayMs);
    return tick;
  }

  private tooFar(delayMs: number): never {
    throw new TickwheelRangeError(
      'ERR_TICKWHEEL_INVALID_DELAY',
      `delay of ${delayMs} ms is beyond what the timer can hold (2^53 ticks of ${this.resolution} ms)`,
    );
  }

  /** The last tick begun at `now`, settled so that tickContaining(timeOf(k)) === k. */
  tickContaining(now: number): number {
    let tick = Math.floor((now - this.origin) / this.resolution);
    for (let step = 0; step < SETTLE_STEPS && this.timeOf(tick + 1) <= now; step++) tick++;
    for (let step = 0; step < SETTLE_STEPS && this.timeOf(tick) > now; step++) tick--;
    return tick;
  }

  timeOf(tick: number): number {
    return this.origin + tick * this.resolution;
  }

  /** Timers in the wheel and waiting for a clock reading. */
  get size(): number {
    return this.wheel.size + this.unboundCount;
  }

  /**
   * A new row due `delayMs` from now. On a `bindsLate` clock it skips reading the clock (half of a
   * schedule's cost) and waits, PENDING, for the next reading (a microtask, the BIND_BATCH-th such
   * row, or any other read), which comes after the start: the row can be late, never early.
   */
  add(delayMs: number): number {
    if (!this.mayBindLate(delayMs)) {
      const now = this.read();
      return this.place(now, now + delayMs, delayMs);
    }
    const index = this.entries.allocate();
    this.scheduled++;
    this.pend(index, delayMs);
    return index;
  }

  private mayBindLate(delayMs: number): boolean {
    return (
      this.clock.bindsLate === true &&
      this.lateBindable &&
      delayMs * this.perTick + this.lastTick < LATE_BIND_TICKS
    );
  }

  private pend(index: number, delayMs: number): void {
    const entries = this.entries;
    entries.tick[index] = delayMs;
    entries.prev[index] = PENDING;
    const count = this.unboundCount;
    this.unbound[count] = index;
    this.unboundCount = count + 1;
    if (count + 1 === BIND_BATCH) this.bindPending();
    else if (!this.bindQueued) {
      this.bindQueued = true;
      void SETTLED.then(this.bindTask);
    }
  }

  /** Reads the clock, placing the rows waiting for a reading first (they came first). */
  private read(): number {
    const now = this.clock.now();
    if (this.unboundCount > 0) this.bindAt(now);
    else this.lastTick = (now - this.origin) * this.perTick;
    return now;
  }

  /** Places the rows waiting for a clock reading (see `add`) on a reading taken now. */
  bindPending(): void {
    if (this.unboundCount > 0) this.read();
  }

  /** A ManualClock's step: the last reading no longer bounds the time (see LATE_BIND_TICKS). */
  clockMoved(): void {
    this.lastTick = Infinity;
  }

  private bindAt(now: number): void {
    const count = this.unboundCount;
    this.unboundCount = 0;
    this.lastTick = (now - this.origin) * this.perTick;
    if (this.wheel.size === 0) this.catchUp(now);
    const { unbound, entries, wheel } = this;
    const ticks = entries.tick;
    let first = Infinity;
    for (let i = 0; i < count; i++) {
      const index = unbound[i];
      const delayMs = ticks[index];
      entries.prev[index] = DETACHED;
      const tick = this.tickFor(now, now + delayMs, delayMs);
      wheel.insert(index, tick);
      if (tick < first) first = tick;
    }
    this.armFor(first);
  }

  /** The reading addAt() placed its last row against (TimerWheel keeps its delay for refresh()). */
  placedAt = NaN;

  /** A new row due at clock time `deadline` (a past deadline is due on the next tick). */
  addAt(deadline: number): number {
    const now = (this.placedAt = this.read());
    return this.place(now, deadline, deadline - now);
  }

  private place(now: number, deadline: number, delayMs: number): number {
    if (this.wheel.size === 0) this.catchUp(now);
    const tick = this.tickFor(now, deadline, delayMs);
    const index = this.wheel.add(tick);
    this.scheduled++;
    this.armFor(tick);
    return index;
  }

  /**
   * An empty wheel stays at the tick it last processed: brought up to now before its next timer
   * goes in, a 5 ms timer after an hour idle lands on the first level, not one it cascades from.
   */
  private catchUp(now: number): void {
    if (!this.expiring && !this.disposed) this.wheel.idleTo(this.tickContaining(now));
  }

  /** Re-arms a row: a linked one binds late as `add` does; a detached or PENDING one reads now. */
  rearm(index: number, delayMs: number): void {
    const prev = this.entries.prev[index];
    if (prev !== DETACHED && prev !== PENDING && this.mayBindLate(delayMs)) {
      this.wheel.remove(index);
      this.pend(index, delayMs);
      return;
    }
    const now = this.read();
    const tick = this.tickFor(now, now + delayMs, delayMs);
    if (this.entries.isLinked(index)) this.wheel.reschedule(index, tick);
    else this.wheel.insert(index, tick);
    this.armFor(tick);
  }

  /** Unlinks and frees a linked (or PENDING) row. */
  cancel(index: number): void {
    if (this.entries.prev[index] === PENDING) this.bindPending();
    this.wheel.remove(index);
    this.wheel.release(index);
    this.cancelled++;
    // An empty driver must not keep the process alive.
    if (this.wheel.size === 0 && !this.expiring && !this.disposed) this.alarm.clear();
  }

  /** Cancels the pending timer a handle names: returns its row (now free), or -1 if stale. */
  cancelHandle(handle: number): number {
    const index = this.entries.indexOf(handle);
    if (index < 0 || !this.entries.isLinked(index)) return -1;
    this.cancel(index);
    return index;
  }

  /** Called by the clock (see AlarmTarget): fires at most one batch, names the next wake-up. */
  onAlarm(now: number, atTurnStart?: boolean): number {
    // `now` may have been read before another target's callbacks started these rows.
    this.bindPending();
    this.expiring = true;
    this.runQueues = this.wantsNodeOrder && atTurnStart === true && runNextTicks !== undefined;
    const nowTick = this.tickContaining(now);
    let completed = false;
    try {
      let left = this.maxBatch;
      do {
        left -= this.wheel.advance(nowTick, this.expireSafe, left);
        if (!this.settleAfter) break;
        this.settleAfter = false;
        // An error thrown by a nextTick callback is not the timer's: it goes on to Node's
        // uncaughtException, as it would from between two of Node's own timers.
        (runNextTicks as () => void)();
      } while (left > 0);
      // Rows the callbacks started go in before the next wake-up is named.
      this.bindPending();
      completed = true;
    } finally {
      this.expiring = false;
      this.runQueues = false;
      this.settleAfter = false;
      // A nextTick callback threw between two expirations: the wheel is consistent (as after a
      // batch cut short) and carries on from the next turn while the error propagates.
      if (!completed && !this.disposed) this.alarm.set(now);
    }
    const next = this.wheel.nextDeadline();
    // More is due than one batch took: called again once I/O has had its turn.
    if (next <= nowTick) return now;
    return next === Infinity ? Infinity : this.timeOf(next);
  }

  /** Fires every timer whose tick has begun, with no batch limit (the alarm is late when busy). */
  runDue(): number {
    if (this.expiring || this.disposed) return 0;
    const now = this.read();
    // The alarm is never set later than the next row's tick: a reading before it means nothing
    // is due, and the scan is skipped (the queue's take() asks before each take).
    if (this.exactAlarms && now < this.alarm.deadline) return 0;
    const nowTick = this.tickContaining(now);
    if (this.wheel.nextDeadline() > nowTick) return 0;
    this.expiring = true;
    let fired = 0;
    try {
      fired = this.wheel.advance(nowTick, this.expireSafe);
      this.bindPending();
    } finally {
      this.expiring = false;
      this.settleAfter = false;
    }
    // Timers those expirations started armed nothing (armFor skips while expiring).
    const next = this.wheel.nextDeadline();
    if (next !== Infinity) this.alarm.set(this.timeOf(next));
    return fired;
  }

  /** Unlinks every row, hands each to `onEntry` (which must release it), and leaves the clock. */
  dispose(onEntry: (index: number) => void): void {
    if (this.disposed) return;
    this.bindPending();
    this.disposed = true;
    this.wheel.drain(onEntry);
    this.alarm.dispose();
  }

  report(err: unknown): void {
    this.errors++;
    reportError(this.onError, err);
  }

  private armFor(tick: number): void {
    // Usually the alarm is set for an earlier time already: that comparison comes first.
    const time = this.timeOf(tick);
    if (time < this.alarm.deadline && !this.expiring && !this.disposed) this.alarm.set(time);
  }
}

/** Where an error a callback threw goes: to `onError`, else (or if that throws) a process warning. */
export function reportError(onError: ((err: unknown) => void) | undefined, err: unknown): void {
  if (onError !== undefined) {
    try {
      onError(err);
      return;
    } catch (hookErr) {
      err = hookErr;
    }
  }
  process.emitWarning(
    err instanceof Error ? err : new Error(`timer callback threw ${String(err)}`),
  );
}
