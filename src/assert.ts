/**
 * Executable invariants.
 *
 * `assert(condition, message)` always checks: for invariants on paths that are not hot (opening
 * a store, recovery, a state change that is already doing I/O), where a broken invariant must
 * stop the operation before it writes something wrong.
 *
 * `debugAssert(condition, message)` checks only when the process runs with `TICKWHEEL_DEBUG=1`
 * (the test suite sets it, see vitest.config.ts): for invariants on hot paths, such as a wheel's
 * slot links or a heap's order, where a check on every call would cost more than the call. The
 * flag is read once, when this module loads, so a hot path pays one branch on a constant.
 * A message that costs something to build is passed as a function.
 *
 * Both throw a TickwheelAssertionError (`ERR_TICKWHEEL_ASSERTION`): a bug in tickwheel, never a
 * caller's mistake, which gets its own named error and code instead.
 *
 * Reading an environment variable is not I/O: the root export stays free of it.
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
