import { TickwheelError } from '../errors.js';

/** A deadline passed: of a request, a `withDeadline` promise or a lease renewal. */
export class TimeoutError extends TickwheelError {
  readonly timeoutMs: number;
  constructor(message: string, timeoutMs: number) {
    super('ERR_TICKWHEEL_TIMEOUT', message);
    this.name = 'TimeoutError';
    this.timeoutMs = timeoutMs;
  }
}

/**
 * Makes an error without a stack, for errors raised by a timer: the stack would only show the
 * expiry loop, and capturing it is most of their cost (5 µs, felt by a million at once).
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

/** A lease can no longer be trusted to be held; `cause` says why. */
export class LeaseLostError extends TickwheelError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('ERR_TICKWHEEL_LEASE_LOST', message, options);
    this.name = 'LeaseLostError';
  }
}
