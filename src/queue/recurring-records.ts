/**
 * A recurring schedule's record (what the store keeps) and its view (ScheduleInfo), built the
 * same way by the embedded Scheduler (recurring.ts) and the partitioned queue
 * (src/partitioned/schedules.ts), and the refusal of one more than the queue keeps.
 */

import { TickwheelStateError } from '../errors.js';
import type { ScheduleRequest } from './message.js';
import {
  checkSpec,
  occurrencesOf,
  type Occurrences,
  type RecurringSpec,
  type ScheduleSpec,
} from './recurring-spec.js';
import type { ScheduleInfo } from '../protocol/model.js';

export type { ScheduleInfo } from '../protocol/model.js';

export interface ScheduleRecord {
  name: string;
  spec: ScheduleSpec;
  createdAt: number;
  updatedAt: number;
  /** Where its occurrences are counted from: created or last changed. */
  anchorAt: number;
  /** The latest occurrence handled (its message created, or skipped); null before the first. */
  through: number | null;
  /** The latest occurrence whose message was created; null before the first. */
  lastCreated: number | null;
  created: number;
  skipped: number;
}

/**
 * The refusal of a new schedule `name` while `count` exist and the queue keeps at most `most`
 * (its maxSchedules). A change of one that exists is never refused.
 */
export function tooManySchedules(name: string, count: number, most: number): TickwheelStateError {
  const raise = 'open the queue with a larger maxSchedules (tickwheel serve --max-schedules)';
  const message =
    most === 0
      ? `this queue keeps no recurring schedules (maxSchedules: 0): to create ${name}, ${raise}`
      : `${count} recurring ${count === 1 ? 'schedule exists' : 'schedules exist'}, the most ` +
        `this queue keeps (maxSchedules: ${most}): delete one before creating recurring ` +
        `schedule ${name}, or ${raise}`;
  return new TickwheelStateError('ERR_TICKWHEEL_CONFLICT', message);
}

export function occurrenceId(name: string, at: number): string {
  return `${name}@${at}`;
}

/** A spec checked at `now`, and its occurrences' messages as the queue checks them (`check`). */
export function checkedSpec(
  spec: unknown,
  check: (request: ScheduleRequest) => void,
  now: number,
): ScheduleSpec {
  const checked = checkSpec(spec, now);
  check(occurrenceRequest(checked));
  return checked;
}

/** The message of each occurrence of a spec, but for its id and due time. */
export function occurrenceRequest(spec: ScheduleSpec): ScheduleRequest {
  return {
    topic: spec.topic,
    payload: spec.payload,
    maxAttempts: spec.maxAttempts,
    ...(spec.backoff === null ? {} : { backoff: spec.backoff }),
  };
}

/**
 * A stored spec with a patch applied, as the fields a user gives: what the patch names wins,
 * null removes a field, and switching between cron and everyMs drops the other.
 */
export function mergedSpec(
  spec: ScheduleSpec,
  patch: Partial<RecurringSpec>,
): Record<string, unknown> {
  const merged: Record<string, unknown> = { ...spec };
  for (const [key, value] of Object.entries(patch)) merged[key] = value;
  if ('cron' in patch && patch.cron != null) delete merged.everyMs;
  if ('everyMs' in patch && patch.everyMs != null) {
    delete merged.cron;
    delete merged.timezone;
  }
  for (const key of Object.keys(merged)) if (merged[key] === null) delete merged[key];
  return merged;
}

/** The record of a schedule created or changed at `now`; `old` keeps its history. */
export function recordFor(
  name: string,
  spec: ScheduleSpec,
  old: ScheduleRecord | undefined,
  now: number,
): ScheduleRecord {
  const at = Math.ceil(now);
  return {
    name,
    spec,
    createdAt: old?.createdAt ?? at,
    updatedAt: at,
    anchorAt: at,
    through: null,
    lastCreated: old?.lastCreated ?? null,
    created: old?.created ?? 0,
    skipped: old?.skipped ?? 0,
  };
}

/** A record as get / list answer it, at `now`. */
export function infoOf(
  record: ScheduleRecord,
  now: number,
  occurrences: Occurrences = occurrencesOf(record.spec, record.anchorAt),
): ScheduleInfo {
  let nextAt: number | null = null;
  if (!record.spec.paused) {
    nextAt =
      record.through !== null && record.through > now && record.lastCreated === record.through
        ? record.through
        : occurrences.next(Math.max(record.through ?? record.anchorAt, now - 1));
  }
  return {
    name: record.name,
    ...record.spec,
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
    lastAt: record.lastCreated,
    nextAt,
    created: record.created,
    skipped: record.skipped,
  };
}
