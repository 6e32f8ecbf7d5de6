/**
 * The argument checks of every layer: a TickwheelTypeError or TickwheelRangeError whose code names
 * what was wrong and whose message says what to pass. No I/O, no dependencies.
 */

import { TickwheelRangeError, TickwheelTypeError } from './errors.js';
import { closest } from './spelling.js';

/** A delay in ms: negative as 0 like Node's, not finite refused, large kept (Node's make it 1). */
export function checkDelay(delayMs: unknown, what = 'delayMs'): number {
  // A few bytecodes, so that it inlines into every schedule path: x - x is 0 only if finite.
  if (typeof delayMs === 'number' && delayMs - delayMs === 0) return delayMs > 0 ? delayMs : 0;
  return badDelay(delayMs, what);
}

function badDelay(delayMs: unknown, what: string): never {
  if (typeof delayMs !== 'number') {
    throw new TickwheelTypeError(
      'ERR_TICKWHEEL_INVALID_DELAY',
      `${what} must be a number of milliseconds, got ${describe(delayMs)}`,
    );
  }
  throw new TickwheelRangeError(
    'ERR_TICKWHEEL_INVALID_DELAY',
    `${what} must be a finite number of milliseconds, got ${delayMs}`,
  );
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

/** The error of an option that is not what it must be; `message` says what to pass. */
export function invalidOption(message: string): TickwheelTypeError {
  return new TickwheelTypeError('ERR_TICKWHEEL_INVALID_OPTION', message);
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
    // Number.MIN_VALUE as the least: any number above 0.
    const range =
      min === Number.MIN_VALUE
        ? `above 0${max === Number.MAX_SAFE_INTEGER ? '' : ` and at most ${max}`}`
        : `from ${min} to ${max}`;
    throw new TickwheelRangeError(
      'ERR_TICKWHEEL_INVALID_OPTION',
      `${name} must be ${kind} ${range}, got ${describe(value)}`,
    );
  }
  return value;
}

/** An options argument that is an object, not a TypeError from reading it (or every default). */
export function checkOptionsObject<O>(options: O, what: string, example?: string): O {
  if (typeof options !== 'object' || options === null) {
    throw invalidOption(
      `${what} must be an object${example === undefined ? '' : ` such as ${example}`}, got ${describe(options)}`,
    );
  }
  return options;
}

/** An optional boolean option: undefined is false, anything but a boolean is refused. */
export function checkFlag(value: unknown, name: string): boolean {
  if (value === undefined) return false;
  if (typeof value !== 'boolean') {
    throw invalidOption(`${name} must be true or false, got ${describe(value)}`);
  }
  return value;
}

/** An optional `signal` option: undefined, or an AbortSignal. */
export function checkSignal(signal: unknown): AbortSignal | undefined {
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw invalidOption('signal must be an AbortSignal');
  }
  return signal;
}

/** A value as an error message names it: its type, and the value itself for a primitive. */
export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'string') return `the string ${JSON.stringify(value)}`;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') {
    return `${typeof value} ${String(value)}`;
  }
  return typeof value;
}

/** Refuses an option `known` does not name: a misspelled one is an error, not a default kept. */
export function checkKnownOptions(options: object, known: readonly string[], what: string): void {
  for (const name of Object.keys(options)) {
    if (known.includes(name)) continue;
    const guess = closest(name, known);
    throw invalidOption(
      `${what} has no option ${JSON.stringify(name.slice(0, 64))}` +
        (guess === undefined ? '' : ` (did you mean ${JSON.stringify(guess)}?)`) +
        `; the options are ${known.join(', ')}`,
    );
  }
}

/** checkOptionsObject, then checkKnownOptions; the object of `new Name()` is "Name options". */
export function checkOptions<O extends object>(
  options: O,
  known: readonly string[],
  call: string,
  example: string,
): O {
  checkOptionsObject(options, `${call.replace(/^new (\w+)\(\)$/, '$1')} options`, example);
  checkKnownOptions(options, known, call);
  return options;
}

/** Whether an options object has no option but `known` ones (no strings made: for hot paths). */
export function onlyKnownOptions(options: object, known: readonly string[]): boolean {
  for (const name in options) if (!known.includes(name)) return false;
  return true;
}

/** The option names of an options type: every key of T, no other (the type checker sees to it). */
export function optionNames<T>(names: Record<keyof T, true>): readonly string[] {
  return Object.keys(names);
}

/**
 * A URL (or a comma-separated list of them) as it may be shown: each password starred, that
 * of the user info (up to its last `@`, as a URL parser reads it: an unescaped `@` in a password
 * is the password's) and any query parameter named `...password` (pg reads
 * `?password=` as the connection's).
 */
export function hidePassword(url: string): string {
  return url
    .replace(/(\/\/[^:@/?#]*:)[^/?#]*@/g, '$1***@')
    .replace(/([?&][^=&#]*password=)[^&#]*/gi, '$1***');
}
