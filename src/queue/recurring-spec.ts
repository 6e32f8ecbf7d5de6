/**
 * Recurring schedules' specs, checked, and when their occurrences fall: `cron` (read by croner
 * in an IANA time zone; DST rules in docs/http-api.md) or `everyMs`, without drift, at startAt
 * + k * everyMs (k >= 0), else at createdAt + k * everyMs (k >= 1).
 */

import { Cron } from 'croner';
import { checkFlag, checkOption, describe, invalidOption } from '../validate.js';
import { checkBackoff, checkMaxAttempts, checkTopic, fieldsOf, MAX_DELAY_MS } from './message.js';
import type { ScheduleSpec } from '../protocol/model.js';

export type { CatchUp, Overlap, RecurringSpec, ScheduleSpec } from '../protocol/model.js';

/** Schedule names: letters, digits and . _ : - (no @: occurrence ids are `<name>@<time>`). */
export const SCHEDULE_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
export const MIN_EVERY_MS = 1_000;
export const MAX_EVERY_MS = 366 * 86_400_000;
/** Missed occurrences 'all' creates at most, oldest skipped beyond it. */
export const MAX_CATCH_UP = 1_000;
/** A payload is kept with the schedule: JSON, at most this many bytes as text. */
export const MAX_SCHEDULE_PAYLOAD_BYTES = 64 * 1024;

/** Every field of a spec (and of ScheduleInfo besides its own). */
export const SPEC_FIELDS = [
  'topic',
  'payload',
  'cron',
  'timezone',
  'everyMs',
  'startAt',
  'endAt',
  'catchUp',
  'overlap',
  'maxAttempts',
  'backoff',
  'paused',
];

export function checkScheduleName(name: unknown): string {
  if (typeof name !== 'string' || !SCHEDULE_NAME_PATTERN.test(name)) {
    throw invalidOption(
      `a schedule name is 1-128 letters, digits, '.', '_', ':' or '-', starting with a letter or digit; got ${describe(name)}`,
    );
  }
  return name;
}

/** Checks a RecurringSpec (or a stored ScheduleSpec) into a ScheduleSpec. */
/** `given` checked as a schedule made or changed at `now` (the queue's clock). */
export function checkSpec(given: unknown, now = Date.now()): ScheduleSpec {
  const spec = fieldsOf(given, SPEC_FIELDS, 'a schedule', '{ topic, cron }');
  const cron = spec.cron ?? null;
  const everyMs = spec.everyMs ?? null;
  if ((cron === null) === (everyMs === null)) {
    throw invalidOption('a schedule needs exactly one of cron and everyMs');
  }
  if (cron !== null && (typeof cron !== 'string' || cron.length > 200)) {
    throw invalidOption(`cron must be a cron expression (a string), got ${describe(cron)}`);
  }
  const fields = typeof cron === 'string' ? cron.trim().split(/\s+/).length : 0;
  if (cron !== null && fields !== 5 && fields !== 6) {
    throw invalidOption(
      `cron must have 5 fields (minute hour day month weekday), or 6 with seconds first; ${JSON.stringify(cron)} has ${fields}`,
    );
  }
  const timezone = spec.timezone ?? null;
  if (timezone !== null && cron === null) throw invalidOption('timezone goes with cron only');
  if (
    timezone !== null &&
    (typeof timezone !== 'string' || timezone.length === 0 || timezone.length > 100)
  ) {
    throw invalidOption(`timezone must be an IANA time zone name, got ${describe(timezone)}`);
  }
  const startAt = spec.startAt == null ? null : checkTime(spec.startAt, 'startAt');
  const endAt = spec.endAt == null ? null : checkTime(spec.endAt, 'endAt');
  if (startAt !== null && endAt !== null && endAt < startAt) {
    throw invalidOption('endAt must not be before startAt');
  }
  const payload = spec.payload === undefined ? null : spec.payload;
  let text: string | undefined;
  try {
    text = JSON.stringify(payload);
  } catch {
    text = undefined;
  }
  if (text === undefined) throw invalidOption('payload must be a JSON value');
  if (Buffer.byteLength(text) > MAX_SCHEDULE_PAYLOAD_BYTES) {
    throw invalidOption(`payload is over ${MAX_SCHEDULE_PAYLOAD_BYTES} bytes as JSON`);
  }
  const checked: ScheduleSpec = {
    topic: checkTopic(spec.topic),
    payload: JSON.parse(text) as unknown,
    cron: cron as string | null,
    timezone: cron === null ? null : ((timezone as string | null) ?? 'UTC'),
    everyMs:
      everyMs === null ? null : checkOption(everyMs, 'everyMs', MIN_EVERY_MS, MAX_EVERY_MS, true),
    startAt,
    endAt,
    catchUp: checkChoice(spec.catchUp ?? 'latest', 'catchUp', ['latest', 'all', 'none']),
    overlap: checkChoice(spec.overlap ?? 'allow', 'overlap', ['allow', 'skip']),
    maxAttempts: checkMaxAttempts(spec.maxAttempts),
    backoff: checkBackoff(spec.backoff ?? undefined) ?? null,
    paused: checkFlag(spec.paused, 'paused'),
  };
  // A cron expression or time zone croner cannot read, or a schedule that never runs again, is
  // refused here, not at its first use. An interval without startAt counts from now, as the
  // schedule made or changed now does (recordFor's anchorAt).
  // next() answers strictly later times: from startAt - 1, an occurrence at startAt counts.
  const from = Math.max(now, (checked.startAt ?? 0) - 1);
  if (occurrencesOf(checked, now).next(from) === null) {
    const rule =
      checked.cron === null ? `everyMs ${checked.everyMs}` : `cron ${JSON.stringify(checked.cron)}`;
    throw invalidOption(
      `${rule} has no occurrence at or after ${new Date(from + 1).toISOString()}${checked.endAt === null ? '' : ' up to endAt'}`,
    );
  }
  return checked;
}

function checkTime(value: unknown, name: string): number {
  return checkOption(value, name, 0, Date.now() + MAX_DELAY_MS, true);
}

function checkChoice<T extends string>(value: unknown, name: string, choices: readonly T[]): T {
  if (!choices.includes(value as T)) {
    throw invalidOption(`${name} must be one of ${choices.join(', ')}, got ${describe(value)}`);
  }
  return value as T;
}

export interface Occurrences {
  /** The first occurrence strictly after `after` (epoch ms), or null if there is none. */
  next(after: number): number | null;
}

/**
 * croner keeps per pattern an array of 10,000 years (80 KB), the same for every "any year"
 * pattern and only read once built: they share this one (else 800 MB for 10,000 schedules).
 */
const ANY_YEAR: number[] = Array<number>(10_000).fill(1);

function shareAnyYear(cron: Cron): void {
  const pattern = (cron as unknown as { _states?: { pattern?: { year?: unknown } } })._states
    ?.pattern;
  const years = pattern?.year;
  if (
    pattern !== undefined &&
    Array.isArray(years) &&
    years.length === ANY_YEAR.length &&
    years.every((year) => year === 1)
  ) {
    pattern.year = ANY_YEAR;
  }
}

/** A cron expression's runs in a zone: the first strictly after `after` (epoch ms), or null. */
type NextRun = (after: number) => number | null;

/** Next runs of Cron objects, by time zone and expression: schedules with the same share one. */
const crons = new Map<string, NextRun>();
const MAX_SHARED_CRONS = 4096;

/** A Cron for an expression in a zone (only ever asked for its next run, never started). */
function cronOf(expression: string, timezone: string): NextRun {
  const key = `${timezone}\n${expression}`;
  let nextRun = crons.get(key);
  if (nextRun !== undefined) return nextRun;
  const cron = new Cron(expression, { timezone, paused: true });
  cron.nextRun(new Date(0));
  shareAnyYear(cron);
  nextRun = lastAnswerKept(cron);
  // The oldest entry goes: schedules that hold it keep it; a new one makes another.
  if (crons.size >= MAX_SHARED_CRONS) crons.delete(crons.keys().next().value as string);
  crons.set(key, nextRun);
  return nextRun;
}

/**
 * A Cron's next run, keeping its last answer (~100 µs each): the run `at` croner gives for
 * `from` is its answer for all of [from, at), where many questions fall (check, step, info).
 */
function lastAnswerKept(cron: Cron): NextRun {
  // Nothing kept yet: no time is in [from, at).
  let from = Infinity;
  let at = -Infinity;
  return (after) => {
    if (after >= from && after < at) return at;
    const found = cron.nextRun(new Date(after))?.getTime() ?? null;
    if (found === null) return null;
    if (found !== at) {
      at = found;
      from = after;
    } else if (after < from) {
      from = after;
    }
    return found;
  };
}

/** The occurrences of a spec; `createdAt` anchors an interval schedule without startAt. */
export function occurrencesOf(spec: ScheduleSpec, createdAt: number): Occurrences {
  const end = spec.endAt ?? Infinity;
  const start = spec.startAt ?? -Infinity;
  if (spec.everyMs !== null) {
    const every = spec.everyMs;
    const anchor = spec.startAt ?? createdAt + every;
    return {
      next(after) {
        const k = after < anchor ? 0 : Math.floor((after - anchor) / every) + 1;
        const at = anchor + k * every;
        return at > end ? null : at;
      },
    };
  }
  let nextRun: NextRun;
  try {
    nextRun = cronOf(spec.cron as string, spec.timezone ?? 'UTC');
  } catch (err) {
    throw invalidOption(
      `cron ${JSON.stringify(spec.cron)} in ${spec.timezone}: ${(err as Error).message}`,
    );
  }
  return {
    next(after) {
      let from = Math.max(after, start - 1);
      for (;;) {
        const at = nextRun(from);
        if (at === null || at > end) return null;
        if (at > after) return at;
        from = at; // croner answers strictly later runs; this only guards against one that is not
      }
    },
  };
}
