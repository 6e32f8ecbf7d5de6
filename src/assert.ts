/**
 * Executable invariants; both throw a TickwheelAssertionError, a bug in tickwheel, never a
 * caller's mistake. `assert` always checks, for paths that are not hot, where a broken invariant
 * must stop before something wrong is written. `debugAssert` checks only with TICKWHEEL_DEBUG=1
 * (set by the tests), for hot paths: the flag is read once, so they pay one branch on a
 * constant. A message that costs something to build is passed as a function.
 */

import { TickwheelError } from './errors.js';

export const DEBUG: boolean =
  typeof process === 'object' && process !== null && process.env?.TICKWHEEL_DEBUG === '1';

export class TickwheelAssertionError extends TickwheelError<'ERR_TICKWHEEL_ASSERTION'> {
  constructor(message: string) {
    super('ERR_TICKWHEEL_ASSERTION', message);
    this.name = 'TickwheelAssertionError';
  }
}

export function assert(condition: unknown, message: string | (() => string)): asserts condition {
  if (!condition) {
    throw new TickwheelAssertionError(typeof message === 'string' ? message : message());
  }
}

export function debugAssert(
  condition: unknown,
  message: string | (() => string),
): asserts condition {
  if (DEBUG) assert(condition, message);
}
