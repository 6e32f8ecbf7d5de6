/**
 * IdleTracker: Netty's IdleStateHandler states for many connections. `read()` and `write()` only
 * store the time; each item's one timer is armed for the earliest moment a state could become
 * idle, and when it fires, activity since re-arms it, else `onIdle` runs: one firing per period.
 *
 * For a state with period P and last activity L, events are due at L + P, L + 2P, ... until
 * activity moves L, each with `periods`, the whole periods since L (1 first: Netty's isFirst()).
 * Invariant: every event due at or before `checkedAt[row]`, the last check, has been reported,
 * so a check at `now` reports iff floor((now - L) / P) > floor((checkedAt - L) / P) (0 when the
 * activity came after the check).
 */

import { TickwheelRangeError, checkOpen } from '../errors.js';
import { checkCallback, checkOption, checkOptions, optionNames } from '../validate.js';
import type { Clock } from '../clock/index.js';
import type { TimerWheel } from '../timer/index.js';
import { EntryStore, grown } from '../wheel/index.js';
import { PATTERN_OPTIONS, patternWheel, type PatternOptions } from './pattern-wheel.js';

export type IdleState = 'reader-idle' | 'writer-idle' | 'all-idle';

/** A positive integer, inert once the item is untracked. */
export type IdleHandle = number;

export interface IdleTrackerOptions<T> extends PatternOptions {
  /** Idle after this long without `read()`, `write()`, either. 0 or omitted: not detected. */
  readerIdleMs?: number;
  writerIdleMs?: number;
  allIdleMs?: number;
  /**
   * Called for each idle event (reader, writer, all when due at once) with the whole idle
   * periods since that kind's last activity; what it throws goes to `onError`.
   */
  onIdle: (item: T, state: IdleState, periods: number, handle: IdleHandle) => void;
}

const READER = 0;
const WRITER = 1;
const ALL = 2;
const STATES: readonly IdleState[] = ['reader-idle', 'writer-idle', 'all-idle'];

const IDLE_OPTIONS = optionNames<IdleTrackerOptions<unknown>>({
  ...PATTERN_OPTIONS,
  readerIdleMs: true,
  writerIdleMs: true,
  allIdleMs: true,
  onIdle: true,
});

export class IdleTracker<T = unknown> {
  private readonly wheel: TimerWheel<number>;
  private readonly clock: Clock;
  private readonly report: (err: unknown) => void;
  private readonly onIdle: IdleTrackerOptions<T>['onIdle'];
  /** Per state: its period in ms, 0 when not detected. */
  private readonly periodOf: Float64Array;
  private readonly firstDelay: number;
  /** Rows and their handles only; the slab's arrays are not used. */
  private readonly rows: EntryStore;
  private items: Array<T | undefined> = [];
  private lastRead = new Float64Array(0);
  private lastWrite = new Float64Array(0);
  private checkedAt = new Float64Array(0);
  private timers = new Float64Array(0);
  private closed = false;

  constructor(options: IdleTrackerOptions<T>) {
    checkOptions(options, IDLE_OPTIONS, 'new IdleTracker()', '{ readerIdleMs: 60_000, onIdle }');
    checkCallback(options.onIdle, 'onIdle');
    this.onIdle = options.onIdle;
    this.periodOf = new Float64Array([
      checkOption(options.readerIdleMs ?? 0, 'readerIdleMs', 0),
      checkOption(options.writerIdleMs ?? 0, 'writerIdleMs', 0),
      checkOption(options.allIdleMs ?? 0, 'allIdleMs', 0),
    ]);
    const enabled = [...this.periodOf].filter((period) => period > 0);
    if (enabled.length === 0) {
      throw new TickwheelRangeError(
        'ERR_TICKWHEEL_INVALID_OPTION',
        'IdleTracker needs at least one of readerIdleMs, writerIdleMs and allIdleMs above 0',
      );
    }
    this.firstDelay = Math.min(...enabled);
    const { clock, wheel, report } = patternWheel<number>(options, (row) => this.check(row));
    this.wheel = wheel;
    this.clock = clock;
    this.report = report;
    this.rows = new EntryStore(options.initialCapacity);
    const grow = (size: number) => {
      this.items = grown(this.items, size);
      this.lastRead = grown(this.lastRead, size);
      this.lastWrite = grown(this.lastWrite, size);
      this.checkedAt = grown(this.checkedAt, size);
      this.timers = grown(this.timers, size);
    };
    grow(this.rows.capacity);
    this.rows.onGrow(grow);
  }

  /** Starts tracking `item` (any value: a socket, an id). Tracking counts as activity. */
  track(item: T): IdleHandle {
    checkOpen(this.closed, 'this IdleTracker is closed; create a new one to track items');
    const row = this.rows.allocate();
    const now = this.clock.now();
    this.items[row] = item;
    this.lastRead[row] = now;
    this.lastWrite[row] = now;
    this.checkedAt[row] = now;
    try {
      this.timers[row] = this.wheel.schedule(this.firstDelay, row);
    } catch (err) {
      // An idle time no tick of the wheel can hold from here: nothing stays tracked.
      this.items[row] = undefined;
      this.rows.release(row);
      throw err;
    }
    return this.rows.handleOf(row);
  }

  /** False (and nothing done) when the handle is not tracked. */
  read(handle: IdleHandle): boolean {
    return this.active(handle, true, false);
  }

  write(handle: IdleHandle): boolean {
    return this.active(handle, false, true);
  }

  /** A read and a write. */
  touch(handle: IdleHandle): boolean {
    return this.active(handle, true, true);
  }

  /** Stops tracking. True if the handle was tracked; its handle is inert from now on. */
  untrack(handle: IdleHandle): boolean {
    const row = this.rowOf(handle);
    if (row < 0) return false;
    this.wheel.clearTimeout(this.timers[row]);
    this.items[row] = undefined;
    this.rows.release(row);
    return true;
  }

  has(handle: IdleHandle): boolean {
    return this.rowOf(handle) >= 0;
  }

  item(handle: IdleHandle): T | undefined {
    const row = this.rowOf(handle);
    return row < 0 ? undefined : this.items[row];
  }

  get size(): number {
    return this.closed ? 0 : this.rows.live;
  }

  /** Stops tracking everything, with no events. Tracking afterwards throws. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.wheel.close();
    this.items = [];
  }

  private active(handle: IdleHandle, read: boolean, write: boolean): boolean {
    const row = this.rowOf(handle);
    if (row < 0) return false;
    const now = this.clock.now();
    if (read) this.lastRead[row] = now;
    if (write) this.lastWrite[row] = now;
    return true;
  }

  /** The row's timer fired: report what has become idle, then arm for the next moment. */
  private check(row: number): void {
    const handle = this.rows.handleOf(row);
    const now = this.clock.now();
    const checked = this.checkedAt[row];
    this.checkedAt[row] = now;
    for (let state = READER; state <= ALL; state++) {
      const period = this.periodOf[state];
      if (period === 0) continue;
      // Read afresh for each state: an earlier callback may have read or written.
      const last = this.lastActivity(row, state);
      const elapsed = now - last;
      if (elapsed < period) continue;
      const periods = wholePeriods(elapsed, period);
      const reported = checked > last ? wholePeriods(checked - last, period) : 0;
      if (periods <= reported) continue;
      try {
        this.onIdle(this.items[row] as T, STATES[state], periods, handle);
      } catch (err) {
        this.report(err);
      }
      if (this.rowOf(handle) !== row) return; // untracked, or the tracker closed
    }
    this.timers[row] = this.wheel.schedule(this.nextDue(row, now) - now, row);
  }

  /** The earliest time after `now` at which one of the row's states has an event due. */
  private nextDue(row: number, now: number): number {
    let due = Infinity;
    for (let state = READER; state <= ALL; state++) {
      const period = this.periodOf[state];
      if (period === 0) continue;
      const last = this.lastActivity(row, state);
      const elapsed = now - last;
      const next = last + (wholePeriods(elapsed, period) + 1) * period;
      if (next < due) due = next;
    }
    return due;
  }

  private lastActivity(row: number, state: number): number {
    if (state === READER) return this.lastRead[row];
    if (state === WRITER) return this.lastWrite[row];
    return Math.max(this.lastRead[row], this.lastWrite[row]);
  }

  private rowOf(handle: IdleHandle): number {
    return this.closed ? -1 : this.rows.indexOf(handle);
  }
}

/** Whole periods in `elapsed`, checked by multiplying back so that rounding never counts early. */
function wholePeriods(elapsed: number, period: number): number {
  if (elapsed < period) return 0;
  const periods = Math.floor(elapsed / period);
  return periods * period > elapsed ? periods - 1 : periods;
}
