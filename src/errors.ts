/**
 * Errors thrown by tickwheel. Each carries a stable `code` so callers can branch on it without
 * parsing messages, in the style of Node's own `ERR_*` codes.
 */

export type TickwheelErrorCode =
  | 'ERR_TICKWHEEL_INVALID_DELAY'
  | 'ERR_TICKWHEEL_INVALID_CALLBACK'
  | 'ERR_TICKWHEEL_INVALID_OPTION'
  | 'ERR_TICKWHEEL_MAX_PENDING'
  | 'ERR_TICKWHEEL_CLOSED'
  | 'ERR_TICKWHEEL_TIMER_STOPPED'
  | 'ERR_TICKWHEEL_CAPACITY'
  | 'ERR_TICKWHEEL_REENTRANT'
  | 'ERR_TICKWHEEL_INVALID_MESSAGE'
  | 'ERR_TICKWHEEL_INVALID_TOPIC'
  | 'ERR_TICKWHEEL_INVALID_ID'
  | 'ERR_TICKWHEEL_PAYLOAD_TOO_LARGE'
  | 'ERR_TICKWHEEL_LOCKED'
  | 'ERR_TICKWHEEL_IO'
  | 'ERR_TICKWHEEL_CORRUPT'
  | 'ERR_TICKWHEEL_FORMAT'
  | 'ERR_TICKWHEEL_TIMEOUT'
  | 'ERR_TICKWHEEL_DUPLICATE_ID'
  | 'ERR_TICKWHEEL_LEASE_LOST';

interface CodedError {
  readonly code: TickwheelErrorCode;
}

/** A value of the wrong type: a delay that is not a number, a callback that is not a function. */
export class TickwheelTypeError extends TypeError implements CodedError {
  readonly code: TickwheelErrorCode;
  constructor(code: TickwheelErrorCode, message: string) {
    super(message);
    this.name = 'TickwheelTypeError';
    this.code = code;
  }
}

/** A number out of range: NaN or infinite delays, too many pending timers. */
export class TickwheelRangeError extends RangeError implements CodedError {
  readonly code: TickwheelErrorCode;
  constructor(code: TickwheelErrorCode, message: string) {
    super(message);
    this.name = 'TickwheelRangeError';
    this.code = code;
  }
}

/** An operation on a timer that has been closed, stopped or shut down. */
export class TickwheelStateError extends Error implements CodedError {
  readonly code: TickwheelErrorCode;
  constructor(code: TickwheelErrorCode, message: string) {
    super(message);
    this.name = 'TickwheelStateError';
    this.code = code;
  }
}

/**
 * Validates a delay in milliseconds and returns it normalised: negative delays become 0, like
 * Node's `setTimeout`. Anything that is not a finite number is refused; large delays are kept
 * as they are (Node's own timers turn anything above 2^31-1 ms into 1 ms).
 */
export function checkDelay(delayMs: unknown, what = 'delayMs'): number {
  if (typeof delayMs !== 'number') {
    throw new TickwheelTypeError(
      'ERR_TICKWHEEL_INVALID_DELAY',
      `${what} must be a number of milliseconds, got ${describe(delayMs)}`,
    );
  }
  if (!Number.isFinite(delayMs)) {
    throw new TickwheelRangeError(
      'ERR_TICKWHEEL_INVALID_DELAY',
      `${what} must be a finite number of milliseconds, got ${delayMs}`,
    );
  }
  return delayMs > 0 ? delayMs : 0;
}

/** Validates an interval period: a finite number above 0. */
export function checkPeriod(periodMs: unknown, what = 'periodMs'): number {
  const period = checkDelay(periodMs, what);
  if (period <= 0) {
    throw new TickwheelRangeError(
      'ERR_TICKWHEEL_INVALID_DELAY',
      `${what} must be above 0 ms, got ${String(periodMs)}`,
    );
  }
  return period;
}

export function checkCallback(fn: unknown, what = 'callback'): void {
  if (typeof fn !== 'function') {
    throw new TickwheelTypeError(
      'ERR_TICKWHEEL_INVALID_CALLBACK',
      `${what} must be a function, got ${describe(fn)}`,
    );
  }
}

/** Validates a numeric option: an integer (when asked) within [min, max]. */
export function checkOption(
  value: unknown,
  name: string,
  min: number,
  max = Number.MAX_SAFE_INTEGER,
  integer = false,
): number {
  if (
    typeof value !== 'number' ||
    Number.isNaN(value) ||
    value < min ||
    value > max ||
    (integer && !Number.isInteger(value))
  ) {
    const kind = integer ? 'an integer' : 'a number';
    throw new TickwheelRangeError(
      'ERR_TICKWHEEL_INVALID_OPTION',
      `${name} must be ${kind} from ${min} to ${max}, got ${describe(value)}`,
    );
  }
  return value;
}

/** An optional boolean option: undefined is false, anything but a boolean is refused. */
export function checkFlag(value: unknown, name: string): boolean {
  if (value === undefined) return false;
  if (typeof value !== 'boolean') {
    throw new TickwheelTypeError(
      'ERR_TICKWHEEL_INVALID_OPTION',
      `${name} must be true or false, got ${describe(value)}`,
    );
  }
  return value;
}

export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'string') return `the string ${JSON.stringify(value)}`;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') {
    return `${typeof value} ${String(value)}`;
  }
  return typeof value;
}

/**
 * Rejection of an aborted `sleep()`: the same name and code as Node's own timers/promises, so
 * code that checks `err.name === 'AbortError'` works unchanged. `cause` is the signal's reason.
 */
export class AbortError extends Error {
  readonly code = 'ABORT_ERR';
  constructor(cause?: unknown) {
    super('The operation was aborted', { cause });
    this.name = 'AbortError';
  }
}
