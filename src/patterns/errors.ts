/**
 * The two outcomes the patterns report as errors: a deadline that passed (TimeoutError) and a
 * lease that is no longer known to be held (LeaseLostError). Both are TickwheelErrors with a
 * `code`; bad arguments keep using TickwheelTypeError / RangeError / StateError.
 */

import { TickwheelError } from '../errors.js';

/**
 * A deadline passed before the work settled: a registered request, a `withDeadline` promise or
 * a lease renewal. `timeoutMs` is the time that was allowed.
 */
export class TimeoutError extends TickwheelError {
  readonly timeoutMs: number;
  constructor(message: string, timeoutMs: number) {
    super('ERR_TICKWHEEL_TIMEOUT', message);
    this.name = 'TimeoutError';
    this.timeoutMs = timeoutMs;
  }
}

/**
 * Makes an error without capturing a stack, for errors raised by a timer or a keeper: their
 * stack would only show tickwheel's expiry loop, never the caller's code, and capturing it is
 * most of their cost (about 5 µs, which a million requests timing out together would feel).
 * Node does the same for some of its own errors. `stack` is then just the name and message.
 */
export function stackless<E extends Error>(make: () => E): E {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return make();
  } finally {
    Error.stackTraceLimit = limit;
  }
}

/**
 * A lease can no longer be trusted to be held: a renewal failed, answered `false`, or did not
 * settle in time, or its keeper was closed. `cause` says which.
 */
export class LeaseLostError extends TickwheelError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('ERR_TICKWHEEL_LEASE_LOST', message, options);
    this.name = 'LeaseLostError';
  }
}
