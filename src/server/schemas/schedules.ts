/** JSON Schemas of the recurring schedule routes (routes/schedules.ts, src/queue/recurring.ts). */

import { MAX_EVERY_MS, MIN_EVERY_MS } from '../../queue/recurring-spec.js';
import {
  backoff,
  closed,
  done,
  errorBody,
  listOf,
  maxAttempts,
  nullable,
  exact,
  payload,
  scheduleParams,
  topic,
  routeSchema,
} from './common.js';

const catchUp = { enum: ['latest', 'all', 'none'] } as const;
const overlap = { enum: ['allow', 'skip'] } as const;

const scheduleFields = {
  topic,
  payload,
  cron: { type: 'string', minLength: 1, maxLength: 200 },
  timezone: { type: 'string', minLength: 1, maxLength: 100 },
  everyMs: { type: 'integer', minimum: MIN_EVERY_MS, maximum: MAX_EVERY_MS },
  startAt: { type: 'integer', minimum: 0 },
  endAt: { type: 'integer', minimum: 0 },
  catchUp,
  overlap,
  maxAttempts,
  backoff,
  paused: { type: 'boolean' },
} as const;

const scheduleInfo = exact({
  name: { type: 'string' },
  topic: { type: 'string' },
  payload,
  cron: nullable('string'),
  timezone: nullable('string'),
  everyMs: nullable('integer'),
  startAt: nullable('integer'),
  endAt: nullable('integer'),
  catchUp,
  overlap,
  maxAttempts: { type: 'integer' },
  backoff: { anyOf: [backoff, { type: 'null' }] },
  paused: { type: 'boolean' },
  createdAt: { type: 'integer' },
  updatedAt: { type: 'integer' },
  lastAt: nullable('integer'),
  nextAt: nullable('integer'),
  created: { type: 'integer' },
  skipped: { type: 'integer' },
});

export const scheduleListSchema = routeSchema('schedules', 'listSchedules', {
  summary: 'Recurring schedules, by name',
  response: { 200: listOf('schedules', scheduleInfo, true) },
});

export const scheduleGetSchema = routeSchema('schedules', 'getSchedule', {
  summary: 'A recurring schedule, with its next and last occurrence',
  params: scheduleParams,
  response: { 200: scheduleInfo, 404: errorBody },
});

export const schedulePutSchema = routeSchema('schedules', 'putSchedule', {
  summary: 'Create or replace a recurring schedule (a cron expression in a time zone, or everyMs)',
  description:
    'A queue keeps at most its maxSchedules recurring schedules (default 100,000): a new name past them is answered 409 ERR_TICKWHEEL_CONFLICT; one that exists is always replaced.',
  params: scheduleParams,
  body: closed(['topic'], scheduleFields),
  // 409 also: on a partitioned queue, a change that kept meeting others (docs/cluster.md).
  response: { 200: scheduleInfo, 409: errorBody },
});

export const schedulePatchSchema = routeSchema('schedules', 'updateSchedule', {
  summary: 'Change some fields of a recurring schedule (paused, cron, everyMs, payload, ...)',
  params: scheduleParams,
  body: closed([], scheduleFields),
  response: { 200: scheduleInfo, 404: errorBody, 409: errorBody },
});

export const scheduleDeleteSchema = routeSchema('schedules', 'deleteSchedule', {
  summary: 'Delete a recurring schedule (and its next occurrence, if created and not yet due)',
  params: scheduleParams,
  response: { 200: done('deleted'), 404: errorBody, 409: errorBody },
});
