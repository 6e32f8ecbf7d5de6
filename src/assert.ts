/**
 * Executable invariants: a TickwheelAssertionError is a bug in tickwheel, never a caller's
 * mistake. `assert` always checks (a broken invariant must stop before something wrong is
 * written); `debugAssert`, for hot paths, only with TICKWHEEL_DEBUG=1 (set by the tests). In a
 * step taken once a message, `if (DEBUG) assert(...)`: code not yet optimised (a burst in a new
 * process runs mostly so) still pays for a call to debugAssert, not for reading DEBUG.
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
