/**
 * What every pattern shares: it owns one TimerWheel on the lean path (a wheel has one
 * `onExpire`), one timer per item with the item's row (or object) as data: no closure per item.
 * Owning costs nothing: every wheel on a clock shares its one native timer.
 */

import { checkAlarmClock, defaultClock, type AlarmClock } from '../clock/index.js';
import { checkCallback } from '../validate.js';
import { TimerWheel, type TimerWheelOptions } from '../timer/index.js';
import { reportError } from '../timer/driver.js';

/** The options of the pattern's own wheel: `resolution` is how late its events may be. */
export type PatternOptions = Pick<
  TimerWheelOptions,
  'clock' | 'resolution' | 'unref' | 'onError' | 'initialCapacity'
>;

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
