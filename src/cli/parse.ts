/** Parsers of command-line values: each throws an InvalidArgumentError saying what is accepted. */

import { TickwheelError } from '../errors.js';
import { checkAllowEntry } from '../queue/push-guard.js';
import { InvalidArgumentError } from './args.js';
import { CliError } from './io.js';

const UNIT_MS: Readonly<Record<string, number>> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
};

/** "1500", "1500ms", "30s", "5m", "2h", "1.5d" -> milliseconds. */
export function parseDuration(text: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(text.trim());
  if (match === null) {
    throw new InvalidArgumentError('give a duration such as 1500 (ms), 30s, 5m, 2h or 1d');
  }
  return Number(match[1]) * UNIT_MS[match[2] ?? 'ms'];
}

export function parsePositiveDuration(text: string): number {
  const ms = parseDuration(text);
  if (ms <= 0) throw new InvalidArgumentError('give a duration above 0, such as 500ms, 10s or 1m');
  return ms;
}

/** "127.0.0.0/8,receiver.internal" -> the entries of a push allow list. */
export function parsePushAllow(text: string): string[] {
  const entries = text
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '');
  try {
    return entries.map(checkAllowEntry);
  } catch (err) {
    if (!(err instanceof TickwheelError)) throw err;
    throw new InvalidArgumentError(
      'give CIDR blocks (10.1.0.0/16, fd00::/8), addresses (127.0.0.1) or host names (receiver.internal), comma-separated',
    );
  }
}

/** An epoch-ms number or an ISO 8601 time -> epoch ms. */
export function parseTime(text: string): number {
  const trimmed = text.trim();
  const time = /^\d+(?:\.\d+)?$/.test(trimmed) ? Number(trimmed) : Date.parse(trimmed);
  if (!Number.isFinite(time)) {
    throw new InvalidArgumentError(
      'give a time as Unix epoch milliseconds or ISO 8601, such as 2030-01-01T09:00:00Z',
    );
  }
  return time;
}

export function integerParser(min: number, max: number): (text: string) => number {
  return (text: string) => {
    const value = Number(text);
    if (!/^\d+$/.test(text.trim()) || !Number.isSafeInteger(value) || value < min || value > max) {
      throw new InvalidArgumentError(`give a whole number from ${min} to ${max}`);
    }
    return value;
  };
}

/** JSON if it parses as JSON, the text itself otherwise. */
export function parsePayload(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/**
 * A payload given on the command line: JSON if it parses as JSON, the text itself otherwise;
 * but text that starts as a JSON object or array must be one (a quote or brace lost to the shell
 * would otherwise send a string without a word).
 */
export function parsePayloadArgument(text: string, what: string): unknown {
  const start = text.trimStart()[0];
  if (start !== '{' && start !== '[') return parsePayload(text);
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new CliError(
      `${what} starts with '${start}' but is not JSON (${(err as Error).message}); to send it as text, give it as a JSON string: '${JSON.stringify(text)}'`,
    );
  }
}

export function timeOption<Name extends string>(name: Name, description: string) {
  return { name, value: '<time>', description, parse: parseTime };
}

/** A duration flag; with `range` (ms), one outside it is refused naming the flag. */
export function durationOption<Name extends string>(
  name: Name,
  description: string,
  range?: readonly [min: number, max: number],
) {
  if (range === undefined) return { name, value: '<duration>', description, parse: parseDuration };
  const [min, max] = range;
  const parse = (text: string): number => {
    const ms = parseDuration(text);
    if (ms < min || ms > max) {
      throw new InvalidArgumentError(`give a duration from ${shown(min)} to ${shown(max)}`);
    }
    return ms;
  };
  return { name, value: '<duration>', description, parse };
}

/** Milliseconds as the largest unit that divides them (3600000 -> 1h). */
function shown(ms: number): string {
  for (const unit of ['d', 'h', 'm', 's'] as const) {
    if (ms >= UNIT_MS[unit] && ms % UNIT_MS[unit] === 0) return `${ms / UNIT_MS[unit]}${unit}`;
  }
  return `${ms}ms`;
}

export function integerOption<Name extends string>(
  name: Name,
  description: string,
  min: number,
  max: number,
) {
  return { name, value: '<n>', description, parse: integerParser(min, max) };
}
