/**
 * What every pattern shares: it owns one TimerWheel on the lean path (a wheel has one
 * `onExpire`), one timer per item with the item's row (or object) as data: no closure per item.
 * Owning costs nothing: every wheel on a clock shares its one native timer.
 */

import { checkAlarmClock, defaultClock, type AlarmClock, type Clock } from '../clock/index.js';
import { checkCallback } from '../validate.js';
import { TimerWheel } from '../timer/index.js';
import { reportError } from '../timer/driver.js';

export interface PatternOptions {
  /** Default: the SystemClock shared by every wheel that is given no clock. */
  clock?: Clock;
  /** Milliseconds per tick of the pattern's wheel: events are at most this late. Default 1. */
  resolution?: number;
  /** When true, the pattern's pending timers do not keep the process alive. Default false. */
  unref?: boolean;
  /** Errors thrown by your callbacks. Default: reported as a process warning. */
  onError?: (err: unknown) => void;
  /** Items to make room for up front; storage doubles as needed. Default 1024. */
  initialCapacity?: number;
}

/** The names of PatternOptions. */
export const PATTERN_OPTIONS = {
  clock: true,
  resolution: true,
  unref: true,
  onError: true,
  initialCapacity: true,
} as const satisfies Record<keyof PatternOptions, true>;

/** The pattern's clock and wheel, and where callbacks' errors go. */
export function patternWheel<T>(
  options: PatternOptions,
  onExpire: (data: T) => void,
): { clock: AlarmClock; wheel: TimerWheel<T>; report: (err: unknown) => void } {
  const clock = checkAlarmClock(options.clock ?? defaultClock());
  if (options.onError !== undefined) checkCallback(options.onError, 'onError');
  const report = (err: unknown) => reportError(options.onError, err);
  const wheel = new TimerWheel<T>({
    clock,
    resolution: options.resolution,
    unref: options.unref,
    initialCapacity: options.initialCapacity,
    onError: report,
    onExpire,
  });
  return { clock, wheel, report };
}

export function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    value !== null &&
    (typeof value === 'object' || typeof value === 'function') &&
    typeof (value as PromiseLike<unknown>).then === 'function'
  );
}
